// railyard._core: the exception classes, lent memory, the progress API, and the module itself.
#include <pybind11/stl.h>

#include <array>
#include <string>
#include <vector>

#include "binding.h"
#include "railyard/launch/progress.h"

namespace railyard::python {
namespace {

// One class per StatusCode, indexed by the code; [0] (OK) holds railyard.Error, the base.
std::array<PyObject*, static_cast<size_t>(StatusCode::kInternal) + 1> g_errors{};

struct ErrorClass {
  StatusCode code;
  const char* name;
  PyObject* builtin;  // the built-in class it also derives from
};

void AddErrorClasses(py::module_& m) {
  PyObject* base = PyErr_NewExceptionWithDoc(
      "railyard.Error",
      "Base of every error Railyard raises; `code` names the Status code (\"DATA_LOSS\").",
      PyExc_Exception, nullptr);
  if (base == nullptr) throw py::error_already_set();
  g_errors[0] = base;
  m.attr("Error") = py::handle(base);
  const ErrorClass classes[] = {
      {StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError},
      {StatusCode::kNotFound, "NotFoundError", PyExc_FileNotFoundError},
      {StatusCode::kAlreadyExists, "AlreadyExistsError", PyExc_RuntimeError},
      {StatusCode::kFailedPrecondition, "FailedPreconditionError", PyExc_RuntimeError},
      {StatusCode::kDeadlineExceeded, "DeadlineExceededError", PyExc_RuntimeError},
      {StatusCode::kUnavailable, "UnavailableError", PyExc_RuntimeError},
      {StatusCode::kAborted, "AbortedError", PyExc_RuntimeError},
      {StatusCode::kDataLoss, "CorruptCheckpointError", PyExc_RuntimeError},
      {StatusCode::kPermissionDenied, "PermissionDeniedError", PyExc_RuntimeError},
      {StatusCode::kResourceExhausted, "ResourceExhaustedError", PyExc_RuntimeError},
      {StatusCode::kUnimplemented, "UnimplementedError", PyExc_RuntimeError},
      {StatusCode::kInternal, "InternalError", PyExc_RuntimeError},
  };
  for (const ErrorClass& c : classes) {
    const std::string qualified = std::string("railyard.") + c.name;
    py::dict attrs;
    attrs["code"] = std::string(StatusCodeName(c.code));
    py::tuple bases = py::make_tuple(py::handle(base), py::handle(c.builtin));
    PyObject* cls = PyErr_NewException(qualified.c_str(), bases.ptr(), attrs.ptr());
    if (cls == nullptr) throw py::error_already_set();
    g_errors[static_cast<size_t>(c.code)] = cls;
    m.attr(c.name) = py::handle(cls);
  }
}

PyObject* ErrorClassFor(StatusCode code) {
  size_t i = static_cast<size_t>(code);
  return i < g_errors.size() && g_errors[i] != nullptr ? g_errors[i] : g_errors[0];
}

// ---- Progress (launch/progress.h) ----

// Heartbeat and Step return only OK or UNAVAILABLE ("dropped"); raised like any error.
void RegisterProgress(py::module_& m) {
  py::class_<launch::ProgressReporter>(m, "ProgressReporter")
      .def_static("from_environment",
                  [] { return Unwrap(launch::ProgressReporter::FromEnvironment()); })
      .def_static("connect",
                  [](std::string path, int rank) {
                    return Unwrap(launch::ProgressReporter::Connect(std::move(path), rank));
                  })
      .def_static("disabled", &launch::ProgressReporter::Disabled)
      .def_property_readonly("enabled", &launch::ProgressReporter::enabled)
      .def_property_readonly("rank", &launch::ProgressReporter::rank)
      .def("heartbeat", [](launch::ProgressReporter& r) { ThrowIfError(r.Heartbeat()); })
      .def("step", [](launch::ProgressReporter& r, int64_t n) { ThrowIfError(r.Step(n)); });

  py::class_<launch::ProgressListener>(m, "ProgressListener")
      .def_static("bind",
                  [](std::string path, int world_size) {
                    return Unwrap(launch::ProgressListener::Bind(std::move(path),
                                                                 {.world_size = world_size}));
                  })
      .def(
          "poll",
          [](launch::ProgressListener& l, double timeout_s) {
            return Unwrap(
                WithoutGil([&] { return l.Poll(base::Deadline::After(Seconds(timeout_s))); }));
          },
          py::arg("timeout_s"))
      .def_property_readonly("path", &launch::ProgressListener::path)
      .def_property_readonly("received", &launch::ProgressListener::received)
      .def_property_readonly("malformed", &launch::ProgressListener::malformed)
      .def_property_readonly("last_malformed", &launch::ProgressListener::last_malformed)
      .def_property_readonly("ranks", [](const launch::ProgressListener& l) {
        py::list out;
        for (const launch::RankProgress& r : l.ranks()) {
          py::dict d;
          d["heard"] = r.heard;
          d["last_unix_ns"] = r.last_unix_ns;
          d["last_step"] = r.last_step;
          std::vector<double> times;
          for (base::Duration t : r.step_times) {
            times.push_back(std::chrono::duration<double>(t).count());
          }
          d["step_seconds"] = times;
          out.append(d);
        }
        return out;
      });
}

}  // namespace

void Raise(const Status& status) {
  PyErr_SetString(ErrorClassFor(status.code()), status.message().c_str());
  throw py::error_already_set();
}

py::object ErrorObject(const Status& status) {
  if (status.ok()) return py::none();
  return py::reinterpret_borrow<py::object>(ErrorClassFor(status.code()))(status.message());
}

Memory::Memory(py::handle object, bool writable) {
  if (PyObject_CheckBuffer(object.ptr())) {
    const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object.ptr(), &view_, flags) != 0) throw py::error_already_set();
    has_view_ = true;
    data_ = view_.buf;
    size_ = static_cast<size_t>(view_.len);
    return;
  }
  if (py::isinstance<py::tuple>(object) && py::len(object) == 2) {
    auto t = py::reinterpret_borrow<py::tuple>(object);
    data_ = reinterpret_cast<void*>(t[0].cast<uintptr_t>());
    size_ = t[1].cast<size_t>();
    return;
  }
  throw py::type_error(
      "expected an object with the buffer protocol (a C-contiguous numpy array, bytes, "
      "bytearray) or an (address, nbytes) tuple, got " +
      std::string(py::str(py::type::handle_of(object).attr("__name__"))));
}

Memory::~Memory() {
  if (has_view_) PyBuffer_Release(&view_);
}

void RegisterModule(py::module_& m) {
  m.doc() = "Railyard's C++ libraries, translated; use the railyard package, not this module.";
  AddErrorClasses(m);
  RegisterProgress(m);
  RegisterStorage(m);
  RegisterTopology(m);
}

}  // namespace railyard::python

PYBIND11_MODULE(_core, m) { railyard::python::RegisterModule(m); }
