"""Hiding TensorFlow's start-up lines in command-line programs.

Importing TensorFlow, then running its first op, on a machine without a GPU
writes lines such as these to standard error:

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    I0000 ... cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available CPU ...
    E0000 ... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: ... (303)

and, on some builds, "oneDNN custom operations are on ...". `quiet_tensorflow()`
hides them. Call it before TensorFlow is first imported, that is before
Keras or any keras_transformer module that imports Keras:

>>> from keras_transformer.quiet import quiet_tensorflow
>>> quiet_tensorflow()          # False, and nothing changed, if TensorFlow is imported already
True
>>> import tensorflow as tf     # nothing on standard error

`import keras_transformer` calls it, through `quiet_tensorflow_if_asked()`,
before it imports Keras: in the `keras-transformer` command line (the script,
or `python -m keras_transformer.cli`) unless `--verbose` is given, and in any
program that sets `KERAS_TRANSFORMER_QUIET=1` before importing it, as
`examples/wmt14.py` does unless given `--verbose`:

>>> import os
>>> os.environ["KERAS_TRANSFORMER_QUIET"] = "1"   # as os.environ["KERAS_BACKEND"], before the import
>>> import keras_transformer                        # imports Keras and TensorFlow: nothing on standard error

Why in `import keras_transformer`: the package imports its layers and models
as it is imported, so that `import keras_transformer` alone registers them
for `keras.saving.load_model`; any program that imports any part of it, the
command line included, has imported TensorFlow before its own code runs.
"""

import contextlib
import importlib.util
import os
import sys

# 3 hides TensorFlow's C++ INFO, WARNING and ERROR lines ("failed call to
# cuInit" is an ERROR); errors that matter still raise Python exceptions.
LOG_LEVEL = "3"

# "1": `import keras_transformer` hides TensorFlow's start-up lines (outside the command line).
ENVIRONMENT_VARIABLE = "KERAS_TRANSFORMER_QUIET"

COMMAND = "keras-transformer"
COMMAND_MODULE = "keras_transformer.cli"


def quiet_tensorflow():
    """Hides TensorFlow's start-up lines from this process; returns whether it could.

    Sets `TF_CPP_MIN_LOG_LEVEL` to 3 (unless set already: an explicit value
    wins), which TensorFlow reads once, and mutes standard error (file
    descriptor 2) while the `tensorflow` package itself is imported, which
    hides the lines written before TensorFlow's logging starts (absl,
    cudart_stub). TensorFlow is not imported here: a program that never
    needs it does not pay for it.

    Returns:
        True if TensorFlow was not imported yet (the lines will be hidden),
        False if it was (too late: nothing is changed).
    """
    if "tensorflow" in sys.modules:
        return False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", LOG_LEVEL)
    if not any(isinstance(finder, _MutedImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MutedImport("tensorflow"))
    return True


def quiet_tensorflow_if_asked(argv=None, orig_argv=None, environ=None):
    """Calls `quiet_tensorflow()` if this process asks for it; returns whether it did.

    `keras_transformer/__init__.py` calls it first, before it imports Keras.
    Asked: the `keras-transformer` command line (`is_command_line`) without
    `--verbose`; any other program with `KERAS_TRANSFORMER_QUIET=1`.
    The arguments default to `sys.argv`, `sys.orig_argv` and `os.environ`.

    >>> quiet_tensorflow_if_asked(["keras-transformer", "translate", "m", "--verbose"], environ={})
    False
    >>> quiet_tensorflow_if_asked(["train.py"], environ={})
    False
    """
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    if is_command_line(argv, orig_argv):
        asked = "--verbose" not in argv[1:]
    else:
        asked = environ.get(ENVIRONMENT_VARIABLE) == "1"
    return asked and quiet_tensorflow()


def is_command_line(argv=None, orig_argv=None):
    """Whether this process is the `keras-transformer` command line: the script
    pip installs (`sys.argv[0]`), or `python -m keras_transformer.cli`, whose
    `sys.argv[0]` is "-m" while Python imports the packages above it.

    >>> is_command_line(["/venv/bin/keras-transformer", "translate"])
    True
    >>> is_command_line(["-m", "translate"], ["python", "-m", "keras_transformer.cli", "translate"])
    True
    >>> is_command_line(["-m"], ["python", "-m", "pytest"]), is_command_line(["train.py"])
    (False, False)
    """
    argv = sys.argv if argv is None else argv
    if not argv:
        return False
    name = os.path.basename(argv[0])
    for suffix in (".exe", "-script.py"):  # Windows: keras-transformer.exe
        name = name.removesuffix(suffix)
    if name == COMMAND:
        return True
    if argv[0] != "-m":
        return False
    orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    for i, arg in enumerate(orig_argv[1:], 1):
        if arg.startswith("-m"):  # the first -m is Python's: its module, here or as the next word
            return (arg[2:] or (orig_argv[i + 1] if i + 1 < len(orig_argv) else "")) == COMMAND_MODULE
    return False


@contextlib.contextmanager
def stderr_muted():
    """Sends what this process writes to standard error meanwhile, C and C++
    code included, to `os.devnull`.

    A Python exception raised inside still propagates, and is printed after.

    >>> with stderr_muted():
    ...     _ = os.write(2, b"not shown\\n")
    """
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no standard error: nothing to mute
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class _MutedImport:
    """A `sys.meta_path` finder that runs the first import of the top-level
    module `name` with standard error muted, then leaves `sys.meta_path`."""

    def __init__(self, name):
        self.name = name

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)  # by the other finders
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def muted_exec_module(module):
            del loader.exec_module  # the loader's own method again
            with stderr_muted():
                exec_module(module)

        loader.exec_module = muted_exec_module
        return spec
