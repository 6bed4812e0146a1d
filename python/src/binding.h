// What the translation units of railyard._core share: a Railyard Status raised as the Python
// exception for its code, memory lent by a Python object, and each unit's registration.
//
// The extension only translates (DESIGN.md, "Python"): every function converts its arguments,
// calls one library function and converts the answer; the pure-Python modules of
// python/railyard/ give them their Python shape (docs/python.md).
//
// Thread-safety: everything here needs the GIL; the bound calls release it around library
// calls that block (I/O, agreement between ranks, waits).
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstddef>
#include <utility>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::python {

namespace py = pybind11;

// Raises the exception class of `status`'s code (module.cc: NOT_FOUND is a FileNotFoundError,
// INVALID_ARGUMENT a ValueError, DATA_LOSS a CorruptCheckpointError, ...) with the message.
// Precondition: !status.ok().
[[noreturn]] void Raise(const Status& status);

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

// Runs `f` (a library call that may block) without the GIL and returns its answer, once the
// GIL is held again.
template <typename F>
auto WithoutGil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

// The exception object `status` would raise, not raised; None for OK.
py::object ErrorObject(const Status& status);

// Seconds from Python as a Duration.
inline base::Duration Seconds(double s) {
  return std::chrono::duration_cast<base::Duration>(std::chrono::duration<double>(s));
}

// A contiguous block of memory lent by a Python object for as long as this lives: an object
// with the buffer protocol (a C-contiguous numpy array, bytes, bytearray, memoryview), or a
// tuple (address, nbytes) for memory whose owner the caller keeps alive (a CPU torch tensor:
// (t.data_ptr(), t.numel() * t.element_size())). TypeError / BufferError otherwise, and for
// a read-only buffer when `writable`. Destroy it with the GIL held.
class Memory {
 public:
  Memory(py::handle object, bool writable);
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  Py_buffer view_{};
  bool has_view_ = false;
  void* data_ = nullptr;
  size_t size_ = 0;
};

void RegisterStorage(py::module_& m);   // storage.cc: checkpoints, packed data
void RegisterTopology(py::module_& m);  // topology.cc: topology files, exports, placement

}  // namespace railyard::python
