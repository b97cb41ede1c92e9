"""benchmarks/train_throughput.py runs end to end and reports what it says.

Behaviour only: the script's table and JSON, never its timings.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow  # three models built, compiled and trained in a process of its own
def test_train_throughput_interleaves_ours_the_peer_and_a_baseline_checkout_in_one_process(tmp_path):
    # The baseline: a copy of this package in another folder, imported beside ours.
    shutil.copytree(os.path.join(ROOT, "keras_transformer"), tmp_path / "old" / "keras_transformer")
    output = tmp_path / "train.json"
    command = [
        sys.executable, os.path.join(ROOT, "benchmarks", "train_throughput.py"), "--interleave",
        "--models", "ours", "plain-keras", "baseline", "--baseline", str(tmp_path / "old"),
        "--presets", "tiny", "--batch-size", "2", "--source-length", "6", "--target-length", "5",
        "--vocab-size", "64", "--steps", "3", "--warmup-steps", "1", "--windows", "3", "--repeats", "1",
        "--jit", "auto", "--peak-tflops", "1.5", "--dropout-rate", "0.2", "--num-layers", "1", "--host-memory", "retain",
        "--output", str(output),
    ]
    # On PyTorch, whose eager steps cost the least: what the script counts
    # and reports does not depend on the backend. One intra-op thread: the
    # two threads of a tiny model's matrix product spin, waiting for each
    # other, while other processes hold the cores.
    env = dict(os.environ, PYTHONPATH=ROOT, KERAS_BACKEND="torch", OMP_NUM_THREADS="1")
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "window by window vs plain-keras" in run.stdout and "window by window vs baseline" in run.stdout
    report = json.loads(output.read_text())
    assert report["peak_tflops"] == 1.5 and report["peak_source"] == "stated"
    results = {r["model"]: r for r in report["results"]}
    ours, plain, baseline = results["ours"], results["plain-keras"], results["baseline"]
    assert ours["interleaved_with"] == ["plain-keras", "baseline"] and plain["interleaved_with"] == ["ours", "baseline"]
    # The same model size for all three: the comparison is like for like.
    assert baseline["params"] == ours["params"] == plain["params"]
    assert baseline["source"] == str(tmp_path / "old" / "keras_transformer" / "models" / "transformer.py")
    assert ours["source"] == os.path.join(ROOT, "keras_transformer", "models", "transformer.py")
    for result in (ours, plain, baseline):
        # The worker ran with the allocator setting of --host-memory, read from its environment.
        assert result["host_memory"] == "retain"
        assert (result["batch_size"], result["source_length"], result["target_length"]) == (2, 6, 5)
        assert result["dropout_rate"] == 0.2 and result["num_layers"] == 1
        # The reported step is the median steady-state step: 3 windows of 3
        # steps give 2 intervals each between step ends.
        assert len(result["ms_per_step_window_medians"]) == 3 and len(result["ms_all_steps"]) == 6
        assert abs(result["ms_per_step"] - statistics.median(result["ms_all_steps"])) < 1e-9 * result["ms_per_step"]
        assert result["ms_per_step_fit"] == min(result["ms_per_step_all_windows"])
        # The rates follow from the reported step time.
        assert abs(result["target_tokens_per_s"] - 2 * 5 / (result["ms_per_step"] / 1e3)) < 1e-6 * result["target_tokens_per_s"]
        assert abs(result["mfu"] - result["tflops_per_s"] / 1.5) < 1e-12
        # Each window's median is of that window's own two steps.
        for w, median in enumerate(result["ms_per_step_window_medians"]):
            assert abs(median - statistics.median(result["ms_all_steps"][2 * w:2 * w + 2])) < 1e-9 * median
    for peer, key in ((plain, "speedup_vs_plain_keras"), (baseline, "speedup_vs_baseline")):
        ratios = [p / o for o, p in zip(ours["ms_per_step_window_medians"], peer["ms_per_step_window_medians"])]
        assert ours[key + "_by_window"] == ratios
        assert ours[key + "_window_median"] == statistics.median(ratios)
        assert ours[key] == ours["target_tokens_per_s"] / peer["target_tokens_per_s"]


def test_profile_summary_sums_gpu_kernels_per_step_and_ignores_host_events():
    from benchmarks.profile_train_step import device_events, summarise

    trace = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
        {"ph": "X", "pid": 1, "name": "nvjet_sm90_tst_128x160", "dur": 300.0},
        {"ph": "X", "pid": 1, "name": "nvjet_sm90_tst_128x160", "dur": 100.0},
        {"ph": "X", "pid": 1, "name": "loop_add_fusion_6", "dur": 200.0},
        {"ph": "X", "pid": 1, "name": "cudnn_generated_fort_native_sdpa_sm90_flash_fprop", "dur": 400.0},
        {"ph": "X", "pid": 2, "name": "ExecuteOnDevice", "dur": 5000.0},
        {"ph": "i", "pid": 1, "name": "marker"},
    ]}
    total_ms, kinds, kernels = summarise(device_events(trace), steps=2)
    assert total_ms == (300 + 100 + 200 + 400) / 2 / 1e3
    assert kinds == {"attention": 0.2, "matmul": 0.2, "element-wise fusion": 0.1}
    assert [k["name"] for k in kernels][0] in ("nvjet_sm90_tst_128x160", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop")
    gemm = next(k for k in kernels if k["kind"] == "matmul")
    assert gemm["calls_per_step"] == 1.0 and gemm["ms_per_step"] == 0.2


def test_cpu_profile_keeps_xla_kernels_of_compute_threads_and_maps_them_to_ops():
    # The TensorFlow CPU profile: XLA's kernels ("thunks") on the Eigen compute
    # threads count, its runtime's bookkeeping and other threads do not.
    from types import SimpleNamespace as NS

    from benchmarks.profile_train_step import cpu_events, hlo_op_names, summarise

    names = {1: NS(name="MatMul.88"), 2: NS(name="ThunkExecutor::Execute"), 3: NS(name="subtract_exponential_fusion"),
             4: NS(name="EagerExecute"), 5: NS(name="end: MatMul.88")}
    compute = NS(name="tf_numa_-1_Eigen/123", events=[
        NS(metadata_id=1, duration_ps=20e9), NS(metadata_id=2, duration_ps=90e9),
        NS(metadata_id=3, duration_ps=6e9), NS(metadata_id=1, duration_ps=20e9), NS(metadata_id=5, duration_ps=1e6)])
    python = NS(name="python", events=[NS(metadata_id=4, duration_ps=200e9)])
    space = NS(planes=[NS(event_metadata=names, lines=[python, compute])])
    events = cpu_events(space)
    assert sorted((e["name"], e["dur"]) for e in events) == [
        ("MatMul.88", 20000.0), ("MatMul.88", 20000.0), ("subtract_exponential_fusion", 6000.0)]
    total_ms, kinds, kernels = summarise(events, steps=2)
    assert total_ms == 23.0
    assert kinds == {"matmul": 20.0, "element-wise fusion": 3.0}
    hlo = '''ENTRY %main (a: f32[4]) -> f32[4] {
  %MatMul.88 = f32[1024,37000]{1,0} dot(%x, %w), lhs_contracting_dims={1}, metadata={op_type="MatMul" op_name="transformer/Tensordot/MatMul"}
  ROOT %subtract_exponential_fusion = f32[4]{0} fusion(%MatMul.88), kind=kLoop, metadata={op_type="Exp" op_name="loss/Exp"}
  %copy.3 = f32[4]{0} copy(%a)
}'''
    assert hlo_op_names(hlo) == {"MatMul.88": "transformer/Tensordot/MatMul", "subtract_exponential_fusion": "loss/Exp"}


def test_decode_profile_counts_overlapping_ops_once_and_the_rest_as_time_between_ops():
    from benchmarks.decode_profile import busy_ps, summarise

    # (node, type, picoseconds, start): two ops overlap on two threads, a
    # third starts after a gap; the loop body's ops run twice (two steps).
    body = "cond/then/while/body/_1/"
    ops = [(body + "decoder_layer_0/feed_forward/inner/MatMul", "MatMul", 4e6, 0.0),
           (body + "output_projection/MatMul", "MatMul", 4e6, 2e6),
           (body + "decoder_layer_0/feed_forward/inner/MatMul", "MatMul", 2e6, 10e6),
           (body + "output_projection/MatMul", "MatMul", 1e6, 13e6),
           ("cond/encoder_layer_0/MatMul", "MatMul", 1e6, 20e6)]
    assert busy_ps(ops) == 6e6 + 2e6 + 1e6 + 1e6
    figures = summarise(ops, wall_s=30e-6, sentences=1)
    assert figures["op_cpu_s"] == round(12e6 / 1e12, 3) and figures["steps"] == 2
    assert figures["ops_running_s"] == round(10e6 / 1e12, 3)
    assert figures["between_ops_s"] == round(30e-6 - 10e6 / 1e12, 3)
    assert figures["by_type"]["MatMul"]["runs"] == 5 and figures["by_type"]["MatMul"]["us_per_run"] == 2.4
    assert figures["by_part"]["outside"]["ms"] == round(1e6 / 1e9, 2)


def test_wait_for_quiet_waits_for_the_load_to_fall_and_says_when_it_did_not(monkeypatch):
    from benchmarks import report

    loads, slept = iter([3.0, 1.2, 0.4, 0.3]), []
    monkeypatch.setattr(report.os, "getloadavg", lambda: (next(loads), 1.0, 1.0))
    monkeypatch.setattr("time.sleep", slept.append)
    seen = report.wait_for_quiet(0.5, timeout_s=60, poll_s=5)
    assert seen["quiet"] and seen["load_average"] == [0.4, 1.0, 1.0] and slept == [5, 5]
    monkeypatch.setattr(report.os, "getloadavg", lambda: (2.0, 2.0, 2.0))
    busy = report.wait_for_quiet(0.5, timeout_s=0)
    assert not busy["quiet"] and busy["load_average"] == [2.0, 2.0, 2.0] and busy["waited_s"] == 0


def test_translate_speed_runs_ours_first_and_gives_ctranslate2_the_penalty_of_the_closest_bleu():
    from benchmarks.translate_speed import ct2_settings, closest_bleu, engine_order, parse_args, vs_anchor

    engines = ["ctranslate2-float32", "savedmodel", "ctranslate2-float32-matched", "translator-jax-float32",
               "translator-tf-float32"]
    assert engine_order(engines) == ["translator-tf-float32", "savedmodel", "translator-jax-float32",
                                     "ctranslate2-float32", "ctranslate2-float32-matched"]
    args = parse_args(["--engines", "ctranslate2-float32", "--ct2-length-penalty", "0.2"])
    # At its defaults one hypothesis and patience 1; matched, our work: the 4-best, the note's patience and penalty.
    assert ct2_settings("ctranslate2-float32", args) == dict(num_hypotheses=1, patience=1.0, length_penalty=0.2)
    assert ct2_settings("ctranslate2-float32-matched", args) == dict(num_hypotheses=4, patience=2.0,
                                                                     length_penalty=0.42)
    references = [["the cat sat on the mat"], ["a dog ran far away"]]
    by_penalty = {"0.0": ["the cat sat on the mat", "a dog ran"], "0.5": ["the cat sat on the mat", "a dog ran far"],
                  "1.0": ["the cat sat on the mat", "a dog ran far away"]}
    chosen, scores = closest_bleu(by_penalty, references, target=scores_of(by_penalty["0.5"], references) + 0.01)
    assert chosen == 0.5 and scores[0.0] < scores[0.5] < scores[1.0] == pytest.approx(100.0)
    results = [{"engine": "ctranslate2-float32", "sorted_sentences_per_s": 100.0, "file_sentences_per_s": 50.0,
                "latency_p50_ms": 10.0},
               {"engine": "savedmodel", "sorted_sentences_per_s": 80.0, "file_sentences_per_s": 60.0,
                "latency_p50_ms": 25.0}]
    vs_anchor(results)
    assert results[1]["vs_ctranslate2"] == {"sorted_throughput": 0.8, "file_throughput": 1.2, "one_sentence_p50": 2.5}


def scores_of(outputs, references):
    from keras_transformer.evaluation import corpus_bleu

    return corpus_bleu(outputs, references)[0].score
