"""Keep freed host memory in the process, so that training steps reuse it.

Every compiled training step on a CPU allocates its temporary buffers (the
logits, their gradient, the activations kept for the backward pass) and
frees them at the end. glibc's `malloc` maps a large block with its own
`mmap` (always, for a block over 64 MiB that a worker thread asks for), and
`free` hands it back to the kernel. So each step starts on fresh pages, and
the kernel faults in and zeroes every 4 KiB page again: for the `tiny`
preset at 32 x 32 tokens with a 37k vocabulary, a 348 MB temporary buffer,
about 86,000 page faults and 0.4 s of kernel time per step on 2 cores
(benchmarks/README.md).

`RETAIN` sets glibc's allocator so that all threads share the main heap
(`MALLOC_ARENA_MAX=1`), large blocks come from that heap instead of `mmap`
(`MALLOC_MMAP_MAX_=0`) and freed memory stays there
(`MALLOC_TRIM_THRESHOLD_`, 4 GiB): after the first steps a step allocates
from memory the process already has. The price: the process keeps its peak
memory until it exits (as TensorFlow's GPU allocator, jemalloc or tcmalloc
do), and threads share one allocator lock.

glibc reads these variables when the process starts, and a thread that has
allocated keeps its own heap, so setting them from Python (`mallopt`) after
TensorFlow has started its threads does not reliably take. A training
script therefore restarts itself with them: `restart_retaining_freed_memory()`,
which `examples/wmt14.py` and `keras-transformer train` call first unless
given `--release-host-memory`. In your own script, call it first, or set
the variables in the shell:

    MALLOC_ARENA_MAX=1 MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=4294967296 python train.py

Example:

>>> from keras_transformer.training.host_memory import restart_retaining_freed_memory
>>> restart_retaining_freed_memory()  # re-executes this script once, with RETAIN set
"""

import os
import platform
import sys

RETAIN = {
    "MALLOC_ARENA_MAX": "1",  # one heap for every thread
    "MALLOC_MMAP_MAX_": "0",  # large blocks from the heap, not from their own mmap
    "MALLOC_TRIM_THRESHOLD_": str(4 * 2**30),  # free memory kept at the heap's top, bytes
}


def is_glibc():
    """Whether this process runs on glibc's `malloc` (Linux, not musl)."""
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def retaining_environment(environ=None):
    """`environ` (default `os.environ`) with `RETAIN`; values already there win."""
    return {**RETAIN, **(os.environ if environ is None else environ)}


def restart_retaining_freed_memory():
    """Re-executes this Python command with `RETAIN` in its environment.

    Does nothing, and returns, where the C library is not glibc, where
    Python cannot name its own executable (an embedded interpreter), or where
    every variable of `RETAIN` is already set (as it is after the restart,
    or when you chose your own values). Otherwise it does not return: the
    process is replaced by the same command (`sys.orig_argv`), so call it
    before doing any work.
    """
    if not is_glibc() or not sys.executable or all(name in os.environ for name in RETAIN):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + sys.orig_argv[1:], retaining_environment())
