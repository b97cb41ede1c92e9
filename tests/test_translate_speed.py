"""The CTranslate2 converter, `export --format ctranslate2` and benchmarks/translate_speed.py.

The converter is right when CTranslate2 computes what our model computes on
the same weights: the same greedy translations and scores with the smallest
shipped model exported by the command, and the same per-token log-probabilities of
a fixed target with small random models (post-norm, pre-norm, learned
positions). The exported folder's note runs as written, in a Python of its
own, and gives our beam translation. The benchmark's JSON has every
engine's figures (timings are never asserted): one run of the script's
parent here, in this process, with every engine but TensorFlow's Translator
(each engine runs in a process of its own, as the script starts it).
"""

import contextlib
import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ctranslate2 = pytest.importorskip("ctranslate2")

from benchmarks.report import cpu_flags, cpu_name, is_intel_cpu  # noqa: E402
from keras_transformer import SubwordTokenizer, Transformer
from keras_transformer.models import presets  # noqa: E402
from keras_transformer.converters.ctranslate2 import (  # noqa: E402
    closest_length_penalty,
    convert,
    ctranslate2_source_tokens,
    transformer_spec,
)
from keras_transformer.decoding import greedy_decode  # noqa: E402
from keras_transformer.tokens import pack_source, pack_target, split_target, unpack_output  # noqa: E402
from tests.decoding.trained_copy import padded  # noqa: E402

pytestmark = pytest.mark.slow  # the benchmark in processes of its own

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESET = "tatoeba_en_fr"
# The exported and benchmarked model: the smallest shipped preset (2 layers
# of 128 units: the least to load, convert, decode, and for the JAX engine
# to build and compile).
BENCHMARK_PRESET = "libreoffice_en_de"
SENTENCES = ["Copies the selected row to the clipboard.", "Enter the name of the field.", "Click OK.",
             "Select the cell range.", "Opens the Print dialog.", "Deletes the selected text."]
# CTranslate2's OpenMP threads sleep while they wait for each other rather
# than spin: beside other processes on the cores, spinning takes more CPU
# than the translation. Set for the processes this module starts (the note's,
# the benchmark's engines); CTranslate2 in this process runs on one thread.
PASSIVE_WAIT = {"OMP_WAIT_POLICY": "PASSIVE"}


@pytest.fixture(scope="module")
def tokenizer():
    return SubwordTokenizer.from_preset(PRESET)


@pytest.fixture(scope="module")
def shipped_tokenizer():
    return SubwordTokenizer.from_preset(BENCHMARK_PRESET)


@pytest.fixture(scope="module")
def shipped_ct2(tmp_path_factory):
    """The shipped model `BENCHMARK_PRESET` exported by `export --format ctranslate2`."""
    from keras_transformer.cli import main

    folder = tmp_path_factory.mktemp("shipped") / "ct2"
    assert main(["export", BENCHMARK_PRESET, "--format", "ctranslate2", "--output-dir", str(folder)]) == 0
    return folder


