"""Training throughput of our Transformer against a plain Keras peer.

Each (model, preset) runs `model.fit` in its own process (so that JAX's GPU
pre-allocation and compile caches do not leak between runs), on random token
ids of fixed shape, with the same optimizer (Adam 0.9/0.98/1e-9) and the same
label-smoothed loss. Prints a table and writes JSON with target tokens/s,
ms/step, model FLOP utilisation against a stated peak, and peak memory.

    KERAS_BACKEND=tensorflow python benchmarks/train_throughput.py \
        --presets tiny base --batch-size 32 --source-length 32 \
        --target-length 32 --output benchmarks/results/train_cpu.json

With `--interleave` all models run in one process per preset, their timed
windows alternating, and the window-by-window speed-up is reported too: on a
shared CPU whose speed drifts between minutes, the ratio of separate
processes is mostly the drift. `--host-memory retain` sets glibc's allocator
to keep freed memory, for every worker alike; the training scripts no longer
restart with such settings themselves (benchmarks/README.md: tried and dropped).

Peers: `ours` (keras_transformer.Transformer), `plain-keras`
(benchmarks/peers/plain_keras.py, stock keras.layers.MultiHeadAttention) and
`baseline`: this package as another checkout has it (`--baseline PATH`, e.g.
`git worktree add /tmp/before <commit>`), to time a change before and after
in one process:

    KERAS_BACKEND=tensorflow python benchmarks/train_throughput.py --interleave \
        --models ours baseline --baseline /tmp/before --presets tiny
The GPU peers of ../shared/bench (PyTorch nn.Transformer, tuned Keras) are
separate scripts; run them in the same call on the same machine.
"""

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.report import write_json  # noqa: E402

# glibc's allocator keeping freed memory (`--host-memory retain`): one heap
# for every thread, large blocks from it rather than their own mmap, and
# free memory kept at its top.
RETAIN = {
    "MALLOC_ARENA_MAX": "1",
    "MALLOC_MMAP_MAX_": "0",
    "MALLOC_TRIM_THRESHOLD_": str(4 * 2**30),
}


def flops_per_step(hp, batch, source_length, target_length, vocab_size):
    """Matrix-multiply FLOPs of one training step (forward + backward: three forwards).

    Dense: 2 FLOPs per weight per token, times 3. Attention: Q K^T and
    weights x V, 4 * length_q * length_k * d_model per layer and sentence,
    times 3; causal attention is counted in full, as the peers count it.
    """
    d, d_ff, n = hp["d_model"], hp["d_ff"], hp["num_layers"]
    encoder = n * (4 * d * d + 2 * d * d_ff)
    decoder = n * (8 * d * d + 2 * d * d_ff)
    dense = 6 * (batch * source_length * encoder + batch * target_length * (decoder + d * vocab_size))
    attention = 3 * batch * n * 4 * d * (
        source_length**2 + target_length**2 + target_length * source_length
    )
    return dense + attention


def peak_memory_mb(backend):
    """Peak accelerator memory if there is one, else peak process RSS."""
    try:
        if backend == "jax":
            import jax

            stats = jax.devices()[0].memory_stats() or {}
            if "peak_bytes_in_use" in stats:
                return stats["peak_bytes_in_use"] / 2**20, "device"
        if backend == "tensorflow":
            import tensorflow as tf

            if tf.config.list_physical_devices("GPU"):
                return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20, "device"
        if backend == "torch":
            import torch

            if torch.cuda.is_available():
                return torch.cuda.max_memory_allocated() / 2**20, "device"
    except Exception:  # noqa: BLE001 - fall back to the process figure
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "host RSS"


def import_baseline(path):
    """`keras_transformer` as the checkout at `path` has it, imported beside ours.

    Its modules are imported under their own names, then moved out of
    `sys.modules` (ours are put back), so that both packages live in one
    process. Returns the package and its modules by name.
    """
    def package_modules():
        return [k for k in sys.modules if k.split(".")[0] == "keras_transformer"]

    ours = {k: sys.modules.pop(k) for k in package_modules()}
    sys.path.insert(0, os.path.abspath(path))
    try:
        package = importlib.import_module("keras_transformer")
        for name in ("losses", "models.config"):
            importlib.import_module(f"keras_transformer.{name}")
        theirs = {k: sys.modules.pop(k) for k in package_modules()}
    finally:
        sys.path.remove(os.path.abspath(path))
        sys.modules.update(ours)
    return package, theirs


