"""The `keras-transformer` command: TensorFlow's start-up lines hidden, then
`keras_transformer.cli.main`.

Importing TensorFlow writes lines such as "Could not find cuda drivers",
"oneDNN custom operations are on" and "failed call to cuInit" to standard
error, some of them before TensorFlow's own logging exists, so that only
muting file descriptor 2 while it is imported hides them. The command does
that here, in a module outside the `keras_transformer` package, because
importing any part of the package imports Keras, and so TensorFlow, first.
`import keras_transformer` itself changes nothing in the process;
`python -m keras_transformer.cli` is the same command without this.

`--verbose`, before or after the command, shows the lines.
"""

import contextlib
import os
import sys


@contextlib.contextmanager
def stderr_muted():
    """Sends what the process writes to standard error meanwhile, C++ code
    included, to `os.devnull`; an exception raised inside still propagates."""
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


def import_tensorflow_quietly():
    """Imports TensorFlow, if installed, with its start-up lines hidden."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # its C++ log lines after start-up, cuInit's included
    with stderr_muted(), contextlib.suppress(ImportError):
        import tensorflow  # noqa: F401


def main():
    if "--verbose" not in sys.argv[1:]:
        import_tensorflow_quietly()
    from keras_transformer.cli import main as run_command

    return run_command()


if __name__ == "__main__":
    sys.exit(main())