def test_the_exported_shipped_model_translates_and_scores_as_ours(shipped_ct2, tmp_path, shipped_tokenizer,
                                                                  monkeypatch):
    from keras_transformer import Translator
    from keras_transformer.cli import main

    folder, tokenizer = shipped_ct2, shipped_tokenizer
    settings = json.loads((folder / "keras_transformer.json").read_text())
    assert (settings["beam_size"], settings["alpha"], settings["preset"]) == (4, 0.6, BENCHMARK_PRESET)
    assert settings["length_penalty"] == round(closest_length_penalty(0.6), 2)
    assert (folder / "tokenizer.model").read_bytes() == tokenizer.model_proto
    # The note's code, run as written from the folder in a Python of its own: our beam translation.
    code = re.search(r"```python\n(.*?)```", (folder / "README.md").read_text(), re.DOTALL).group(1)
    note = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **PASSIVE_WAIT))
    assert note.returncode == 0, note.stderr[-2000:]
    model = presets.load_model(BENCHMARK_PRESET)
    assert note.stdout.strip() == Translator(model, tokenizer).translate(["Where is the station?"])[0]
    translator = ctranslate2.Translator(str(folder), intra_threads=1)
    results = translator.translate_batch(
        ctranslate2_source_tokens(tokenizer, SENTENCES), beam_size=1, length_penalty=0, return_scores=True
    )
    tokens, scores = greedy_decode(model, padded([pack_source(ids) for ids in tokenizer.encode(SENTENCES)]))
    tokens, scores = np.asarray(tokens), np.asarray(scores)
    for i, result in enumerate(results):
        theirs = [tokenizer.processor.piece_to_id(p) for p in result.hypotheses[0]]
        assert theirs == unpack_output(tokens[i]), (SENTENCES[i], tokenizer.decode([theirs]))
        # length_penalty=0: CTranslate2's score is the sum of the log-probs, EOS's included, as ours.
        assert abs(result.scores[0] - scores[i]) < 1e-3 * max(1.0, abs(scores[i]))
    # The outputs are translations, not a degenerate decode.
    assert tokenizer.decode([[tokenizer.processor.piece_to_id(p) for p in results[0].hypotheses[0]]]) == [
        "Kopiert die ausgewählte Zeile in die Zwischenablage."]
    with pytest.raises(FileExistsError, match="exists and is not an empty folder"):
        main(["export", BENCHMARK_PRESET, "--format", "ctranslate2", "--output-dir", str(folder)])
    with pytest.raises(ValueError, match=r"--buckets, --jit-compile apply to a SavedModel.*Received: --format "
                                         r"ctranslate2, --buckets, --jit-compile$"):
        main(["export", BENCHMARK_PRESET, "--format", "ctranslate2", "--output-dir", str(tmp_path / "other"),
              "--buckets", "16", "--jit-compile"])
    assert not (tmp_path / "other").exists()
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if not installed: one error naming the extra
    with pytest.raises(ImportError, match=r'pip install -e "\.\[ctranslate2\]" in the keras-transformer checkout'):
        main(["export", BENCHMARK_PRESET, "--format", "ctranslate2", "--output-dir", str(tmp_path / "other")])


def test_int8_export_stores_int8_weights_that_still_translate(shipped_ct2, tmp_path, shipped_tokenizer):
    """Against the float32 export of the same model (`shipped_ct2`)."""
    from keras_transformer.cli import main

    tokenizer, int8 = shipped_tokenizer, tmp_path / "int8"
    assert main(["export", BENCHMARK_PRESET, "--format", "ctranslate2", "--quantize", "int8",
                 "--output-dir", str(int8)]) == 0
    assert json.loads((int8 / "keras_transformer.json").read_text())["quantization"] == "int8"
    assert (int8 / "model.bin").stat().st_size < 0.4 * (shipped_ct2 / "model.bin").stat().st_size
    translator = ctranslate2.Translator(str(int8), intra_threads=1)
    result = translator.translate_batch(ctranslate2_source_tokens(tokenizer, SENTENCES[:1]))
    assert (tokenizer.processor.decode_pieces(result[0].hypotheses[0])
            == "Kopiert die ausgewählte Zeile in die Zwischenablage.")


def test_closest_length_penalty_grows_as_ours_at_the_typical_length():
    # d log(penalty) / d log(length): CTranslate2's `length ** lp` grows by
    # `lp`; GNMT's ((5 + length) / 6) ** alpha, by finite differences here.
    import math

    for alpha, length in ((0.6, 12), (1.0, 30), (0.2, 5)):
        gnmt = lambda n: alpha * math.log((5 + n) / 6)  # noqa: E731
        slope = (gnmt(length * 1.0001) - gnmt(length / 1.0001)) / (2 * math.log(1.0001))
        assert closest_length_penalty(alpha, length) == pytest.approx(slope, rel=1e-6)


def teacher_forced_log_probs(model, source_ids, target_ids):
    from keras import ops

    decoder_input, labels = split_target(pack_target(target_ids))
    logits = model((padded([pack_source(source_ids)]), padded([decoder_input])))
    log_probs = ops.convert_to_numpy(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))[0]
    return log_probs[np.arange(len(labels)), labels]  # one per target token, EOS last