def build(args):
    """The compiled model of `args` and a `fit(steps)` on fixed random ids.

    Returns `(model, hp, fit)`; `fit(steps)` returns `(seconds, last_loss)`.
    The `baseline` model is built first (see `import_baseline`).
    """
    import keras

    if args.model == "baseline":
        baseline, modules = import_baseline(args.baseline)
    from keras_transformer import LabelSmoothedCrossEntropy, Transformer
    from keras_transformer.models.config import ARCHITECTURES

    keras.utils.set_random_seed(0)
    keras.config.set_dtype_policy(args.dtype)
    hp = dict(ARCHITECTURES[args.preset])
    if args.dropout_rate is not None:
        hp["dropout_rate"] = args.dropout_rate
    if args.num_layers is not None:
        hp["num_layers"] = args.num_layers
    if args.model == "ours":
        model = Transformer.from_architecture(args.preset, vocab_size=args.vocab_size, dropout_rate=hp["dropout_rate"],
                                              num_layers=hp["num_layers"])
        loss = LabelSmoothedCrossEntropy(0.1)
    elif args.model == "baseline":
        # Checkouts before the presets change named architectures "presets".
        build = getattr(baseline.Transformer, "from_architecture", baseline.Transformer.from_preset)
        model = build(args.preset, vocab_size=args.vocab_size, dropout_rate=hp["dropout_rate"], num_layers=hp["num_layers"])
        loss = modules["keras_transformer.losses"].LabelSmoothedCrossEntropy(0.1)
    else:
        from benchmarks.peers.plain_keras import PlainKerasTransformer, smoothed_loss

        model = PlainKerasTransformer(args.vocab_size, **hp)
        loss = smoothed_loss
    jit = {"true": True, "false": False, "auto": "auto"}[args.jit]
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=loss,
        jit_compile=jit,
    )
    rng = np.random.default_rng(0)
    b, s, t = args.batch_size, args.source_length, args.target_length
    source = rng.integers(1, args.vocab_size, (b, s), dtype=np.int32)
    target = rng.integers(1, args.vocab_size, (b, t + 1), dtype=np.int32)

    class StepClock(keras.callbacks.Callback):
        """The wall clock at the end of every training step of a `fit` call.

        It reads the step's loss first, so that the step has finished on
        every backend (JAX dispatches asynchronously). `step_seconds()`:
        the intervals between step ends, i.e. the steady-state steps; the
        first step of a call (iterator start-up) and the end of `fit`
        (epoch-end callbacks, tear-down) are left out.
        """

        def on_train_begin(self, logs=None):
            self.ends = []

        def on_train_batch_end(self, batch, logs=None):
            if logs and "loss" in logs:
                float(logs["loss"])
            self.ends.append((batch, time.perf_counter()))

        def step_seconds(self):
            return [(t1 - t0) / (b1 - b0) for (b0, t0), (b1, t1) in zip(self.ends, self.ends[1:])]

    # Only for --timing steps: the clock syncs on every step.
    clock = StepClock() if getattr(args, "timing", "fit") == "steps" else None

    def fit(steps):
        xs = (np.tile(source, (steps, 1)), np.tile(target[:, :-1], (steps, 1)))
        ys = np.tile(target[:, 1:], (steps, 1))
        start = time.perf_counter()
        history = model.fit(xs, ys, batch_size=b, epochs=1, verbose=0, shuffle=False, callbacks=[clock] if clock else [])
        return time.perf_counter() - start, history.history["loss"][-1]

    fit.clock = clock  # None, or the StepClock of the last call
    return model, hp, fit


