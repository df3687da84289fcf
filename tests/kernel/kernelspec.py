"""Shared by the kernel tests: a kernel spec for the mechlab under test, in a temporary Jupyter
path, and a started client. `python3 test_x.py path/to/mechlab`."""
import atexit
import glob
import os
import shutil
import subprocess
import sys
import tempfile

failures = []
passed = [0]


def check(cond, what):
    """One check's line, as the Lua tests print theirs; a failed one is kept for finish()."""
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if cond:
        passed[0] += 1
    else:
        failures.append(what)


def finish():
    """The closing line; exit status 1 when a check failed."""
    print("%d passed, %d failed" % (passed[0], len(failures)))
    if failures:
        print("failed: %s" % failures)
        sys.exit(1)


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
