"""Translation speed: our engines beside CTranslate2, same weights, one run.

    pip install -e ".[bench]"
    python benchmarks/translate_speed.py --limit 256 --output benchmarks/results/translate_speed.json

On CPU by default (`--device cpu`: GPUs hidden from every engine). With
`--device gpu` the engines run on the machine's GPU: JAX and TensorFlow see
it, CTranslate2 runs on `cuda`, and no process is pinned to `--threads`
CPUs; two engines for GPUs join the choices, `translator-jax-bfloat16` (the
model in the bfloat16 dtype policy) and `ctranslate2-float16`.

Engines (`--engines`, each in a process of its own, pinned to `--threads`
CPUs):
- `savedmodel`: the exported SavedModel (`--saved-model`) through
  `tf.saved_model.load`, its `serving_default` signature (strings in,
  strings out); TensorFlow intra/inter-op threads = `--threads`
  (`--intra-op-threads` sets the intra-op pool of every TensorFlow engine);
  `--no-graph-optimizations` turns grappler off first;
  `--savedmodel-warmup` replays its
  warm-up requests at load (counted in the load time), as TF Serving and
  `serve` do.
- `translator-tf-float32`, `translator-tf-xla-float32`,
  `translator-tf-int8`, `translator-jax-float32`, `translator-jax-int8`:
  `keras_transformer.Translator` on the preset's model
  (KERAS_BACKEND=tensorflow or jax, `model.quantize("int8")` for int8,
  `jit_compile=True` for `-xla-`, its default `"auto"` otherwise), beam 4,
  alpha 0.6, `batch_size` 64, `narrow_batches` with `--narrow-batches`; JAX
  gets `XLA_FLAGS` for `--threads` Eigen threads.
- `ctranslate2-float32`, `ctranslate2-int8`: CTranslate2 on the preset's
  weights converted by `keras_transformer.converters.ctranslate2` (ctranslate2's
  spec API; our position table, our vocabulary), `compute_type` float32 or
  int8, `intra_threads=--threads`, beam 4, as its users run it: its
  defaults, one hypothesis and `patience` 1, with the `length_penalty`
  whose BLEU on the sources is closest to ours (`--ct2-length-penalty
  auto`: the first of our `Translator` engines to run gives our BLEU, and
  CTranslate2 translates the sources in batches with each of
  `--ct2-length-penalties` before the timed engines; with no `Translator`
  engine, the export note's penalty, `closest_length_penalty(--alpha)`).
  CTranslate2 then stops a sentence once its best hypothesis has ended
  (length penalty 0) or `beam_size` hypotheses have finished, where ours
  (`--stop exact`) goes on while a hypothesis could still win.
- `ctranslate2-float32-matched`: CTranslate2 doing the work ours does, a
  second labelled row: its 4-best, `patience` `--ct2-patience` (the
  export note's), the length penalty `closest_length_penalty(--alpha)`,
  and of the 4-best the best under our GNMT penalty (`gnmt_rescore`;
  CTranslate2 divides a hypothesis's log-probability by `length **
  length_penalty`, we by `((5 + length) / 6) ** alpha`; `--ct2-no-rescore`
  keeps its own first).
- For every CTranslate2 engine, `--ct2-use-mkl 0` or `1` sets `CT2_USE_MKL`
  for its process, `auto` leaves CTranslate2's own choice (Intel MKL on
  Intel CPUs, oneDNN elsewhere); the default is 0 on Intel CPUs, where MKL
  ran slower on batches, and more so per sentence (benchmarks/README.md,
  "CTranslate2 and Intel MKL"), and `auto` elsewhere.

Engines run one after another, each alone: before each, the script reads
the machine's load average (`os.getloadavg`) and waits, up to
`--quiet-wait` seconds, until the last minute's is at most `--max-load`
(our previous engine's own load fades in about a minute and a half);
the load before and after each engine, the wait and whether it was quiet
go into the JSON, and the table flags an engine that ran on a busy machine
(`--require-quiet`: stop instead). Another process on the cores slows
every engine, and CTranslate2's one sentence the most.

Figures per engine, on the first `--limit` sources of the test split of
`--preset`'s corpus (all 1,918 by default):
- throughput in sentences/s and output tokens/s (the outputs' pieces + EOS,
  counted with the preset's tokenizer for every engine) at batch
  `--batch-size`, over the sources sorted by length and in file order;
  before the timed passes, one batch of each distinct (rows, width rounded
  up to 8) shape is translated, then the sorted batches once, so that
  compiled shapes are warm and the TensorFlow `Translator` has left its
  eager start, for every engine alike;
- p50/p90 latency of one sentence at a time over the first
  `--latency-sentences` sources (warmed the same way);
- the warm-up: the seconds spent translating one batch of every distinct
  shape and the sorted batches once, before the timed passes;
- the load time, and the time of the first translation after it (one
  sentence), both in the fresh process (with `--compilation-cache DIR`, run
  twice: the second run's engines read what the first compiled);
- with `--once-through`, each of our engines also translates the sources
  once, as `keras-transformer translate MODEL --input FILE` does (the
  CLI's `translate_function` and `translate_sorted`, their defaults), in a
  fresh process: its seconds, compiling included (`once_through_s`), and
  sentences/s;
- with `--repeats N`, each engine runs N times, in rounds, every figure
  above the median of its runs (each run's timings in the JSON);
- BLEU and chrF of the file-order outputs against every reference;
- the fraction of outputs identical to `translator-tf-float32`'s (and, for
  the matched CTranslate2, of its own first hypothesis before rescoring);
- each engine's speed against `ctranslate2-float32`'s in the same run
  (`vs_ctranslate2`: sorted and file-order throughput as its multiple,
  one sentence's p50 as a multiple of its time).

With `--marian FOLDER` (a Hugging Face Marian folder, e.g. a downloaded
OPUS-MT model, or `benchmarks/marian_base.py`'s random base-size one), our
engines translate its import (`keras_transformer.translation.marian`, into
a temporary preset) and CTranslate2's engines its conversion by
CTranslate2's own `ct2-transformers-converter`, float32, pieces from the
folder's SentencePiece models; `--max-extra-length` and
`--max-decoding-length` default to the model's `max_length`, and
`--length-penalty huggingface` (`length ** alpha`, CTranslate2's own
penalty) compares the same search.

The machine is named in the JSON (`--output`); figures from a machine shared
with other work are noisy: compare within one run.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_flags, cpu_name, is_intel_cpu, load_average, wait_for_quiet, write_json  # noqa: E402

ENGINES = (
    "savedmodel",
    "translator-tf-float32",
    "translator-tf-xla-float32",
    "translator-tf-int8",
    "translator-jax-float32",
    "translator-jax-int8",
    "ctranslate2-float32",
    "ctranslate2-float32-matched",
    "ctranslate2-int8",
)
GPU_ENGINES = ("translator-jax-bfloat16", "ctranslate2-float16")  # in the choices, not the default
REFERENCE_ENGINE = "translator-tf-float32"
ANCHOR_ENGINE = "ctranslate2-float32"  # what `vs_ctranslate2` compares with
# CTranslate2's length penalties tried by `--ct2-length-penalty auto`.
CT2_LENGTH_PENALTIES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def backend_of(engine):
    return "jax" if "-jax-" in engine else "tensorflow"


def is_matched(engine):
    """Whether a CTranslate2 engine does the work ours does (its 4-best, rescored)."""
    return engine.endswith("-matched")


def ct2_settings(engine, args):
    """`translate_batch` settings of a CTranslate2 engine: its defaults (one
    hypothesis, patience 1, the chosen length penalty), or the matched
    work's."""
    if is_matched(engine):
        return dict(num_hypotheses=args.beam_size, patience=args.ct2_patience,
                    length_penalty=args.ct2_matched_length_penalty)
    return dict(num_hypotheses=1, patience=1.0, length_penalty=args.ct2_length_penalty)


