"""Lock files that name their holder, and that a killed process never leaves held.

A lock is an exclusive `flock` on a file that records who holds it (the
process id, the host, the command line, since when). The operating system
releases a `flock` when its process ends, however it ends (SIGKILL
included), so a lock file left behind by a killed process holds nothing:
the next process takes it. While held, `LockedError` names the holder. No
TensorFlow here: the training code and the export share it.

Example:

>>> with holding("runs/base/train.lock", "Output directory 'runs/base'"):
...     train(...)
>>> is_held("saved_models/mine/.export-x1y2.lock")
False
"""

import contextlib
import datetime
import json
import os
import socket
import sys
import time

try:
    import fcntl
except ImportError:  # not a POSIX system: no `flock`
    fcntl = None

_HELD = set()  # the lock files this process holds: taking one again is a no-op


class LockedError(OSError):
    """The lock is held by another process, which the message names."""


def _holder():
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]) if sys.argv else "python",
        "since": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def _describe(path):
    """Who holds `path`, as its file says."""
    try:
        with open(path, encoding="utf-8") as f:
            holder = json.load(f)
        return f"process {holder['pid']} on {holder['host']} ({holder['command']}, since {holder['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _take(path, tries=3):
    """An open descriptor of `path` with its `flock` taken, or None if another holds it.

    A few tries a moment apart: `is_held` takes a lock for an instant."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            tries -= 1
            if not tries:
                return None
            time.sleep(0.05)
            continue
        try:  # the file locked is still the one at `path` (its holder did not remove it meanwhile)
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


@contextlib.contextmanager
def holding(path, what):
    """Holds the lock file `path` for the block, then removes it.

    `what` names the thing locked in the error, e.g. "Output directory
    'runs/base'". The directory of `path` is created if needed, and removed
    again at the end if it was made here and is then empty. Within one
    process, holding a lock it already holds is a no-op.

    Raises:
        LockedError: another process holds `path`.
    """
    path = os.path.abspath(path)
    if path in _HELD or fcntl is None:
        yield
        return
    directory = os.path.dirname(path)
    made = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    fd = _take(path)
    if fd is None:
        if made:
            _remove_empty(directory)
        raise LockedError(f"{what} is in use: {_describe(path)} holds {path}. Wait for it to end or stop it, "
                          "then run again.")
    _HELD.add(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(_holder()).encode("utf-8"))
        yield
    finally:
        _HELD.discard(path)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # while still held: no other process locks the file being removed
        os.close(fd)
        if made:
            _remove_empty(directory)


def is_held(path):
    """Whether a process holds the lock file `path` (False if there is none)."""
    if os.path.abspath(path) in _HELD:
        return True
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _remove_empty(directory):
    with contextlib.suppress(OSError):
        os.rmdir(directory)
