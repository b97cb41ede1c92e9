"""Files and folders that appear whole or not at all.

A file is written under a temporary name in its final directory, flushed to
disk and moved into place with `os.replace`: a crash or a full disk never
leaves a truncated file behind. `check_room` says before a write whether
its bytes fit, for writers that must not fail midway (HDF5's). The
temporary file is created with the mode a plain `open` gives (0o666 less the
umask). A new folder is filled beside its final place, then renamed
(`new_folder`). No TensorFlow here, so the
tokenizer and the training code share it.

Example:

>>> atomic_write("run/run.json", '{"identity": {}}')
>>> with replacing("run/model.weights.h5") as temporary:
...     model.save_weights(temporary)
>>> with new_folder("opus_mt_en_de", "--output") as staging:
...     write_files(staging)
"""

import contextlib
import errno
import os
import secrets
import shutil
import tempfile


def _new_file(directory, suffix):
    """Creates an empty file with a fresh name in `directory`; returns its path."""
    while True:
        path = os.path.join(directory, f".tmp-{secrets.token_hex(8)}{suffix}")
        try:
            # 0o666: the kernel applies the umask (mkstemp would make 0o600).
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return path
        except FileExistsError:
            continue


def _fsync_replace(temporary, final):
    """Flushes `temporary` to disk and moves it to `final`."""
    with open(temporary, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(temporary, final)
    try:  # make the rename itself durable
        fd = os.open(os.path.dirname(final) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


@contextlib.contextmanager
def replacing(path, suffix=""):
    """A temporary file beside `path`, moved onto `path` if the block succeeds.

    Yields the temporary file's path (an empty file, ending in `suffix`,
    e.g. `.weights.h5` for writers that check the name). If the block
    raises, the temporary file is removed and `path` is left as it was.
    """
    temporary = _new_file(os.path.dirname(os.path.abspath(path)), suffix)
    try:
        yield temporary
        _fsync_replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def atomic_write(path, data):
    """Writes `data` (str, as UTF-8, or bytes) to `path` atomically."""
    with replacing(path) as temporary, open(temporary, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def check_room(directory, size, what):
    """Raises `OSError` (`ENOSPC`, `EFBIG`) naming `what` unless a file of
    `size` bytes fits in `directory`: its free space, and the process's
    file size limit (`ulimit -f`)."""
    stat = os.statvfs(directory)
    free = stat.f_bavail * stat.f_frsize
    if size > free:
        raise OSError(errno.ENOSPC, f"No space left on device for {what}: it takes about {size / 2**20:.1f} MiB, "
                                    f"and {directory} has {free / 2**20:.1f} MiB free")
    try:
        import resource
    except ImportError:  # not a POSIX system: no file size limit
        return
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and size > limit:
        raise OSError(errno.EFBIG, f"File too large for {what}: it takes about {size / 2**20:.1f} MiB, over this "
                                   f"process's file size limit of {limit / 2**20:.1f} MiB (ulimit -f)")
@contextlib.contextmanager
def new_folder(path, name):
    """A folder beside `path`, which becomes `path` if the block succeeds.

    `path` must not exist, or be an empty folder: else `FileExistsError`
    naming the argument `name`. Yields the empty folder to fill; if the
    block raises, it is removed and `path` is left as it was.
    """
    path = os.fspath(path)
    if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise FileExistsError(f"{path!r} exists and is not an empty folder. Received: {name}={path!r}")
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix=".new-", dir=parent)
    staging = os.path.join(temporary, "folder")
    os.makedirs(staging)
    try:
        yield staging
        if os.path.isdir(path):
            os.rmdir(path)  # empty, checked above
        os.replace(staging, path)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