# ---------------------------------------------------------------- the worker


def pin_threads(threads):
    """Keeps this process on `threads` CPUs (those it may use, lowest first)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))[:threads]
        os.sched_setaffinity(0, cpus)
        return cpus
    except (AttributeError, OSError):
        return None


def load_engine(engine, args):
    """`translate(list[str]) -> (list[str], extra)` for `engine`; `extra`
    is a per-sentence list (CTranslate2: its own first hypothesis) or None."""
    if engine == "savedmodel":
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 - registers the tokenizer ops

        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads or args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
        if not args.graph_optimizations:
            tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
        signatures = tf.saved_model.load(args.saved_model).signatures
        signature = signatures["serving_default"]

        def translate(texts):
            out = signature(inputs=tf.constant(texts))["translations"].numpy()
            return [t.decode("utf-8") for t in out], None

        if args.savedmodel_warmup:  # counted in the load, as TF Serving replays them before serving
            from keras_transformer.export.warmup import replay_warmup_requests

            def call(name, inputs):  # as TF Serving calls the signature a request names
                return signatures[name](**{key: tf.constant(value) for key, value in inputs.items()})

            translate.warmup_requests, _ = replay_warmup_requests(call, args.saved_model)
        return translate

    if engine.startswith("ctranslate2-"):
        # CTranslate2 and SentencePiece only: no Keras or TensorFlow import
        # counted in its start-up (the pieces of keras_transformer.
        # converters.ctranslate2.ctranslate2_source_tokens, the scoring of
        # gnmt_rescore below).
        import ctranslate2
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=args.tokenizer_path)
        target = sentencepiece.SentencePieceProcessor(model_file=args.target_tokenizer_path or args.tokenizer_path)
        compute_type = engine.split("-")[1]
        translator = ctranslate2.Translator(
            args.ct2_model, device="cuda" if args.device == "gpu" else "cpu", compute_type=compute_type,
            intra_threads=args.threads, inter_threads=1,
        )
        settings = ct2_settings(engine, args)
        rescore = is_matched(engine) and not args.ct2_no_rescore

        def translate(texts, **override):
            rows = [i for i, t in enumerate(texts) if t.strip()]
            outputs, natives = [""] * len(texts), [""] * len(texts)
            if rows:
                pieces = processor.encode([texts[i] for i in rows], out_type=str)
                chosen = dict(settings, **override)
                results = translator.translate_batch(
                    [p + ["</s>"] for p in pieces], beam_size=args.beam_size, return_scores=True,
                    max_decoding_length=args.max_decoding_length, **chosen,
                )
                for i, result in zip(rows, results):
                    best = 0
                    if rescore:
                        best, _ = gnmt_rescore(result.hypotheses, result.scores, chosen["length_penalty"],
                                               args.alpha)
                    outputs[i] = target.decode_pieces(result.hypotheses[best])
                    natives[i] = target.decode_pieces(result.hypotheses[0])
            return outputs, natives if is_matched(engine) else None

        return translate

    # Translator on this process's backend
    from keras_transformer import SubwordTokenizer, Translator
    from keras_transformer.models import presets

    if backend_of(engine) == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads or args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    model = presets.load_model(args.preset, dtype="bfloat16" if engine.endswith("bfloat16") else None)
    if engine.endswith("int8"):
        model.quantize("int8")
    translator = Translator(
        model, SubwordTokenizer.from_preset(args.preset), beam_size=args.beam_size, alpha=args.alpha,
        batch_size=args.batch_size, narrow_batches=args.narrow_batches,
        jit_compile=True if "-xla-" in engine else "auto", stop=args.stop, length_penalty=args.length_penalty,
        **({} if args.max_extra_length is None else {"max_extra_length": args.max_extra_length}),
    )

    def translate(texts):
        return translator.translate(list(texts)), None

    # Recorded in the results: what the Translator was given, not the flags.
    translate.dtype_policy = model.dtype_policy.name
    translate.narrow_batches = translator.narrow_batches
    return translate


def ct2_length_penalty(args):
    """CTranslate2's `length_penalty` for our `--alpha`, as the export's note
    gives it (with `--length-penalty huggingface`, alpha: the same penalty)."""
    from keras_transformer.converters.ctranslate2 import closest_length_penalty

    return args.alpha if args.length_penalty == "huggingface" else round(closest_length_penalty(args.alpha), 2)


def calibrate(args):
    """The worker of `--ct2-length-penalty auto`: CTranslate2 at its defaults
    translates the sources, sorted by length in batches, with each of
    `--ct2-length-penalties`; their outputs in file order."""
    with open(args.worker_input) as f:
        job = json.load(f)
    sources, lengths = job["sources"], job["source_lengths"]
    if args.device == "cpu":
        pin_threads(args.threads)
    args.ct2_length_penalty = 0.0  # each call sets its own
    translate = load_engine("ctranslate2-float32", args)
    order = sorted(range(len(sources)), key=lambda i: (lengths[i], i))
    found = {}
    for penalty in args.ct2_length_penalties:
        outputs = [None] * len(sources)
        for chunk in batches(order, args.batch_size):
            for i, text in zip(chunk, translate([sources[i] for i in chunk], length_penalty=penalty)[0]):
                outputs[i] = text
        found[str(penalty)] = outputs
    with open(args.worker_output, "w") as f:
        json.dump(found, f)


def closest_bleu(by_penalty, references, target):
    """`(penalty, {penalty: BLEU})`: of CTranslate2's outputs by length
    penalty, the penalty whose BLEU against `references` is closest to
    `target` (the lower penalty on a tie)."""
    from keras_transformer.evaluation import corpus_bleu

    scores = {float(p): corpus_bleu(outputs, references)[0].score for p, outputs in by_penalty.items()}
    return min(scores, key=lambda p: (abs(scores[p] - target), p)), scores


def gnmt_rescore(hypotheses, scores, length_penalty, alpha):
    """`(index, score)` of the best of CTranslate2's n-best under our length penalty.

    CTranslate2 scores a hypothesis `sum log p / length ** length_penalty`
    (`length` counting EOS); the sum is recovered and divided by GNMT's
    `((5 + length) / 6) ** alpha`, as `keras_transformer.decoding.beam_search`
    scores.
    """
    best, best_score = 0, -float("inf")
    for i, (hypothesis, score) in enumerate(zip(hypotheses, scores)):
        length = len(hypothesis) + 1  # + EOS
        ours = score * length**length_penalty / ((5.0 + length) / 6.0) ** alpha
        if ours > best_score:
            best, best_score = i, ours
    return best, best_score


def shape_of(texts, lengths, batch_size):
    """The (rows, width) a batch compiles to: rows to a power of two, width
    to a multiple of 8 (the Translator's padding)."""
    rows = 1
    while rows < len(texts):
        rows *= 2
    rows = min(rows, max(batch_size, len(texts)))
    width = max(lengths)
    return rows, -(-width // 8) * 8


def batches(order, size):
    return [order[i : i + size] for i in range(0, len(order), size)]


def once_through(args):
    """Translates every source once with the CLI's defaults, as `translate
    --input` does; the seconds, compiling included, in a fresh process."""
    from keras_transformer.cli.common import translate_function, translate_sorted
    from keras_transformer.decoding.defaults import BATCH_SIZE  # `translate --batch-size`'s default

    if backend_of(args.worker) == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads or args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    with open(args.worker_input) as f:
        sources = json.load(f)["sources"]
    model = args.saved_model if args.worker == "savedmodel" else args.preset
    start = time.perf_counter()
    translate, _, _ = translate_function(model, quantize="int8" if args.worker.endswith("int8") else None)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    outputs = translate_sorted(translate, sources, BATCH_SIZE)
    with open(args.worker_output, "w") as f:
        json.dump({"load_s": load_s, "once_through_s": time.perf_counter() - start, "outputs": outputs,
                   "batch_size": BATCH_SIZE}, f)


def worker(args):
    if args.once_through_worker:
        return once_through(args)
    if args.calibrate_worker:
        return calibrate(args)
    started = time.perf_counter()
    cpus = pin_threads(args.threads) if args.device == "cpu" else None
    with open(args.worker_input) as f:
        job = json.load(f)
    sources, lengths = job["sources"], job["source_lengths"]
    engine = args.worker

    start = time.perf_counter()
    translate = load_engine(engine, args)  # imports the engine's libraries, loads the model
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    translate([sources[0]])
    first_s = time.perf_counter() - start
    result = {
        "engine": engine,
        "backend": None if engine.startswith("ctranslate2") or engine == "savedmodel" else backend_of(engine),
        "cpus": cpus,
        "worker_start_to_first_translation_s": time.perf_counter() - started,
        "load_s": load_s,
        "first_translation_s": first_s,
        "load_and_first_translation_s": load_s + first_s,
    }
    if engine == "savedmodel" or engine.startswith("translator-tf-"):
        import tensorflow as tf

        result["tensorflow_threads"] = {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                                        "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    if hasattr(translate, "warmup_requests"):
        result["warmup_requests_replayed"] = translate.warmup_requests
    if hasattr(translate, "dtype_policy"):
        result["dtype_policy"] = translate.dtype_policy
        result["narrow_batches"] = translate.narrow_batches
    if engine.startswith("ctranslate2"):
        result["ct2_use_mkl_env"] = os.environ.get("CT2_USE_MKL")  # None: CTranslate2's own default
        result["keras_imported"] = "keras" in sys.modules  # not counted in CTranslate2's start-up

    n = len(sources)
    sorted_order = sorted(range(n), key=lambda i: (lengths[i], i))
    orders = {"sorted": batches(sorted_order, args.batch_size), "file": batches(list(range(n)), args.batch_size)}
    # Warm every compiled shape once, the same rule for every engine.
    warm = {}
    for chunks in orders.values():
        for chunk in chunks:
            warm.setdefault(shape_of(chunk, [lengths[i] for i in chunk], args.batch_size), chunk)
    latency_rows = list(range(min(args.latency_sentences, n)))
    for i in latency_rows:
        warm.setdefault(shape_of([i], [lengths[i]], 1), [i])
    start = time.perf_counter()
    for chunk in warm.values():
        translate([sources[i] for i in chunk])
    # Then the sorted order once: the TensorFlow `Translator`'s eager start
    # (`EAGER_STEPS`) can outlast the shapes above, and its graph would be
    # traced inside a timed pass.
    for chunk in orders["sorted"]:
        translate([sources[i] for i in chunk])
    result["warmup_s"] = time.perf_counter() - start
    result["warmup_shapes"] = len(warm)

    outputs = {}
    for name, chunks in orders.items():
        texts, natives = [None] * n, [None] * n
        start = time.perf_counter()
        for chunk in chunks:
            out, native = translate([sources[i] for i in chunk])
            for j, i in enumerate(chunk):
                texts[i] = out[j]
                natives[i] = None if native is None else native[j]
        seconds = time.perf_counter() - start
        outputs[name] = (texts, natives)
        result[f"{name}_seconds"] = seconds
    latencies = []
    for i in latency_rows:
        start = time.perf_counter()
        translate([sources[i]])
        latencies.append(time.perf_counter() - start)
    result["latency_ms"] = [1000 * t for t in latencies]
    result["outputs"] = outputs["file"][0]
    result["outputs_sorted_pass"] = outputs["sorted"][0]
    if any(x is not None for x in outputs["file"][1]):
        result["native_outputs"] = outputs["file"][1]
    with open(args.worker_output, "w") as f:
        json.dump(result, f)


# ---------------------------------------------------------------- the parent


def engine_environment(engine, args, environ):
    """The environment of `engine`'s process: `environ` (the parent's as it
    started) with the backend, the thread counts and the device's settings."""
    env = dict(environ, PYTHONPATH=ROOT + os.pathsep + environ.get("PYTHONPATH", ""))
    env["KERAS_BACKEND"] = backend_of(engine)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(args.threads)
    if args.compilation_cache and not engine.startswith("ctranslate2"):
        # Compiled programs kept on disk across processes: JAX's persistent
        # cache, TensorFlow's XLA cache (the Translator; the plain SavedModel
        # compiles nothing).
        os.makedirs(args.compilation_cache, exist_ok=True)
        env["JAX_COMPILATION_CACHE_DIR"] = os.path.join(args.compilation_cache, "jax")
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env["TF_XLA_FLAGS"] = (env.get("TF_XLA_FLAGS", "") + " --tf_xla_persistent_cache_directory="
                               + os.path.join(args.compilation_cache, "tensorflow")).strip()
    if engine.startswith("ctranslate2") and args.ct2_use_mkl != "auto":
        env["CT2_USE_MKL"] = args.ct2_use_mkl
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # no engine reaches a GPU the machine may have
        if backend_of(engine) == "jax":
            env["JAX_PLATFORMS"] = "cpu"
            threads = f" --xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={args.threads}"
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + threads).strip()
    return env


def run_engine(engine, args, job_path, workdir, once=False, calibrate=False):
    """`engine`'s figures (`worker`), from a process of its own started once
    the machine is quiet (`--max-load`, `--quiet-wait`); the load it found
    and left is under `machine_load`. `calibrate`: the outputs of
    `calibrate` instead, untimed, so without waiting."""
    output = os.path.join(workdir, f"{engine}{'-once' if once else ''}{'-calibrate' if calibrate else ''}.json")
    env = engine_environment(engine, args, args.environ)
    penalty = [] if args.ct2_length_penalty == "auto" else ["--ct2-length-penalty", str(args.ct2_length_penalty)]
    command = [sys.executable, os.path.abspath(__file__), "--worker", engine, "--worker-input", job_path,
               "--worker-output", output] + args.forward + penalty + (["--once-through-worker"] if once else []) + (
                   ["--calibrate-worker"] if calibrate else [])
    load = None
    if not calibrate:
        load = wait_for_quiet(args.max_load, args.quiet_wait,
                              log=lambda message: print(f"[{engine}] {message}", file=sys.stderr, flush=True))
        if not load["quiet"]:
            message = (f"[{engine}] the machine is busy: load average {load['load_average']} after "
                       f"{load['waited_s']:.0f} s, more than --max-load {args.max_load}")
            if args.require_quiet:
                raise SystemExit(message + " (--require-quiet)")
            print(message + "; its figures are flagged", file=sys.stderr, flush=True)
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    if run.returncode != 0:
        raise RuntimeError(f"{engine} failed ({run.returncode}):\n{run.stderr[-4000:]}")
    with open(output) as f:
        result = json.load(f)
    if load is not None:
        result["machine_load"] = {**load, "load_average_after": load_average()}
    return result


def engine_order(engines):
    """`engines` in the order they run: the reference first, so the others
    are compared with it, and CTranslate2's last, so that ours give the
    BLEU its length penalty is chosen to match."""
    first = [REFERENCE_ENGINE] if REFERENCE_ENGINE in engines else []
    rest = [e for e in engines if e != REFERENCE_ENGINE]
    return first + [e for e in rest if not e.startswith("ctranslate2")] + [e for e in rest if e.startswith("ctranslate2")]


def choose_ct2_length_penalty(args, done, references, job_path, workdir):
    """Sets `args.ct2_length_penalty` for `--ct2-length-penalty auto`, from
    the engines `done` so far (their figures by name); returns how it was
    chosen, for the JSON."""
    if args.ct2_length_penalty != "auto":
        return {"chosen_by": "--ct2-length-penalty"}
    ours = [e for e in done if e.startswith("translator-")] + [e for e in done if e == "savedmodel"]
    if not ours or references is None:
        args.ct2_length_penalty = args.ct2_matched_length_penalty
        return {"chosen_by": "closest_length_penalty(--alpha): no BLEU of ours to match"}
    from keras_transformer.evaluation import corpus_bleu

    target = corpus_bleu(done[ours[0]]["outputs"], references)[0].score
    print(f"[ctranslate2] length penalties {args.ct2_length_penalties}: the BLEU closest to {ours[0]}'s "
          f"{target:.2f} ...", file=sys.stderr, flush=True)
    by_penalty = run_engine("ctranslate2-float32", args, job_path, workdir, calibrate=True)
    args.ct2_length_penalty, bleu = closest_bleu(by_penalty, references, target)
    return {"chosen_by": f"the BLEU closest to {ours[0]}'s", "target_bleu": target,
            "bleu_by_length_penalty": {str(p): b for p, b in bleu.items()}}


def vs_anchor(results):
    """Each result's speed as a multiple of `ANCHOR_ENGINE`'s in the same
    run: throughput (higher is faster), one sentence's p50 (lower is faster)."""
    anchor = next((r for r in results if r["engine"] == ANCHOR_ENGINE), None)
    if anchor is None:
        return
    for r in results:
        r["vs_ctranslate2"] = {
            "sorted_throughput": r["sorted_sentences_per_s"] / anchor["sorted_sentences_per_s"],
            "file_throughput": r["file_sentences_per_s"] / anchor["file_sentences_per_s"],
            "one_sentence_p50": r["latency_p50_ms"] / anchor["latency_p50_ms"],
        }


# The figures of a run that `--repeats` gives as the median of its runs.
TIMINGS = ("sorted_seconds", "file_seconds", "load_s", "first_translation_s", "load_and_first_translation_s",
           "warmup_s", "worker_start_to_first_translation_s")


def median_run(runs):
    """The first of `runs` (its outputs), with each of `TIMINGS` and the
    one-sentence latencies (each sentence's) the median over `runs`, and
    every run's timings under `repeats`."""
    run = dict(runs[0])
    if len(runs) > 1:
        for key in TIMINGS:
            run[key] = float(np.median([r[key] for r in runs]))
        run["latency_ms"] = [float(x) for x in np.median([r["latency_ms"] for r in runs], axis=0)]
        run["repeats"] = [{key: r[key] for key in TIMINGS} | {"latency_p50_ms": percentile(r["latency_ms"], 50),
                                                              "machine_load": r.get("machine_load")}
                          for r in runs]
        run["machine_load"] = {"quiet": all(r.get("machine_load", {}).get("quiet", True) for r in runs),
                               "runs": [r.get("machine_load") for r in runs]}
    return run


def token_count(tokenizer, texts):
    """Output tokens: each output's pieces + its EOS (an empty output: 0)."""
    encoded = tokenizer.encode_target(list(texts))
    return sum(len(ids) + 1 for text, ids in zip(texts, encoded) if text)


def percentile(values, q):
    return float(np.percentile(np.asarray(values), q)) if values else None


def summarise(result, tokenizer, references, reference_outputs, n):
    from keras_transformer.evaluation import corpus_bleu

    outputs = result.pop("outputs")
    sorted_outputs = result.pop("outputs_sorted_pass")
    native = result.pop("native_outputs", None)
    tokens = token_count(tokenizer, outputs)
    tokens_sorted = token_count(tokenizer, sorted_outputs)
    summary = dict(result)
    summary.update(
        sentences=n,
        output_tokens=tokens,
        sorted_sentences_per_s=n / result["sorted_seconds"],
        sorted_tokens_per_s=tokens_sorted / result["sorted_seconds"],
        file_sentences_per_s=n / result["file_seconds"],
        file_tokens_per_s=tokens / result["file_seconds"],
        latency_p50_ms=percentile(result["latency_ms"], 50),
        latency_p90_ms=percentile(result["latency_ms"], 90),
        sorted_and_file_outputs_identical=float(np.mean([a == b for a, b in zip(outputs, sorted_outputs)])),
    )
    if references is not None:
        bleu, bleu_signature, chrf, chrf_signature = corpus_bleu(outputs, references)
        summary.update(bleu=bleu.score, chrf=chrf.score, bleu_signature=str(bleu_signature),
                       chrf_signature=str(chrf_signature))
    if reference_outputs is not None:
        summary["identical_to_" + REFERENCE_ENGINE] = float(np.mean([a == b for a, b in zip(outputs, reference_outputs)]))
        if native is not None:
            summary["native_identical_to_" + REFERENCE_ENGINE] = float(
                np.mean([a == b for a, b in zip(native, reference_outputs)])
            )
    if native is not None:
        summary["rescoring_changed"] = float(np.mean([a != b for a, b in zip(outputs, native)]))
    return summary, outputs


def print_table(results):
    """The figures by engine; the machine's load average before each engine
    ran, marked `!` where it was still busy (`--max-load`)."""
    header = ("engine", "sorted sent/s", "sorted tok/s", "file sent/s", "file tok/s", "p50 ms", "p90 ms",
              "vs CT2 sorted", "vs CT2 p50", "load s", "1st s", "warm-up s", "once sent/s", "BLEU", "chrF",
              "same as tf-f32", "machine load")
    rows = []
    for r in results:
        same, vs, load = r.get("identical_to_" + REFERENCE_ENGINE), r.get("vs_ctranslate2"), r.get("machine_load")
        runs = (load or {}).get("runs") or [load]
        loads = ", ".join("-" if x is None or x.get("load_average") is None else
                          f"{x['load_average'][0]:.2f}{'' if x['quiet'] else '!'}" for x in runs)
        rows.append((
            r["engine"], f"{r['sorted_sentences_per_s']:.1f}", f"{r['sorted_tokens_per_s']:.0f}",
            f"{r['file_sentences_per_s']:.1f}", f"{r['file_tokens_per_s']:.0f}", f"{r['latency_p50_ms']:.1f}",
            f"{r['latency_p90_ms']:.1f}", "-" if vs is None else f"{vs['sorted_throughput']:.2f}x",
            "-" if vs is None else f"{vs['one_sentence_p50']:.2f}x", f"{r['load_s']:.2f}",
            f"{r['first_translation_s']:.2f}", f"{r['warmup_s']:.1f}",
            "-" if r.get("once_through_s") is None else f"{r['once_through_sentences_per_s']:.1f}",
            "-" if r.get("bleu") is None else f"{r['bleu']:.2f}", "-" if r.get("chrf") is None else f"{r['chrf']:.2f}",
            "-" if same is None else f"{100 * same:.1f}%", loads,
        ))
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    for row in (header, *rows):
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", nargs="+", choices=ENGINES + GPU_ENGINES, default=list(ENGINES))
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="where the engines run (gpu: JAX, TensorFlow and CTranslate2 on the GPU)")
    parser.add_argument("--preset", default="tatoeba_en_fr")
    parser.add_argument("--saved-model", default=os.path.join(ROOT, "saved_models", "tatoeba_en_fr", "1"),
                        help="the SavedModel version folder of the preset's model (made by "
                             "`keras-transformer export tatoeba_en_fr --output-dir saved_models/tatoeba_en_fr`)")
    parser.add_argument("--corpus", default=None, help="test sources and references (default: the preset's name)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=None, help="the first N sources (default: all)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latency-sentences", type=int, default=100)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--length-penalty", choices=("gnmt", "huggingface"), default="gnmt",
                        help="our engines' length penalty (huggingface: length ** alpha, CTranslate2's own)")
    parser.add_argument("--max-extra-length", type=int, default=None,
                        help="our engines' output limit: source length + this (default: 50; with --marian, the "
                             "model's max_length)")
    parser.add_argument("--marian", default=None, metavar="FOLDER",
                        help="a Hugging Face Marian folder: ours translate its import, CTranslate2 its "
                             "ct2-transformers-converter conversion (the module docstring)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--stop", choices=("exact", "early"), default=None,
                        help="our Translator engines' stop rule (default: the Translator's); a SavedModel decodes "
                             "as it was exported")
    parser.add_argument("--ct2-length-penalty", default="auto", type=ct2_penalty_argument,
                        help="CTranslate2's length penalty at its defaults: auto (the one of --ct2-length-penalties "
                             "whose BLEU is closest to ours) or a number")
    parser.add_argument("--ct2-length-penalties", type=float, nargs="+", default=list(CT2_LENGTH_PENALTIES),
                        help="the penalties that auto tries")
    parser.add_argument("--ct2-patience", type=float, default=None,
                        help="the matched CTranslate2's beam search patience (default: what the export's note "
                             "recommends)")
    parser.add_argument("--ct2-no-rescore", action="store_true",
                        help="the matched CTranslate2's own first hypothesis")
    parser.add_argument("--max-load", type=float, default=0.5,
                        help="before each engine, wait until the 1-minute load average is at most this")
    parser.add_argument("--quiet-wait", type=float, default=300,
                        help="seconds to wait for --max-load before each engine (0: record the load, do not wait)")
    parser.add_argument("--require-quiet", action="store_true",
                        help="stop, rather than run an engine on a machine still busy after --quiet-wait")
    parser.add_argument("--ct2-use-mkl", choices=("auto", "0", "1"), default=None,
                        help="CTranslate2's CT2_USE_MKL: auto (its own choice: MKL on Intel CPUs only), 0 or 1 "
                             "(default: 0 on Intel CPUs, auto elsewhere)")
    parser.add_argument("--ct2-model", default=None, help="a converted model (default: converted into a temporary folder)")
    parser.add_argument("--tokenizer-path", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ct2-matched-length-penalty", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--target-tokenizer-path", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--max-decoding-length", type=int, default=None,
                        help="CTranslate2's output limit (default: 256; with --marian, the model's max_length)")
    parser.add_argument("--compilation-cache", default=None, metavar="DIR",
                        help="keep compiled programs in DIR across processes (JAX's persistent cache, "
                             "TensorFlow's XLA cache): a second run's first translation reads them")
    parser.add_argument("--no-graph-optimizations", dest="graph_optimizations", action="store_false",
                        help="the SavedModel with TensorFlow's graph optimizer (grappler) off")
    parser.add_argument("--intra-op-threads", type=int, default=0,
                        help="TensorFlow engines: threads within one op (default: --threads; inter-op: --threads)")
    parser.add_argument("--savedmodel-warmup", action="store_true",
                        help="the savedmodel engine replays the SavedModel's warm-up requests "
                             "(assets.extra/tf_serving_warmup_requests) at load, as TF Serving and serve do")
    parser.add_argument("--narrow-batches", action="store_true",
                        help="Translator(narrow_batches=True): under JAX and XLA a batch narrows to its half, "
                             "then its quarter, as its sentences finish (longer compiles, in the warm-up)")
    parser.add_argument("--once-through", action="store_true",
                        help="also translate the sources once with the CLI's defaults, in a fresh process per "
                             "engine (ours, not CTranslate2), compiling included")
    parser.add_argument("--once-through-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calibrate-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of each engine, in rounds; the timings are their medians")
    parser.add_argument("--timeout", type=float, default=7200, help="seconds per engine process")
    parser.add_argument("--keep-outputs", action="store_true", help="each engine's translations in the JSON")
    parser.add_argument("--no-bleu", dest="bleu", action="store_false",
                        help="no BLEU or chrF (a machine without sacrebleu; with --keep-outputs, score elsewhere)")
    parser.add_argument("--output", default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-input", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-output", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    if args.intra_op_threads < 0:
        parser.error(f"--intra-op-threads must be >= 0. Received: {args.intra_op_threads}")
    if "savedmodel" in args.engines and not args.worker and not os.path.isdir(args.saved_model):
        parser.error(f"--saved-model {args.saved_model!r} is no folder: export the preset first, "
                     f"`keras-transformer export {args.preset} --output-dir {os.path.dirname(args.saved_model)}`")
    if args.device == "cpu" and "ctranslate2-float16" in args.engines:
        parser.error("--engines ctranslate2-float16 needs --device gpu (CTranslate2 computes float16 on GPUs only)")
    if args.ct2_use_mkl is None:
        args.ct2_use_mkl = "0" if is_intel_cpu() else "auto"
    if args.ct2_patience is None:
        from keras_transformer.converters.ctranslate2 import PATIENCE

        args.ct2_patience = float(PATIENCE)
    if args.ct2_matched_length_penalty is None:  # the engines' processes are given it: they import no Keras
        args.ct2_matched_length_penalty = ct2_length_penalty(args)
    if args.length_penalty == "huggingface":  # CTranslate2's own penalty: its best is ours
        args.ct2_no_rescore = True
    if args.max_decoding_length is None and not args.marian:
        args.max_decoding_length = 256
    if args.stop is None and not args.worker:
        from keras_transformer.decoding.defaults import STOP

        args.stop = STOP
    return args


def ct2_penalty_argument(text):
    """`--ct2-length-penalty`: "auto" or a number."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be auto or a number. Received: {text!r}") from None


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)

    args.environ = dict(os.environ)  # the engines' processes start from this
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    # This process converts the weights and counts tokens on the CPU: a GPU's memory stays the engines'.
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    from keras_transformer import SubwordTokenizer, datasets
    from keras_transformer.models import presets

    engines = engine_order(list(args.engines))
    with tempfile.TemporaryDirectory() as workdir:
        ct2_convert_s = import_s = ct2_converter = None
        if args.marian:
            import_s = import_marian(args, workdir)
        sources, references = datasets.load_references(args.corpus or args.preset, args.split)
        if args.limit is not None:
            sources, references = sources[: args.limit], references[: args.limit]
        tokenizer = SubwordTokenizer.from_preset(args.preset)
        lengths = [len(ids) + 1 for ids in tokenizer.encode(sources)]  # + EOS
        if args.marian and any(e.startswith("ctranslate2") for e in engines) and args.ct2_model is None:
            args.ct2_model = os.path.join(workdir, "ctranslate2")
            start = time.perf_counter()
            run = subprocess.run(["ct2-transformers-converter", "--model", args.marian, "--output_dir",
                                  args.ct2_model], capture_output=True, text=True, env=args.environ)
            if run.returncode != 0:
                raise RuntimeError(f"ct2-transformers-converter failed:\n{run.stderr[-4000:]}")
            ct2_convert_s, ct2_converter = time.perf_counter() - start, "ct2-transformers-converter"
        if any(e.startswith("ctranslate2") for e in engines) and args.ct2_model is None:
            from keras_transformer.converters.ctranslate2 import convert_preset

            args.ct2_model = os.path.join(workdir, "ctranslate2")
            start = time.perf_counter()
            convert_preset(args.preset, args.ct2_model)
            ct2_convert_s, ct2_converter = time.perf_counter() - start, "keras_transformer.converters.ctranslate2"
        job_path = os.path.join(workdir, "job.json")
        with open(job_path, "w") as f:
            json.dump({"sources": sources, "source_lengths": lengths}, f)
        args.forward = [
            "--preset", args.preset, "--saved-model", args.saved_model, "--batch-size", str(args.batch_size),
            "--latency-sentences", str(args.latency_sentences), "--beam-size", str(args.beam_size),
            "--alpha", str(args.alpha), "--threads", str(args.threads), "--ct2-patience", str(args.ct2_patience),
            "--max-decoding-length", str(args.max_decoding_length), "--device", args.device,
            "--intra-op-threads", str(args.intra_op_threads),
            *([] if args.graph_optimizations else ["--no-graph-optimizations"]),
            *(["--narrow-batches"] if args.narrow_batches else []),
            *(["--savedmodel-warmup"] if args.savedmodel_warmup else []),
            "--tokenizer-path", os.path.join(presets.preset_directory(args.preset), presets.TOKENIZER_FILE),
            "--ct2-matched-length-penalty", str(args.ct2_matched_length_penalty), "--stop", args.stop,
            "--ct2-length-penalties", *map(str, args.ct2_length_penalties), "--length-penalty", args.length_penalty,
            *([] if args.max_extra_length is None else ["--max-extra-length", str(args.max_extra_length)]),
            *([] if tokenizer.shared else ["--target-tokenizer-path",
                                           os.path.join(args.preset, "target_tokenizer.model")]),
        ] + (["--ct2-model", args.ct2_model] if args.ct2_model else []) + (
            ["--ct2-no-rescore"] if args.ct2_no_rescore else [])
        results, reference_outputs, all_outputs = [], None, {}
        penalty_choice = None
        # Each engine runs `--repeats` times, in rounds, so that a change in
        # the machine's speed falls on every engine alike.
        rounds = []
        for repeat in range(args.repeats):
            rounds.append({})
            for engine in engines:
                if engine.startswith("ctranslate2") and not is_matched(engine) and penalty_choice is None:
                    penalty_choice = choose_ct2_length_penalty(args, rounds[0], references if args.bleu else None,
                                                               job_path, workdir)
                print(f"[{engine}] ...{f' (round {repeat + 1} of {args.repeats})' if args.repeats > 1 else ''}",
                      file=sys.stderr, flush=True)
                rounds[-1][engine] = run_engine(engine, args, job_path, workdir)
        for engine in engines:
            raw = median_run([r[engine] for r in rounds])
            summary, outputs = summarise(raw, tokenizer, references if args.bleu else None, reference_outputs,
                                         len(sources))
            if args.once_through and not engine.startswith("ctranslate2") and "-xla-" not in engine:
                once = run_engine(engine, args, job_path, workdir, once=True)
                summary.update(once_through_load_s=once["load_s"], once_through_s=once["once_through_s"],
                               once_through_sentences_per_s=len(sources) / once["once_through_s"],
                               once_through_batch_size=once["batch_size"],
                               once_through_identical_to_file_pass=float(
                                   np.mean([a == b for a, b in zip(once["outputs"], outputs)])))
            if engine == REFERENCE_ENGINE:
                reference_outputs = outputs
            all_outputs[engine] = outputs
            results.append(summary)
    vs_anchor(results)
    print_table(results)
    report = {
        "benchmark": "translate_speed",
        "command": " ".join([os.path.basename(sys.executable), "benchmarks/translate_speed.py"] + list(argv if argv is not None else sys.argv[1:])),
        "device": args.device,
        "machine": {"platform": platform.platform(), "processor": cpu_name(), "cpu_flags": cpu_flags(),
                    "cpu_count": os.cpu_count(),
                    "gpu": _gpu_name() if args.device == "gpu" else None,
                    "load_average_at_end": load_average(),
                    "quiet": all(r.get("machine_load", {}).get("quiet", True) for r in results),
                    "max_load": args.max_load, "quiet_wait_s": args.quiet_wait},
        "preset": args.preset, "saved_model": args.saved_model, "corpus": args.corpus or args.preset,
        "split": args.split, "sentences": len(sources), "batch_size": args.batch_size, "beam_size": args.beam_size,
        "alpha": args.alpha, "threads": args.threads, "repeats": args.repeats,
        "tensorflow_intra_op_threads": args.intra_op_threads or args.threads, "latency_sentences": min(args.latency_sentences, len(sources)),
        "savedmodel_graph_optimizations": args.graph_optimizations, "compilation_cache": args.compilation_cache,
        "translator_narrow_batches": args.narrow_batches, "once_through": args.once_through, "savedmodel_warmup": args.savedmodel_warmup,
        "stop": args.stop,
        "marian": args.marian and {"folder": args.marian, "import_s": import_s},
        "length_penalty": args.length_penalty, "max_extra_length": args.max_extra_length,
        "max_decoding_length": args.max_decoding_length,
        "ctranslate2": {"num_hypotheses": 1, "patience": 1.0, "length_penalty": args.ct2_length_penalty,
                        "length_penalty_choice": penalty_choice,
                        "matched": {"num_hypotheses": args.beam_size, "patience": args.ct2_patience,
                                    "length_penalty": args.ct2_matched_length_penalty,
                                    "rescored_with_gnmt": not args.ct2_no_rescore},
                        "convert_s": ct2_convert_s, "converter": ct2_converter, "use_mkl": args.ct2_use_mkl,
                        "version": _version("ctranslate2")},
        "reference_engine": REFERENCE_ENGINE if reference_outputs is not None else None,
        "results": results,
    }
    if args.keep_outputs:
        report["outputs"] = all_outputs
    if args.output:
        write_json(args.output, report)
    return report


def import_marian(args, workdir):
    """`--marian`: its import into a preset in `workdir`, which our engines
    load (`args.preset`); the corpus and the output limits it implies.
    Returns the import's seconds."""
    from keras_transformer.translation.marian.preset import import_preset

    start = time.perf_counter()
    args.preset = import_preset(args.marian, os.path.join(workdir, "preset"))
    seconds = time.perf_counter() - start
    with open(os.path.join(args.preset, "config.json"), encoding="utf-8") as f:
        max_length = json.load(f)["config"]["max_length"]
    args.corpus = args.corpus or "tatoeba_en_fr"
    if args.max_extra_length is None:
        args.max_extra_length = max_length
    if args.max_decoding_length is None:
        args.max_decoding_length = max_length
    return seconds


def _gpu_name():
    try:
        run = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return run.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _version(name):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:  # not installed
        return None


if __name__ == "__main__":
    main()
