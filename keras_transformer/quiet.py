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

`keras-transformer` calls it unless given `--verbose`.
"""

import contextlib
import importlib.util
import os
import sys

# 3 hides TensorFlow's C++ INFO, WARNING and ERROR lines ("failed call to
# cuInit" is an ERROR); errors that matter still raise Python exceptions.
LOG_LEVEL = "3"


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