@pytest.mark.parametrize(
    "overrides",
    [dict(), dict(norm_first=True), dict(learned_positions=True, activation="gelu")],
    ids=["post-norm", "pre-norm", "learned-positions-gelu"],
)
def test_random_model_log_probs_match_ctranslate2(tmp_path, tokenizer, overrides):
    import keras

    keras.utils.set_random_seed(1)
    model = Transformer.from_architecture(
        "tiny", vocab_size=tokenizer.vocab_size, max_length=64, dropout_rate=0.0, **overrides
    )
    source, target = tokenizer.encode(["Where is the station?", "Où est la gare ?"])
    ours = teacher_forced_log_probs(model, source, target)  # builds the model
    translator = ctranslate2.Translator(convert(model, tokenizer, str(tmp_path / "ct2")), intra_threads=1)
    pieces = [tokenizer.processor.id_to_piece(i) for i in target]
    (result,) = translator.score_batch(ctranslate2_source_tokens(tokenizer, ["Where is the station?"]), [pieces])
    np.testing.assert_allclose(result.log_probs, ours, atol=2e-4, rtol=1e-4)


def test_ctranslate2s_own_position_table_is_not_ours(tokenizer):
    """Left to build its own sinusoids (sin half, then cos half), CTranslate2
    would compute another model: the converter must write our table."""
    model = Transformer.from_architecture("tiny", vocab_size=tokenizer.vocab_size, max_length=64)
    model((padded([[5, 3]]), padded([[2, 5]])))
    table = transformer_spec(model, tokenizer).encoder.position_encodings.encodings.numpy()
    position = np.arange(64, dtype="float32")[:, None] / np.power(10000.0, np.arange(0, table.shape[1], 2) / table.shape[1])
    halves = np.concatenate([np.sin(position), np.cos(position)], axis=1)
    interleaved = np.stack([np.sin(position), np.cos(position)], axis=-1).reshape(64, -1)
    np.testing.assert_allclose(table, interleaved, atol=1e-5)
    assert not np.allclose(table[1:], halves[1:], atol=1e-2)


def run_benchmark(folder, engines, limit, batch_size, extra=()):
    """`(report, results by engine, what it printed)` of benchmarks/translate_speed.py's
    `main` run here, its engines' processes started from this one's environment."""
    from benchmarks.translate_speed import main

    output = folder / "translate_speed.json"
    argv = ["--limit", str(limit), "--batch-size", str(batch_size), "--latency-sentences", "2", "--keep-outputs",
            "--quiet-wait", "0", "--output", str(output), "--engines", *engines, *extra]
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.delenv("CT2_USE_MKL", raising=False)  # the script's own default
        for name, value in PASSIVE_WAIT.items():
            patch.setenv(name, value)
        for name in ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "KERAS_BACKEND"):  # main sets them for itself
            original = os.environ.get(name)
            patch.setenv(name, original or "")  # restored, or removed again, afterwards
            if original is None:
                patch.delenv(name)
        main(argv)
    report = json.loads(output.read_text())
    results = {r["engine"]: r for r in report["results"]}
    assert sorted(results) == sorted(engines)
    return report, results, printed.getvalue()


