"""Files that appear whole or not at all.

A file is written under a temporary name in its final directory, flushed to
disk, given the mode a plain `open` would give it, and moved into place with
`os.replace`: a crash or a full disk never leaves a truncated file behind.
No TensorFlow here, so the tokenizer and the training code share it.

Example:

>>> atomic_write("run/run.json", '{"identity": {}}')
"""

import os
import tempfile


def default_file_mode():
    """The mode of a new file under the current umask (`mkstemp` makes 0o600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def fsync_replace(temporary, final):
    """Flushes `temporary` to disk and moves it to `final`."""
    with open(temporary, "rb+") as f:
        os.fsync(f.fileno())
    os.chmod(temporary, default_file_mode())
    os.replace(temporary, final)
    try:  # make the rename itself durable
        fd = os.open(os.path.dirname(final) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def atomic_write(path, data):
    """Writes `data` (str, as UTF-8, or bytes) to `path` atomically."""
    directory = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        fsync_replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
