"""One sentence at a time: the levers on its latency, A/B in rounds.

    python benchmarks/latency_levers.py --variants translator-tf translator-tf:onednn-off translator-tf-xla \\
        translator-jax ctranslate2 --sentences 40 --rounds 3 --output /tmp/levers.json

Each variant translates the first `--sentences` test sources of `--preset`
one at a time (each once untimed first, so that every shape is traced or
compiled), in a process of its own pinned to `--threads` CPUs; the
variants take turns in `--rounds` rounds, in an order that turns each
round, so that a change in the machine's load falls on every variant
alike (`--side-by-side`: a round's variants at once, for a machine already
busy, where the CPU-time ratios are the ones to read); with `--batch-sentences N`, it also translates the first N sources
sorted by length in batches of 64 (once untimed, then timed). It prints and writes each variant's p50 per round, the median of
those, and its ratio to the first variant's, in wall time and in the
process's CPU time (all its threads; less sensitive to other processes on
the cores, though a thread pool that spins counts too); the load average
before each run is recorded beside it.

A variant is `ENGINE[:MOD,...]`. Engines: `translator-tf` (the default
`Translator` on TensorFlow, its graph from the first call),
`translator-tf-xla` (`jit_compile=True`), `translator-jax`, `savedmodel`
(`--saved-model`'s `serving_default`), `ctranslate2` (at its defaults: one
hypothesis, patience 1, `--ct2-length-penalty`). Mods:
- `onednn-off`, `onednn-on`: `TF_ENABLE_ONEDNN_OPTS=0` or `1` (TensorFlow's
  Eigen kernels or oneDNN's; which one runs by default depends on the CPU:
  `benchmarks/small_products.py`);
- `intra1`, `inter1`: one TensorFlow intra-op or inter-op thread;
- `exact`: the `Translator` with `stop="exact"` (the default is `"early"`);
- `keep-batch`: the `Translator`'s graph keeps the batch to the end, its
  cache in segments (`narrow_batches=False` of `decoding.loop`), where by
  default a sentence leaves the batch at the step it is done: for one
  sentence, a loop without the narrowing's bookkeeping;
- `at=PATH`: the package imported from another checkout (a commit
  before a change: `git archive COMMIT | tar -x -C PATH`);
- `saved-model=PATH`: another SavedModel folder.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_flags, cpu_name, load_average, pin_to_cores, uptime, write_json  # noqa: E402

ENGINES = ("translator-tf", "translator-tf-xla", "translator-jax", "savedmodel", "ctranslate2")


def parse_variant(text):
    """`(engine, {mod: value})` of `ENGINE[:MOD,...]`."""
    engine, _, rest = text.partition(":")
    if engine not in ENGINES:
        raise argparse.ArgumentTypeError(f"unknown engine {engine!r} in {text!r}; the engines are {ENGINES}")
    mods = {}
    for mod in filter(None, rest.split(",")):
        name, _, value = mod.partition("=")
        if name not in ("onednn-off", "onednn-on", "intra1", "inter1", "exact", "keep-batch", "at",
                        "saved-model"):
            raise argparse.ArgumentTypeError(f"unknown mod {name!r} in {text!r}")
        mods[name] = value or True
    return engine, mods


def load(engine, mods, args):
    """`translate(list[str]) -> list[str]` of a variant, in this process."""
    threads = {"intra": 1 if mods.get("intra1") else args.threads, "inter": 1 if mods.get("inter1") else args.threads}
    if engine == "ctranslate2":
        import ctranslate2
        import sentencepiece

        from keras_transformer.models import presets

        processor = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(presets.preset_directory(args.preset), presets.TOKENIZER_FILE))
        translator = ctranslate2.Translator(args.ct2_model, device="cpu", intra_threads=args.threads)

        def translate(texts):
            pieces = processor.encode(texts, out_type=str)
            results = translator.translate_batch([p + ["</s>"] for p in pieces], beam_size=4,
                                                 length_penalty=args.ct2_length_penalty)
            return [processor.decode_pieces(r.hypotheses[0]) for r in results]

        return translate
    if engine != "translator-jax":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads["intra"])
        tf.config.threading.set_inter_op_parallelism_threads(threads["inter"])
    if engine == "savedmodel":
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 - registers the tokenizer ops

        signature = tf.saved_model.load(mods.get("saved-model") or args.saved_model).signatures["serving_default"]
        return lambda texts: [t.decode() for t in signature(inputs=tf.constant(texts))["translations"].numpy()]
    from keras_transformer import Translator

    if mods.get("keep-batch"):
        from keras_transformer.translation.runner import DecodeRunner

        DecodeRunner.narrowing = lambda self, static_shapes: "halves" if self.narrow_batches else False
    options = {"jit_compile": True} if engine == "translator-tf-xla" else {"eager_steps": 0}
    if mods.get("exact"):
        options["stop"] = "exact"
    translator = Translator.from_preset(args.preset, **options)
    return translator.translate


def worker(args):
    engine, mods = parse_variant(args.worker)
    if mods.get("at"):  # before this checkout, which the module put first
        sys.path.insert(0, mods["at"])
    with open(args.worker_input) as f:
        sources = json.load(f)
    pin_to_cores(args.threads)
    translate = load(engine, mods, args)
    outputs = [translate([s])[0] for s in sources]  # every shape traced or compiled
    import keras_transformer

    assert os.path.dirname(os.path.dirname(keras_transformer.__file__)) == (mods.get("at") or ROOT).rstrip("/")
    times, cpu = [], []
    for source in sources:
        start, start_cpu = time.perf_counter(), time.process_time()
        translate([source])
        times.append(1000 * (time.perf_counter() - start))
        cpu.append(1000 * (time.process_time() - start_cpu))
    result = {"ms": times, "cpu_ms": cpu, "outputs": outputs}
    if args.batch_sentences:
        batches = sorted_batches(args.preset, args.batch_sentences)
        for batch in batches:  # every shape traced or compiled
            translate(batch)
        start, start_cpu = time.perf_counter(), time.process_time()
        for batch in batches:
            translate(batch)
        result.update(batch_s=time.perf_counter() - start, batch_cpu_s=time.process_time() - start_cpu)
    with open(args.worker_output, "w") as f:
        json.dump(result, f)


def sorted_batches(preset, count, batch_size=64):
    """The first `count` test sources, sorted by length, in batches of `batch_size`."""
    from keras_transformer import datasets

    sources = sorted(datasets.load_references(preset, "test")[0][:count], key=len)
    return [sources[i : i + batch_size] for i in range(0, len(sources), batch_size)]


def run(variant, args, job, workdir):
    engine, mods = parse_variant(variant)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu",
               KERAS_BACKEND="jax" if engine == "translator-jax" else "tensorflow")
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(args.threads)
    if engine == "translator-jax":
        env["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={args.threads}"
    if mods.get("onednn-off") or mods.get("onednn-on"):
        env["TF_ENABLE_ONEDNN_OPTS"] = "1" if mods.get("onednn-on") else "0"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    output = os.path.join(workdir, f"out_{args.variants.index(variant)}.json")
    forward = ["--preset", args.preset, "--saved-model", args.saved_model, "--threads", str(args.threads),
               "--ct2-length-penalty", str(args.ct2_length_penalty), "--batch-sentences", str(args.batch_sentences)]
    if args.ct2_model:
        forward += ["--ct2-model", args.ct2_model]
    load = load_average()
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", variant, "--worker-input", job,
                           "--worker-output", output, *forward], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{variant} failed:\n{done.stderr[-3000:]}")
    with open(output) as f:
        result = json.load(f)
    return {"load_average_before": load, "p50_ms": float(np.percentile(result["ms"], 50)),
            "batch_s": result.get("batch_s"), "batch_cpu_s": result.get("batch_cpu_s"),
            "cpu_p50_ms": float(np.percentile(result["cpu_ms"], 50)),
            "p90_ms": float(np.percentile(result["ms"], 90)), "outputs": result["outputs"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", type=str, default=["translator-tf", "translator-tf:onednn-off"])
    parser.add_argument("--preset", default="tatoeba_en_fr")
    parser.add_argument("--saved-model", default=os.path.join(ROOT, "saved_models", "tatoeba_en_fr", "1"))
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-sentences", type=int, default=0,
                        help="also time the first N test sources sorted by length in batches of 64 (0: no)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--side-by-side", action="store_true",
                        help="a round's variants run at once, each in its own process (a busy machine: read the "
                             "CPU-time ratios)")
    parser.add_argument("--ct2-model", default=None, help="a converted model (default: converted here)")
    parser.add_argument("--ct2-length-penalty", type=float, default=0.2)
    parser.add_argument("--output", default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-input", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-output", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    for variant in args.variants:
        parse_variant(variant)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    from keras_transformer import datasets

    sources = datasets.load_references(args.preset, "test")[0][: args.sentences]
    runs = {variant: [] for variant in args.variants}
    uptime_before = uptime()
    with tempfile.TemporaryDirectory() as workdir:
        if any(v.startswith("ctranslate2") for v in args.variants) and args.ct2_model is None:
            from keras_transformer.converters.ctranslate2 import convert_preset

            args.ct2_model = os.path.join(workdir, "ctranslate2")
            convert_preset(args.preset, args.ct2_model)
        job = os.path.join(workdir, "job.json")
        with open(job, "w") as f:
            json.dump(sources, f)
        for round_ in range(args.rounds):
            turn = round_ % len(args.variants)
            order = args.variants[turn:] + args.variants[:turn]
            with concurrent.futures.ThreadPoolExecutor(len(order) if args.side_by_side else 1) as pool:
                for variant, result in zip(order, pool.map(lambda v: run(v, args, job, workdir), order)):
                    runs[variant].append(result)
                    print(f"round {round_ + 1}: {variant}: p50 {result['p50_ms']:.1f} ms, CPU "
                          f"{result['cpu_p50_ms']:.1f} ms (load {result['load_average_before']})",
                          file=sys.stderr, flush=True)
    first = args.variants[0]
    reference = runs[first][0]["outputs"]
    base = float(np.median([r["p50_ms"] for r in runs[first]]))
    base_cpu = float(np.median([r["cpu_p50_ms"] for r in runs[first]]))
    results = []
    for variant, variant_runs in runs.items():
        p50 = float(np.median([r["p50_ms"] for r in variant_runs]))
        cpu = float(np.median([r["cpu_p50_ms"] for r in variant_runs]))
        batch = {}
        if args.batch_sentences:
            batch = {key: round(float(np.median([r[key] for r in variant_runs])), 3) for key in ("batch_s", "batch_cpu_s")}
            batch.update({f"{key}_ratio_to_first": round(batch[key] / float(np.median([r[key] for r in runs[first]])), 3)
                          for key in ("batch_s", "batch_cpu_s")})
        results.append({"variant": variant, "p50_ms": round(p50, 2), "ratio_to_first": round(p50 / base, 3),
                        "cpu_p50_ms": round(cpu, 2), "cpu_ratio_to_first": round(cpu / base_cpu, 3),
                        **batch, "p50_ms_by_round": [round(r["p50_ms"], 2) for r in variant_runs],
                        "load_average_before": [r["load_average_before"] for r in variant_runs],
                        "same_outputs_as_first": float(np.mean([a == b for a, b in
                                                                zip(variant_runs[0]["outputs"], reference)]))})
        print(f"{variant:45s} p50 {p50:7.1f} ms  x{p50 / base:.2f}  CPU {cpu:7.1f} ms  x{cpu / base_cpu:.2f}  "
              f"rounds {results[-1]['p50_ms_by_round']}  "
              + (f"batches {batch['batch_s']:.2f} s x{batch['batch_s_ratio_to_first']:.2f}, CPU {batch['batch_cpu_s']:.2f} s "
                 f"x{batch['batch_cpu_s_ratio_to_first']:.2f}  " if batch else "")
              + f"same outputs {100 * results[-1]['same_outputs_as_first']:.0f}%")
    report = {"benchmark": "latency_levers", "command": " ".join(["python", "benchmarks/latency_levers.py"]
                                                                + list(sys.argv[1:] if argv is None else argv)),
              "machine": {"cpu": cpu_name(), "cpu_flags": cpu_flags(), "cpu_count": os.cpu_count()},
              "uptime_before": uptime_before, "uptime_after": uptime(),
              "preset": args.preset, "sentences": len(sources), "rounds": args.rounds, "threads": args.threads,
              "side_by_side": args.side_by_side,
              "results": results}
    if args.output:
        write_json(args.output, report)
    return report


if __name__ == "__main__":
    main()
