"""Where a training step's time goes: a kernel table from a profiler trace.

Builds the model of `train_throughput.py` (same flags), warms `fit` up, then
traces a few steps and sums the kernel time by kernel name and by kind
(matrix multiply, attention, fused element-wise, reductions, copies). Prints
the table and writes it as JSON; the trace and, with `--dump-hlo`, the
optimised HLO stay in `--trace-dir`. With the HLO, each kernel is shown with
the model operation it computes (the HLO's `op_name`).

Two setups:
- JAX on a GPU: `jax.profiler`, the GPU kernels of the device lanes.

      KERAS_BACKEND=jax python benchmarks/profile_train_step.py --preset base \
          --batch-size 384 --source-length 64 --target-length 64 \
          --dtype mixed_bfloat16 --trace-dir /tmp/trace --output profile.json

- TensorFlow on a CPU: `tf.profiler`, the XLA CPU kernels ("thunks") on
  the compute threads. Kernels run on several threads at once and a matrix
  multiply uses every core, so their times add up to more than the step.

      KERAS_BACKEND=tensorflow python benchmarks/profile_train_step.py --preset tiny \
          --batch-size 32 --source-length 32 --target-length 32 --dtype float32 --dump-hlo
"""

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.report import write_json  # noqa: E402

KINDS = (  # first match wins; XLA's and cuDNN's kernel names
    ("attention", ("flash", "fmha", "cudnn", "sdpa", "attn")),
    ("matmul", ("gemm", "cublas", "cutlass", "matmul", "sm90_xmma", "nvjet", "triton_gemm")),
    ("matmul", ("dot",)),  # XLA CPU names a dot after its HLO instruction
    ("copy/transpose", ("copy", "transpose", "memcpy", "memset", "dynamic_update_slice", "dynamic-slice",
                        "concatenate", "slice")),
    ("reduction", ("reduce", "reduction")),
    ("element-wise fusion", ("fusion", "loop_", "input_", "convert", "multiply", "add", "select")),
)


def kind_of(name):
    lower = name.lower()
    for kind, needles in KINDS:
        if any(n in lower for n in needles):
            return kind
    return "other"


def device_events(trace):
    """Complete events ("X") on the GPU lanes of a Perfetto/Chrome trace."""
    names = {}
    for event in trace["traceEvents"]:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            names[event["pid"]] = event["args"]["name"]
    gpu = {pid for pid, name in names.items() if "gpu" in name.lower() and "host" not in name.lower()}
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("pid") in gpu and "dur" in e]


# XLA CPU's bookkeeping events on the compute threads, not kernels.
CPU_RUNTIME_EVENTS = ("ThunkExecutor", "SlinkyThreadPool", "end: ")


def cpu_events(xspace):
    """XLA CPU kernels ("thunks") of a TensorFlow profiler XSpace, as events.

    They run on the Eigen compute threads of the host plane; each event is
    named after the HLO instruction it executes (`MatMul.88`,
    `subtract_exponential_fusion`). Durations are converted to microseconds.
    """
    events = []
    for plane in xspace.planes:
        for line in plane.lines:
            if "Eigen" not in line.name:
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if not name.startswith(CPU_RUNTIME_EVENTS):
                    events.append(dict(name=name, dur=event.duration_ps / 1e6))
    return events


def hlo_op_names(hlo_text):
    """`{instruction name: op_name}` from optimised HLO text (its metadata)."""
    names = {}
    for match in re.finditer(r'^\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name="([^"]+)"', hlo_text, re.M):
        names.setdefault(match.group(1), match.group(2))
    return names


