"""Writing a benchmark's JSON report, and naming the machine it ran on."""

import json
import os
import platform


def write_json(path, payload):
    """Writes `payload` as indented JSON to `path`, creating its folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)


# The instruction sets that decide which kernels the engines run.
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_info(field):
    """A field of the first processor in Linux's /proc/cpuinfo, or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_flags():
    """Which of `CPU_FLAGS` the CPU has (Linux), else None."""
    flags = cpu_info("flags")
    return None if flags is None else [f for f in CPU_FLAGS if f in flags.split()]


def is_intel_cpu():
    return cpu_info("vendor_id") == "GenuineIntel"


def cpu_name():
    """The CPU's model name (Linux's /proc/cpuinfo), else what `platform` knows."""
    return cpu_info("model name") or platform.processor()


def pin_to_cores(count):
    """Keeps this process (and the threads it starts after) on its first
    `count` allowed cores, where the platform lets it."""
    try:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:count])
    except (AttributeError, OSError):
        pass


def load_average():
    """The machine's three load averages (`os.getloadavg`), or None where unknown."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def uptime():
    """`uptime`'s line (the load averages beside the time), or None where it cannot run; a benchmark
    records it before and after its runs, to tell a busy machine's figures from a quiet one's."""
    import subprocess

    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def wait_for_quiet(max_load, timeout_s, poll_s=5.0, log=None):
    """Waits until the machine's 1-minute load average is at most
    `max_load`, for at most `timeout_s` seconds; returns what it saw:
    `{"load_average", "waited_s", "quiet"}`, the load when it stopped
    waiting, and whether it was quiet then. Another process on the cores
    slows every engine, and CTranslate2's one sentence the most, so a
    benchmark records this beside each engine's figures."""
    import time

    start = time.monotonic()
    while True:
        load = load_average()
        waited = time.monotonic() - start
        quiet = load is None or load[0] <= max_load
        if quiet or waited >= timeout_s:
            return {"load_average": load, "waited_s": round(waited, 1), "quiet": quiet}
        if log is not None:
            log(f"load average {load[0]:.2f} > {max_load}: waiting ({waited:.0f} of {timeout_s:.0f} s)")
        time.sleep(min(poll_s, max(timeout_s - waited, 0.1)))