def check_figures(report, results, stdout, limit):
    """Every engine's counts, rates, latencies and scores, from its outputs."""
    from keras_transformer import datasets
    from keras_transformer.evaluation import corpus_bleu

    sources, references = datasets.load_references(PRESET, "test")
    tokenizer = SubwordTokenizer.from_preset(BENCHMARK_PRESET)
    for engine, r in results.items():
        outputs = report["outputs"][engine]
        assert engine in stdout  # the table
        assert r["sentences"] == limit and len(outputs) == limit
        # The rates are the counts over the measured seconds: sentences, and
        # output tokens (the tokenizer's pieces of each output + its EOS; an
        # empty output, none).
        tokens = sum(len(ids) + 1 for text, ids in zip(outputs, tokenizer.encode(outputs)) if text)
        assert r["output_tokens"] == tokens
        assert r["file_sentences_per_s"] == pytest.approx(limit / r["file_seconds"])
        assert r["file_tokens_per_s"] == pytest.approx(tokens / r["file_seconds"])
        assert r["sorted_sentences_per_s"] == pytest.approx(limit / r["sorted_seconds"])
        # Latency percentiles of the two single-sentence requests timed.
        assert len(r["latency_ms"]) == 2
        assert r["latency_p50_ms"] == pytest.approx(np.percentile(r["latency_ms"], 50))
        assert r["latency_p90_ms"] == pytest.approx(np.percentile(r["latency_ms"], 90))
        assert r["load_and_first_translation_s"] == pytest.approx(r["load_s"] + r["first_translation_s"])
        # BLEU and chrF are sacreBLEU's on these outputs against every reference.
        bleu, _, chrf, _ = corpus_bleu(outputs, references[:limit])
        assert (r["bleu"], r["chrf"]) == (pytest.approx(bleu.score), pytest.approx(chrf.score))


# The JAX engine in bfloat16, the SavedModel (the copying model's export,
# tests/export/copying.py), CTranslate2 float32 and int8 at their defaults,
# and float32 doing our work. The engines' model is BENCHMARK_PRESET, on the
# short English sources of PRESET's corpus (`--corpus`). Its German against
# the corpus's French references scores a low BLEU, which the checks
# recompute, and by which CTranslate2's length penalty is chosen all the same.
ENGINES = ["translator-jax-bfloat16", "savedmodel", "ctranslate2-float32", "ctranslate2-int8",
           "ctranslate2-float32-matched"]


@pytest.fixture(scope="module")
def benchmark_run(tmp_path_factory):
    """`(report, results, stdout, compilation cache)`: every engine with every
    option that reaches it, CTranslate2's matrix library left as it is, on 4
    sentences one at a time (one shape: the JAX engine compiles one search)."""
    from tests.export.copying import load_copying_export

    folder = tmp_path_factory.mktemp("benchmark")
    cache = folder / "cache"
    limit = 4
    report, results, stdout = run_benchmark(folder, ENGINES, limit, batch_size=1, extra=[
        "--preset", BENCHMARK_PRESET, "--corpus", PRESET, "--narrow-batches", "--compilation-cache", str(cache),
        "--savedmodel-warmup", "--saved-model", load_copying_export()[2], "--intra-op-threads", "1"])
    check_figures(report, results, stdout, limit)
    return report, results, stdout, cache