def summarise(events, steps):
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        by_name[e["name"]][0] += e["dur"]
        by_name[e["name"]][1] += 1
    total_us = sum(v[0] for v in by_name.values())
    kernels = sorted(
        (dict(name=n, kind=kind_of(n), ms_per_step=v[0] / steps / 1e3, calls_per_step=v[1] / steps)
         for n, v in by_name.items()),
        key=lambda k: -k["ms_per_step"],
    )
    kinds = collections.defaultdict(float)
    for k in kernels:
        kinds[k["kind"]] += k["ms_per_step"]
    return total_us / steps / 1e3, dict(sorted(kinds.items(), key=lambda kv: -kv[1])), kernels


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ours", choices=["ours", "plain-keras"])
    parser.add_argument("--preset", default="base")
    parser.add_argument("--batch-size", type=int, default=384)
    parser.add_argument("--source-length", type=int, default=64)
    parser.add_argument("--target-length", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=37000)
    parser.add_argument("--dtype", default="mixed_bfloat16")
    parser.add_argument("--jit", default="true", choices=["true", "false", "auto"])
    parser.add_argument("--dropout-rate", type=float, default=None)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5, help="traced steps")
    parser.add_argument("--top", type=int, default=40, help="kernels to print")
    parser.add_argument("--trace-dir", default="/tmp/keras_transformer_trace")
    parser.add_argument("--dump-hlo", action="store_true", help="also write the optimised HLO to --trace-dir/hlo")
    parser.add_argument("--output", default=None, help="JSON file to write")
    args = parser.parse_args(argv)
    if args.dump_hlo:
        flags = f"--xla_dump_to={args.trace_dir}/hlo --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*(train|one_step).*"
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()

    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        events, device, seconds = trace_jax(args)
    elif backend == "tensorflow":
        events, device, seconds = trace_tensorflow(args)
    else:
        raise SystemExit(f"profile_train_step.py needs KERAS_BACKEND=jax (GPU) or tensorflow (CPU). Received: {backend}")
    device_ms, kinds, kernels = summarise(events, args.steps)
    ops_of = {}  # the largest module (the training step) wins name clashes
    for path in sorted(glob.glob(f"{args.trace_dir}/hlo/*after_optimizations.txt") if args.dump_hlo else [],
                       key=os.path.getsize):
        with open(path) as f:
            ops_of.update(hlo_op_names(f.read()))
    for k in kernels:  # GPU kernels are named like the HLO, with "_6" for ".6"
        k["op_name"] = ops_of.get(k["name"], ops_of.get(re.sub(r"_(\d+)$", r".\1", k["name"]), ""))
    wall_ms = seconds / args.steps * 1e3
    print(f"\n{args.model} {args.preset}, batch {args.batch_size} x {args.source_length}/{args.target_length}, "
          f"{args.dtype}, on {device}: {wall_ms:.1f} ms/step wall (traced), "
          f"{device_ms:.1f} ms/step of kernels")
    for kind, ms in kinds.items():
        print(f"  {kind:22s} {ms:7.2f} ms  {ms / device_ms:6.1%}")
    print(f"\n{'ms/step':>8s} {'calls':>6s}  kind                 kernel")
    for k in kernels[: args.top]:
        print(f"{k['ms_per_step']:8.3f} {k['calls_per_step']:6.1f}  {k['kind']:20s} {k['name'][:40]:40s} {k['op_name'][-70:]}")
    if args.output:
        write_json(args.output, dict(
            model=args.model, preset=args.preset, device=device, backend=keras.backend.backend(),
            batch_size=args.batch_size, source_length=args.source_length, target_length=args.target_length,
            dtype=args.dtype, wall_ms_per_step=wall_ms, kernel_ms_per_step=device_ms, kinds=kinds,
            kernels=kernels, trace_dir=args.trace_dir,
        ))


def trace_jax(args):
    """GPU kernel events of `args.steps` traced `fit` steps, the device, and the seconds."""
    import jax

    from benchmarks import train_throughput

    if jax.devices()[0].platform != "gpu":
        raise SystemExit(f"With JAX, profile_train_step.py reads GPU kernels and needs a GPU "
                         f"(on a CPU, use KERAS_BACKEND=tensorflow). Received devices: {jax.devices()}")
    _, _, fit = train_throughput.build(args)
    fit(args.warmup_steps)
    fit(args.steps)  # the timed-size input once untraced, so nothing compiles inside the trace
    with jax.profiler.trace(args.trace_dir, create_perfetto_trace=True):
        seconds, _ = fit(args.steps)
    paths = sorted(glob.glob(f"{args.trace_dir}/**/*perfetto_trace.json.gz", recursive=True), key=os.path.getmtime)
    if not paths:
        raise SystemExit(f"No Perfetto trace under {args.trace_dir}.")
    with gzip.open(paths[-1], "rt") as f:
        trace = json.load(f)
    events = device_events(trace)
    if not events:
        raise SystemExit(f"No GPU kernels in {paths[-1]}: this script reads the GPU lanes of the trace "
                         f"and needs a GPU. Received devices: {jax.devices()}")
    return events, jax.devices()[0].device_kind, seconds


def trace_tensorflow(args):
    """XLA CPU kernel events of `args.steps` traced `fit` steps, the device, and the seconds."""
    import platform

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from benchmarks import train_throughput

    if tf.config.list_physical_devices("GPU"):
        raise SystemExit("With TensorFlow, profile_train_step.py reads XLA CPU kernels; hide the GPU "
                         "(CUDA_VISIBLE_DEVICES=) or use KERAS_BACKEND=jax.")
    if args.jit != "true":
        raise SystemExit(f"The CPU kernel table needs the XLA-compiled step (--jit true). Received: --jit {args.jit}")
    _, _, fit = train_throughput.build(args)
    fit(args.warmup_steps)
    fit(args.steps)
    start = len(glob.glob(f"{args.trace_dir}/**/*.xplane.pb", recursive=True))
    tf.profiler.experimental.start(args.trace_dir)
    seconds, _ = fit(args.steps)
    tf.profiler.experimental.stop()
    paths = sorted(glob.glob(f"{args.trace_dir}/**/*.xplane.pb", recursive=True), key=os.path.getmtime)
    if len(paths) <= start:
        raise SystemExit(f"No profiler output under {args.trace_dir}.")
    xspace = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
        xspace.ParseFromString(f.read())
    events = cpu_events(xspace)
    if not events:
        raise SystemExit(f"No XLA CPU kernels in {paths[-1]}.")
    return events, f"CPU ({os.cpu_count()} cores, {platform.machine()})", seconds


if __name__ == "__main__":
    main()
