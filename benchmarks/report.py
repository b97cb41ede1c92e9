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