def test_benchmark_smoke_ctranslate2(benchmark_run):
    report, results, stdout, _ = benchmark_run
    assert report["sentences"] == 4 and report["ctranslate2"]["matched"]["rescored_with_gnmt"]
    assert (report["preset"], report["corpus"]) == (BENCHMARK_PRESET, PRESET)
    # Every sentence translated (the SavedModel's copying model may answer a sentence with nothing).
    assert all(report["outputs"]["ctranslate2-float32"]) and all(report["outputs"]["ctranslate2-int8"])
    assert report["reference_engine"] is None  # translator-tf-float32 did not run
    assert report["machine"]["cpu_count"] and report["threads"] == 2
    assert results["ctranslate2-float32"]["cpus"] is None or len(results["ctranslate2-float32"]["cpus"]) <= 2
    # The fair defaults: MKL off on Intel CPUs only; the export's length penalty and patience.
    intel = is_intel_cpu()
    assert report["ctranslate2"]["use_mkl"] == ("0" if intel else "auto")
    assert results["ctranslate2-int8"]["ct2_use_mkl_env"] == ("0" if intel else None)
    # CTranslate2's start-up and first translation import CTranslate2 and SentencePiece, not Keras.
    assert not results["ctranslate2-float32"]["keras_imported"] and not results["ctranslate2-int8"]["keras_imported"]
    # At its defaults: one hypothesis, patience 1, and of the penalties tried the one whose BLEU is
    # closest to our first Translator engine's; matched: the export note's 4-best, patience and penalty.
    ct2 = report["ctranslate2"]
    assert (ct2["num_hypotheses"], ct2["patience"]) == (1, 1.0)
    assert (ct2["matched"]["num_hypotheses"], ct2["matched"]["length_penalty"], ct2["matched"]["patience"]) == (
        4, 0.42, 2.0)
    choice = ct2["length_penalty_choice"]
    assert choice["chosen_by"] == "the BLEU closest to translator-jax-bfloat16's"
    assert choice["target_bleu"] == pytest.approx(results["translator-jax-bfloat16"]["bleu"])
    bleu = {float(p): b for p, b in choice["bleu_by_length_penalty"].items()}
    assert sorted(bleu) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert ct2["length_penalty"] == min(bleu, key=lambda p: (abs(bleu[p] - choice["target_bleu"]), p))
    assert results["ctranslate2-float32"]["bleu"] == pytest.approx(bleu[ct2["length_penalty"]])
    # Only the matched engine rescores its n-best, and says how often that changed its first.
    assert "rescoring_changed" in results["ctranslate2-float32-matched"]
    assert "rescoring_changed" not in results["ctranslate2-float32"]
    # Each engine's speed against CTranslate2 at its defaults, from the same run's figures.
    anchor = results["ctranslate2-float32"]
    for r in results.values():
        assert r["vs_ctranslate2"]["one_sentence_p50"] == pytest.approx(r["latency_p50_ms"] / anchor["latency_p50_ms"])
        assert r["vs_ctranslate2"]["sorted_throughput"] == pytest.approx(
            r["sorted_sentences_per_s"] / anchor["sorted_sentences_per_s"])
    # The load before and after each engine, which the table shows (`!`: busier than --max-load).
    for r in results.values():
        load = r["machine_load"]
        assert load["waited_s"] == 0 and load["quiet"] == (load["load_average"][0] <= 0.5)
        assert f"{load['load_average'][0]:.2f}{'' if load['quiet'] else '!'}" in stdout
    assert report["machine"]["quiet"] == all(r["machine_load"]["quiet"] for r in results.values())
    assert report["machine"]["cpu_flags"] == cpu_flags() and report["machine"]["processor"] == cpu_name()


def test_gnmt_rescore_ranks_ctranslate2s_n_best_by_our_length_penalty():
    from benchmarks.translate_speed import gnmt_rescore

    # Log-probs -3.0 (9 tokens + EOS) and -1.5 (2 tokens + EOS): CTranslate2's
    # length ** 0.6 puts the long one first, GNMT's ((5 + length) / 6) ** 0.6 the short one.
    hypotheses = [["a"] * 9, ["b"] * 2]
    scores = [-3.0 / 10**0.6, -1.5 / 3**0.6]
    assert scores[0] > scores[1]
    best, score = gnmt_rescore(hypotheses, scores, 0.6, 0.6)
    assert best == 1 and score == pytest.approx(-1.5 / (8 / 6) ** 0.6)
    # With length_penalty 0 the scores are the sums themselves.
    assert gnmt_rescore([["a"] * 9, ["b"] * 2], [-3.0, -1.5], 0.0, 0.6)[0] == 1


def test_repeats_give_the_median_of_each_timing_and_each_sentences_latency():
    from benchmarks.translate_speed import TIMINGS, median_run

    runs = [dict({key: float(i) for key in TIMINGS}, latency_ms=[10.0 + i, 30.0 - i], outputs=[f"run {i}"])
            for i in (4, 1, 2)]
    run = median_run(runs)
    assert all(run[key] == 2.0 for key in TIMINGS)
    assert run["latency_ms"] == [12.0, 28.0] and run["outputs"] == ["run 4"]  # the first run's outputs
    assert [r["sorted_seconds"] for r in run["repeats"]] == [4.0, 1.0, 2.0]
    assert median_run(runs[:1]) == runs[0]