def measure(args):
    """Measurements in this process: a list of dicts, one per model.

    `args.model` names one model, or several separated by commas
    (`--interleave`): all are built and warmed up, then their timed windows
    alternate, so that a machine whose speed drifts slows them alike.
    """
    runs = []
    for name in args.model.split(","):
        model, hp, fit = build(argparse.Namespace(**{**vars(args), "model": name}))
        compile_s, _ = fit(args.warmup_steps)
        runs.append(dict(name=name, model=model, hp=hp, fit=fit, compile_s=compile_s,
                         windows=[], steps=[], window_medians=[], faults=0, system_s=0.0))
    # Several timed windows (fit calls). "fit" timing: the fastest whole call
    # per step, as the peer scripts of ../shared/bench time themselves.
    # "steps" timing: the median of the steady-state steps of all windows,
    # without each call's start and end, which on a small CPU sometimes
    # take seconds.
    for _ in range(args.windows):
        for run in runs:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            run["windows"].append(run["fit"](args.steps))
            after = resource.getrusage(resource.RUSAGE_SELF)
            run["faults"] += after.ru_minflt - usage.ru_minflt
            run["system_s"] += after.ru_stime - usage.ru_stime
            if run["fit"].clock:
                steps = run["fit"].clock.step_seconds()
                run["steps"] += steps
                run["window_medians"].append(float(np.median(steps)) * 1e3)
    return [summarize(args, run) for run in runs]


def summarize(args, run):
    """The result dict of one model's timed windows."""
    import keras

    b, s, t = args.batch_size, args.source_length, args.target_length
    timed_steps = args.windows * args.steps
    elapsed, last_loss = min(run["windows"])
    fit_step_s = elapsed / args.steps
    median_step_s = float(np.median(run["steps"])) if run["steps"] else None
    step_s = median_step_s if args.timing == "steps" else fit_step_s
    flops = flops_per_step(run["hp"], b, s, t, args.vocab_size)
    memory, memory_kind = peak_memory_mb(keras.backend.backend())
    return dict(
        model=run["name"],
        preset=args.preset,
        dropout_rate=run["hp"]["dropout_rate"],
        num_layers=run["hp"]["num_layers"],
        backend=keras.backend.backend(),
        dtype=args.dtype,
        jit_compile=args.jit,
        timing=args.timing,
        interleaved_with=[name for name in args.model.split(",") if name != run["name"]],
        # Where the model's class was imported from (the baseline's checkout, for `baseline`).
        source=type(run["model"]).__init__.__code__.co_filename,
        # What this worker's allocator was told (--host-memory), read from its own environment.
        host_memory="retain" if all(os.environ.get(k) == v for k, v in RETAIN.items()) else "release",
        batch_size=b,
        source_length=s,
        target_length=t,
        params=run["model"].count_params(),
        ms_per_step=step_s * 1e3,
        ms_per_step_fit=fit_step_s * 1e3,
        ms_per_step_all_windows=[w[0] / args.steps * 1e3 for w in run["windows"]],
        ms_per_step_median=median_step_s and median_step_s * 1e3,
        ms_per_step_window_medians=run["window_medians"],
        ms_all_steps=[seconds * 1e3 for seconds in run["steps"]],
        target_tokens_per_s=b * t / step_s,
        tflops_per_s=flops / step_s / 1e12,
        loss=float(last_loss),
        warmup_s=run["compile_s"],
        # Host page faults and kernel CPU time per timed step (see --host-memory).
        page_faults_per_step=run["faults"] / timed_steps,
        system_cpu_ms_per_step=run["system_s"] / timed_steps * 1e3,
        peak_memory_mb=memory,  # the process's: with --interleave, of all its models
        peak_memory_kind=memory_kind,
    )


def matmul_peak_tflops(dtype):
    """The backend's own matrix-multiply rate here: 2048^3, compiled."""
    import keras
    from keras import ops

    dtype = "bfloat16" if "bfloat16" in dtype else "float32"
    a = ops.cast(keras.random.normal((2048, 2048)), dtype)

    def chain(x):
        for _ in range(10):
            x = ops.matmul(x, a) * 0.01
        return x

    if keras.backend.backend() == "jax":
        import jax

        chain = jax.jit(chain)
    elif keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        chain = tf.function(chain, jit_compile=True)
    ops.convert_to_numpy(chain(a))
    start = time.perf_counter()
    ops.convert_to_numpy(chain(a))
    return 10 * 2 * 2048**3 / (time.perf_counter() - start) / 1e12


