"""Shared by the kernel tests: a kernel spec for the mechlab under test, in a temporary Jupyter
path, and a started client. `python3 test_x.py path/to/mechlab`."""
import atexit
import glob
import os
import shutil
import subprocess
import sys
import tempfile


def install(mechlab):
    """Installs the spec of this mechlab (`--install-kernel --prefix`) into a temporary directory
    first on JUPYTER_PATH; ASan reports go to files there. Returns the directory."""
    root = tempfile.mkdtemp(prefix="mechlab-kernel-test-")
    atexit.register(shutil.rmtree, root, True)
    subprocess.run([mechlab, "--install-kernel", "--prefix", root], check=True, stdout=subprocess.DEVNULL)
    os.environ["JUPYTER_PATH"] = os.path.join(root, "share", "jupyter")
    os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(root, "runtime")
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        opts = os.environ.get(var, "")
        os.environ[var] = (opts + ":" if opts else "") + "log_path=" + os.path.join(root, "sanitizer")
    return root


def sanitizer_reports(root):
    """The sanitizer reports the kernels wrote (none when all went well)."""
    out = []
    for path in glob.glob(os.path.join(root, "sanitizer*")):
        with open(path, errors="replace") as f:
            out.append(path + ":\n" + f.read())
    return out


def mechlab_from_argv():
    if len(sys.argv) < 2:
        sys.exit("usage: %s path/to/mechlab" % sys.argv[0])
    return os.path.abspath(sys.argv[1])