@pytest.mark.portable  # the script's bookkeeping, in this process: once, in the PyTorch pass (tests/run.sh)
def test_decode_throughput_runs_ctranslate2_on_the_same_random_weights(tmp_path, capsys):
    """`decode_throughput.py --ctranslate2`: a random model converted with
    placeholder pieces decodes in CTranslate2 exactly as many tokens as ours,
    and each row's rates are its counts over its seconds."""
    from benchmarks.decode_throughput import main

    output = tmp_path / "decode.json"
    main(["--presets", "tiny", "--methods", "beam", "greedy", "--batch-sizes", "3", "--cache", "on", "--vocab-size",
          "200", "--source-length", "7", "--output-length", "5", "--repeats", "1", "--no-jit", "--threads", "1",
          "--ctranslate2", "float32", "--output", str(output)])
    assert "ctranslate2-cpu-float32" in capsys.readouterr().out  # the table
    report = json.loads(output.read_text())
    assert report["errors"] == []
    engines = sorted({(r["engine"].split("-")[0], r["method"]) for r in report["results"]})
    assert engines == [("ctranslate2", "beam4"), ("ctranslate2", "greedy"), ("ours", "beam4"), ("ours", "greedy")]
    for row in report["results"]:
        assert row["output_tokens"] == 3 * 5
        assert row["tokens_per_s"] == pytest.approx(row["output_tokens"] / row["seconds"])
        assert row["hyp_tokens_per_s"] == pytest.approx(row["tokens_per_s"] * (4 if row["method"] == "beam4" else 1))


def test_a_list_of_pieces_is_a_vocabulary(tmp_path, tokenizer):
    """The tokenizer's pieces as a list convert to the same files as the tokenizer."""
    model = Transformer.from_architecture("tiny", vocab_size=tokenizer.vocab_size, max_length=16)
    model((padded([[5, 3]]), padded([[2, 5]])))
    pieces = [tokenizer.processor.id_to_piece(i) for i in range(tokenizer.vocab_size)]
    by_tokenizer, by_list = tmp_path / "tokenizer", tmp_path / "list"
    convert(model, tokenizer, str(by_tokenizer))
    convert(model, pieces, str(by_list))
    names = sorted(os.listdir(by_tokenizer))
    assert "model.bin" in names and names == sorted(os.listdir(by_list))
    for name in names:
        assert (by_tokenizer / name).read_bytes() == (by_list / name).read_bytes(), name
    with pytest.raises(ValueError, match="not unique"):
        transformer_spec(model, pieces[:-1] + [pieces[4]])
    with pytest.raises(ValueError, match="pieces and the model"):
        transformer_spec(model, pieces[:-1])


def test_the_jax_engine_with_narrow_batches_bfloat16_and_a_compilation_cache(benchmark_run):
    """The JAX engine with every option that reaches it:
    `--narrow-batches`: the engine's process records the flag its Translator
    was made with, and the table's warm-up column is the JSON's (for the
    Translator, mostly compiling). `--compilation-cache DIR`: the compiled
    beam search lands in DIR/jax. `translator-jax-bfloat16` translates with
    the model in the bfloat16 policy."""
    report, results, stdout, cache = benchmark_run
    ours, theirs = results["translator-jax-bfloat16"], results["ctranslate2-float32"]
    assert report["translator_narrow_batches"] is True and ours["narrow_batches"] is True
    table = [re.split(r"\s{2,}", line.strip()) for line in stdout.splitlines()]
    header, row = (next(r for r in table if r[0] == name) for name in ("engine", "translator-jax-bfloat16"))
    assert row[header.index("warm-up s")] == f"{ours['warmup_s']:.1f}"
    assert report["compilation_cache"] == str(cache)
    # `jit_pure`: the jitted function of keras_transformer.decoding.jit_decoder.
    assert [name for name in os.listdir(cache / "jax") if name.startswith("jit_pure-")], os.listdir(cache / "jax")
    assert report["device"] == "cpu" and report["machine"]["gpu"] is None
    assert ours["dtype_policy"] == "bfloat16" and "dtype_policy" not in theirs
    ours, theirs = report["outputs"]["translator-jax-bfloat16"], report["outputs"]["ctranslate2-float32"]
    assert all(ours)  # every sentence translated
    # bfloat16 rounding may change a word, not the translation: most outputs match float32's.
    assert sum(a == b for a, b in zip(ours, theirs)) >= 3, (ours, theirs)