def worker_environment(host_memory):
    """The workers' environment: glibc keeps freed memory (`retain`) or not.

    The same for every model, so that the comparison is of the models.
    """
    released = {k: v for k, v in os.environ.items() if k not in RETAIN}
    return {**released, **RETAIN} if host_memory == "retain" else released


WORKER_TIMEOUT_S = 3600  # one measurement process; a hung one is killed, not left behind


def _run_worker(command, env=None):
    """One measurement in a fresh process: its RESULT dict, or an error."""
    try:
        run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return dict(error=f"timeout after {WORKER_TIMEOUT_S} s")
    lines = [l for l in run.stdout.splitlines() if l.startswith("RESULT ")]
    if run.returncode or not lines:
        sys.stderr.write(run.stderr[-3000:])
        return dict(error=f"exit code {run.returncode}")
    return json.loads(lines[-1][len("RESULT "):])  # a list: one dict per model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["tiny", "base"], choices=["tiny", "small", "base", "big"])
    parser.add_argument("--models", nargs="+", default=["ours", "plain-keras"], choices=["ours", "plain-keras", "baseline"])
    parser.add_argument("--baseline", default=None,
                        help="a checkout of this repository (e.g. a git worktree of an older commit) whose "
                             "keras_transformer is model `baseline`")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--source-length", type=int, default=32)
    parser.add_argument("--target-length", type=int, default=32)
    parser.add_argument("--vocab-size", type=int, default=37000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--dtype", default="float32", help="float32 or mixed_bfloat16")
    parser.add_argument("--jit", default="true", choices=["true", "false", "auto"])
    parser.add_argument("--timing", default="steps", choices=["steps", "fit"],
                        help="steps: median steady-state step (a callback's clock, syncing on each step's loss); "
                             "fit: the fastest whole fit() call / --steps, as the peer scripts time it")
    parser.add_argument("--dropout-rate", type=float, default=None,
                        help="override the preset's dropout rate in every model (0 shows what dropout costs)")
    parser.add_argument("--num-layers", type=int, default=None,
                        help="override the preset's number of encoder and decoder layers in every model "
                             "(1: a quick check that the script runs)")
    parser.add_argument("--windows", type=int, default=1,
                        help="timed windows of --steps steps per process; the fastest is reported")
    parser.add_argument("--repeats", type=int, default=1,
                        help="fresh processes per (preset, model); the fastest is reported, all are kept in the JSON")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="peak for MFU (790 = bf16 H100/H200); default: measured CPU float32 matmul rate")
    parser.add_argument("--host-memory", default="release", choices=["retain", "release"],
                        help="release: glibc's defaults; retain: every worker runs with glibc keeping freed memory "
                             "(no page faults on each step's buffers)")
    parser.add_argument("--interleave", action="store_true",
                        help="all --models in one process per preset, their timed windows alternating: on a machine "
                             "whose speed drifts (a shared CPU) they are measured under the same conditions; "
                             "also reports the median of the window-by-window speed-ups")
    parser.add_argument("--output", default=None, help="JSON file to write")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="ours", help=argparse.SUPPRESS)
    parser.add_argument("--preset", default="tiny", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        result = measure(args) if args.model != "peak" else dict(tflops_per_s=matmul_peak_tflops(args.dtype))
        print("RESULT " + json.dumps(result), flush=True)
        return

    env = worker_environment(args.host_memory)
    peak = args.peak_tflops
    peak_source = "stated"
    if not peak:
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--model", "peak", "--dtype", args.dtype],
                             capture_output=True, text=True, env=env, timeout=WORKER_TIMEOUT_S)
        peak = json.loads(run.stdout.split("RESULT ")[-1])["tflops_per_s"]
        peak_source = "measured: this backend's compiled 2048^3 matmul on this machine"
    results = []
    # One process per model, or with --interleave one process for all of them.
    groups = [",".join(args.models)] if args.interleave else args.models
    for preset in args.presets:
        for group in groups:
            names = group.split(",")
            command = [sys.executable, os.path.abspath(__file__), "--worker", "--model", group, "--preset", preset]
            for flag in ("batch_size", "source_length", "target_length", "vocab_size", "steps", "warmup_steps", "windows", "dtype", "jit", "baseline",
                         "timing", "dropout_rate", "num_layers"):
                if getattr(args, flag) is not None:
                    command += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
            runs = [_run_worker(command, env) for _ in range(args.repeats)]
            done = [r for r in runs if isinstance(r, list)]
            if not done:
                results += [dict(model=name, preset=preset, error=runs[-1]["error"]) for name in names]
                continue
            for i, name in enumerate(names):
                result = min((run[i] for run in done), key=lambda r: r["ms_per_step"])
                result["ms_per_step_all_runs"] = [run[i]["ms_per_step"] for run in done]
                result["mfu"] = result["tflops_per_s"] / peak
                results.append(result)
            for peer in names if args.interleave and "ours" in names else []:
                # Window by window, the peer's median step over ours: both ran at the same time of the run.
                ours, other = names.index("ours"), names.index(peer)
                ratios = [p / o for run in done
                          for o, p in zip(run[ours]["ms_per_step_window_medians"], run[other]["ms_per_step_window_medians"])]
                if peer != "ours" and ratios:
                    key = "speedup_vs_" + peer.replace("-", "_")
                    results[-len(names) + ours][key + "_by_window"] = ratios
                    results[-len(names) + ours][key + "_window_median"] = float(np.median(ratios))

    print(f"\npeak {peak:.3f} TFLOP/s ({peak_source}); batch {args.batch_size} x "
          f"{args.source_length}/{args.target_length} tokens, vocab {args.vocab_size}, {args.dtype}, jit {args.jit}, "
          f"{'median steady-state step' if args.timing == 'steps' else 'fastest fit() window'}"
          + (f", dropout {args.dropout_rate}" if args.dropout_rate is not None else "")
          + (f", {args.num_layers} layer(s)" if args.num_layers is not None else "")
          + f", host memory {args.host_memory}"
          + (", models interleaved in one process" if args.interleave else "")
          + (f"; fastest of {args.repeats} processes each" if args.repeats > 1 else ""))
    peers = [name for name in ("plain-keras", "baseline") if name in args.models]
    print(f"{'preset':7s} {'model':12s} {'params':>8s} {'ms/step':>9s} {'tgt tok/s':>10s} {'MFU':>6s} {'peak MB':>8s}"
          + "".join(f" {'vs ' + name:>14s}" for name in peers))
    for r in results:
        if "error" in r:
            print(f"{r['preset']:7s} {r['model']:12s} failed: {r['error']}")
            continue
        row = (f"{r['preset']:7s} {r['model']:12s} {r['params'] / 1e6:7.1f}M {r['ms_per_step']:9.1f} "
               f"{r['target_tokens_per_s']:10.0f} {100 * r['mfu']:5.1f}% {r['peak_memory_mb']:8.0f}")
        for name in peers:
            peer = next((p for p in results if p.get("preset") == r["preset"] and p.get("model") == name and "error" not in p), None)
            ratio = r["target_tokens_per_s"] / peer["target_tokens_per_s"] if peer else float("nan")
            r["speedup_vs_" + name.replace("-", "_")] = ratio
            row += f" {ratio:13.2f}x"
        print(row)
        for name in peers:
            key = "speedup_vs_" + name.replace("-", "_")
            if key + "_window_median" in r:
                print(f"{'':7s} {'':12s} window by window vs {name}: median {r[key + '_window_median']:.2f}x "
                      f"of {len(r[key + '_by_window'])} windows")
    if args.output:
        write_json(args.output, dict(peak_tflops=peak, peak_source=peak_source, args=vars(args), results=results))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
