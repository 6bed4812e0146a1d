"""The package itself: `import railyard` without torch, submodules on first use, the
exception classes, and what `cmake --install` installs."""

import os
import subprocess
import sys

import pytest

import railyard


def python(code, **env):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, **env))
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_import_railyard_never_imports_torch():
    out = python(
        "import sys, railyard\n"
        "import railyard.checkpoint, railyard.topology, railyard.place, railyard.progress\n"
        "print('torch' in sys.modules)\n")
    assert out == "False\n"


def test_submodules_load_on_first_use():
    out = python("import sys, railyard\n"
                 "print('railyard.checkpoint' in sys.modules, railyard.checkpoint.__name__,\n"
                 "      sorted(set(railyard._SUBMODULES) - set(dir(railyard))))\n")
    assert out == "False railyard.checkpoint []\n"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        railyard.nope


# Status code -> (class, the built-in class it also is).
ERRORS = {
    "INVALID_ARGUMENT": (railyard.InvalidArgumentError, ValueError),
    "NOT_FOUND": (railyard.NotFoundError, FileNotFoundError),
    "ALREADY_EXISTS": (railyard.AlreadyExistsError, RuntimeError),
    "FAILED_PRECONDITION": (railyard.FailedPreconditionError, RuntimeError),
    "DEADLINE_EXCEEDED": (railyard.DeadlineExceededError, RuntimeError),
    "UNAVAILABLE": (railyard.UnavailableError, RuntimeError),
    "ABORTED": (railyard.AbortedError, RuntimeError),
    "DATA_LOSS": (railyard.CorruptCheckpointError, RuntimeError),
    "PERMISSION_DENIED": (railyard.PermissionDeniedError, RuntimeError),
    "RESOURCE_EXHAUSTED": (railyard.ResourceExhaustedError, RuntimeError),
    "UNIMPLEMENTED": (railyard.UnimplementedError, RuntimeError),
    "INTERNAL": (railyard.InternalError, RuntimeError),
}


@pytest.mark.parametrize("code", sorted(ERRORS))
def test_each_status_code_has_its_exception_class(code):
    cls, builtin = ERRORS[code]
    assert cls.code == code and issubclass(cls, railyard.Error) and issubclass(cls, builtin)
    assert cls.__module__ == "railyard"
    e = cls("step 3: 'x/rank-00001.bin' bytes [0, 4096): checksum mismatch")
    assert str(e) == "step 3: 'x/rank-00001.bin' bytes [0, 4096): checksum mismatch"


def test_cmake_install_puts_an_importable_package(tmp_path):
    build = os.environ.get("RAILYARD_BUILD_DIR")
    if not build:
        pytest.fail("RAILYARD_BUILD_DIR is not set (ctest sets it to the build directory)")
    out = subprocess.run(["cmake", "--install", build, "--component", "python"],
                         capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, DESTDIR=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    installed = [root for root, dirs, files in os.walk(tmp_path)
                 if "__init__.py" in files and os.path.basename(root) == "railyard"]
    assert len(installed) == 1, installed
    names = sorted(os.listdir(installed[0]))
    assert {"__init__.py", "checkpoint.py", "data.py", "place.py", "progress.py",
            "topology.py"} <= set(names)
    assert any(n.startswith("_core.") and n.endswith(".so") for n in names), names
    site = os.path.dirname(installed[0])
    out = python("import railyard, railyard.checkpoint; print(railyard.__file__)", PYTHONPATH=site)
    assert out.startswith(site)