def test_device_sets_what_each_engines_process_sees(capsys):
    """`--device cpu` hides GPUs from every engine and keeps JAX on the CPU with `--threads`
    threads; `--device gpu` leaves the GPU to them. `ctranslate2-float16` needs a GPU.
    `--ct2-use-mkl` sets CTranslate2's CT2_USE_MKL (0 on Intel CPUs by default; `auto`, unset)."""
    from benchmarks.translate_speed import engine_environment, parse_args

    parent = {"PATH": "/bin", "PYTHONPATH": "/elsewhere", "XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    cpu = parse_args(["--engines", "translator-jax-float32", "--threads", "3"])
    env = engine_environment("translator-jax-float32", cpu, parent)
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["JAX_PLATFORMS"] == "cpu" and env["KERAS_BACKEND"] == "jax"
    assert env["XLA_FLAGS"].startswith("--xla_dump_to=/tmp/x ") and "intra_op_parallelism_threads=3" in env["XLA_FLAGS"]
    assert env["PYTHONPATH"] == ROOT + os.pathsep + "/elsewhere" and env["OMP_NUM_THREADS"] == "3"
    assert engine_environment("ctranslate2-int8", cpu, parent)["CUDA_VISIBLE_DEVICES"] == ""
    gpu = parse_args(["--device", "gpu", "--engines", "translator-jax-bfloat16", "ctranslate2-float16"])
    for engine in gpu.engines:
        env = engine_environment(engine, gpu, parent)
        assert "CUDA_VISIBLE_DEVICES" not in env and "JAX_PLATFORMS" not in env
        assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"
    with pytest.raises(SystemExit) as exit:
        parse_args(["--engines", "ctranslate2-float16"])
    assert exit.value.code == 2
    assert "error: --engines ctranslate2-float16 needs --device gpu" in capsys.readouterr().err
    for flags, expected in (([], "0" if is_intel_cpu() else None), (["--ct2-use-mkl", "1"], "1"),
                            (["--ct2-use-mkl", "0"], "0"), (["--ct2-use-mkl", "auto"], None)):
        args = parse_args(["--engines", "ctranslate2-float32", *flags])
        assert engine_environment("ctranslate2-float32", args, {}).get("CT2_USE_MKL") == expected, flags
        assert "CT2_USE_MKL" not in engine_environment("translator-jax-float32", args, {})


def test_savedmodel_engine_replays_the_warmup_requests(benchmark_run):
    """`--savedmodel-warmup`: a SavedModel's warm-up requests (one per bucket: two here) run at
    load, as TF Serving replays them, and the engine then translates; `--intra-op-threads` sizes
    TensorFlow's intra-op pool."""
    report, results, _, _ = benchmark_run
    result = results["savedmodel"]
    assert report["savedmodel_warmup"] is True and result["warmup_requests_replayed"] == 2
    # `--intra-op-threads 1` reached TensorFlow in the engine's process; the inter-op pool is --threads.
    assert result["tensorflow_threads"] == {"intra_op": 1, "inter_op": 2}
    assert "tensorflow_threads" not in results["translator-jax-bfloat16"]


def test_no_bleu_leaves_bleu_and_chrf_out_and_keeps_the_outputs(shipped_ct2, tmp_path):
    """`--no-bleu` (a machine without sacrebleu): the outputs kept to score elsewhere.
    CTranslate2 int8 on the shipped model's export (`--ct2-model`), the cheapest engine,
    on a batch of two sentences."""
    report, results, _ = run_benchmark(tmp_path, ["ctranslate2-int8"], limit=2, batch_size=2, extra=[
        "--no-bleu", "--ct2-model", str(shipped_ct2), "--preset", BENCHMARK_PRESET, "--corpus", PRESET])
    assert len(report["outputs"]["ctranslate2-int8"]) == 2 and results["ctranslate2-int8"]["sentences"] == 2
    assert "bleu" not in results["ctranslate2-int8"] and "chrf" not in results["ctranslate2-int8"]
