"""The HTTP server's latency under concurrent clients, each sending 1-4 test sentences a request.

    keras-transformer export tatoeba_en_fr --output-dir saved_models/tatoeba_en_fr
    python benchmarks/serving_latency.py --model-dir saved_models/tatoeba_en_fr --concurrency 32 --seconds 60 \\
        --output benchmarks/results/serving_latency_cpu.json

Starts `keras-transformer serve MODEL_DIR --port 0` in a process of its own,
as users run it (`--intra-op-threads` and `--inter-op-threads` passed on),
and waits until it answers. Then, for each concurrency level, that many
client threads in this process send predict requests for `--seconds`
seconds, each request holding 1 to 4 sources of `--corpus`'s test split
(drawn per client with its own seed), after a warm-up of a few seconds at
that level. Per level: requests and sentences answered, failures,
requests/s and sentences/s, and the latency of a request (p50, p90, p99,
the largest).

Without `--model-dir`, a randomly initialised `tiny` model with a small
tokenizer is exported first, and the clients send its own sentences: the
figures then measure the serving path (HTTP, batching, in-graph
tokenization and beam search), not translation quality.

Before each level (and its warm-up) the script reads the machine's load
average and waits up to `--quiet-wait` seconds for it to fall to
`--max-load`; the load is recorded beside the level's figures. The clients
share the cores with the server, as a load generator on the same machine
does.
"""

import argparse
import io
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_flags, cpu_name, load_average, wait_for_quiet, write_json  # noqa: E402

SENTENCES = [
    "How are you?", "I would like a cup of coffee, please.", "Where is the station?",
    "She has been reading that book since Monday.", "It is raining.", "Thank you very much!",
    "We will meet at 10 o'clock tomorrow.", "Do you speak French?",
]


def demo_model(directory):
    """Exports a random `tiny` model with a small BPE tokenizer."""
    import keras
    import sentencepiece as spm

    from keras_transformer import Transformer
    from keras_transformer.export import export

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES * 20), model_writer=buffer, vocab_size=100, model_type="bpe",
        pad_id=0, unk_id=1, bos_id=2, eos_id=3, character_coverage=1.0, minloglevel=2,
    )
    keras.utils.set_random_seed(0)
    model = Transformer.from_architecture("tiny", vocab_size=100, max_length=128)
    model((np.ones((1, 2), "int32"), np.ones((1, 2), "int32")))
    return os.path.dirname(export(model, buffer.getvalue(), os.path.join(directory, "demo"), buckets=(16, 32)))


def start_server(model_dir, args):
    """`(process, predict URL)` of `keras-transformer serve` on a free port."""
    command = [sys.executable, "-m", "keras_transformer.cli", "serve", model_dir, "--port", "0",
               "--intra-op-threads", str(args.intra_op_threads), "--inter-op-threads", str(args.inter_op_threads),
               "--max-batch-size", str(args.max_batch_size)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
               TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in process.stdout:
        if line.startswith("Serving "):
            name, url = line.split()[1], line.split()[-1]
            threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()  # drain it
            return process, f"{url}/v1/models/{name}:predict"
    raise RuntimeError(f"`keras-transformer serve` ended ({process.wait()}) before it served")


def run_clients(url, sentences, concurrency, seconds, seed=0):
    """Each of `concurrency` threads sends requests of 1 to 4 of `sentences`
    for `seconds`; the level's figures."""
    import httpx

    latencies, sizes, failures = [], [], []
    stop = time.perf_counter() + seconds
    lock = threading.Lock()

    def client(worker):
        draw = random.Random(seed * 1000 + worker)
        with httpx.Client(timeout=120) as http:
            while time.perf_counter() < stop:
                batch = draw.sample(sentences, draw.randint(1, 4))
                start = time.perf_counter()
                try:
                    ok = http.post(url, json={"instances": batch}).status_code == 200
                except httpx.HTTPError:
                    ok = False
                elapsed = time.perf_counter() - start
                with lock:
                    if ok:
                        latencies.append(elapsed)
                        sizes.append(len(batch))
                    else:
                        failures.append(elapsed)

    threads = [threading.Thread(target=client, args=(w,)) for w in range(concurrency)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    ms = np.array(latencies) * 1e3
    percentile = (lambda q: float(np.percentile(ms, q))) if len(ms) else (lambda q: None)
    return dict(
        concurrency=concurrency, seconds=round(wall, 2), requests=len(latencies), sentences=int(sum(sizes)),
        failures=len(failures), requests_per_s=len(latencies) / wall, sentences_per_s=sum(sizes) / wall,
        p50_ms=percentile(50), p90_ms=percentile(90), p99_ms=percentile(99),
        max_ms=float(ms.max()) if len(ms) else None,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", help="saved_models/<name>; default: a random demo model")
    parser.add_argument("--corpus", default=None,
                        help="the test split whose sources the clients send (default: the model folder's name, "
                             "a shipped corpus; the demo model's own sentences without --model-dir)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup-seconds", type=float, default=5.0)
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--intra-op-threads", type=int, default=1,
                        help="the server's (`serve --intra-op-threads`; 1, as docs/serving.md recommends)")
    parser.add_argument("--inter-op-threads", type=int, default=0, help="the server's (0: one per core)")
    parser.add_argument("--max-load", type=float, default=0.5)
    parser.add_argument("--quiet-wait", type=float, default=300)
    parser.add_argument("--output")
    args = parser.parse_args(argv)

    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    model_dir = args.model_dir or demo_model(tempfile.mkdtemp())
    corpus = args.corpus or (os.path.basename(os.path.normpath(args.model_dir)) if args.model_dir else None)
    if corpus is None:
        sentences = SENTENCES
    else:
        from keras_transformer import datasets

        sentences = datasets.load_references(corpus, "test")[0]
    process, url = start_server(model_dir, args)
    results = []
    try:
        for concurrency in args.concurrency:
            load = wait_for_quiet(args.max_load, args.quiet_wait)  # the server idles meanwhile
            run_clients(url, sentences, concurrency, args.warmup_seconds, seed=1)
            result = run_clients(url, sentences, concurrency, args.seconds)
            result["machine_load"] = {**load, "load_average_after": load_average()}
            results.append(result)
    finally:
        process.terminate()
        process.wait(timeout=60)
    print(f"\nmodel {model_dir}, {len(sentences)} sentences to draw from, {os.cpu_count()} cores")
    print(f"{'clients':>8s} {'requests':>9s} {'sentences':>10s} {'req/s':>8s} {'sent/s':>8s} {'p50 ms':>8s} "
          f"{'p90 ms':>8s} {'p99 ms':>8s} {'failed':>7s} {'load':>6s}")
    for r in results:
        load = r["machine_load"]
        print(f"{r['concurrency']:8d} {r['requests']:9d} {r['sentences']:10d} {r['requests_per_s']:8.1f} "
              f"{r['sentences_per_s']:8.1f} {r['p50_ms'] or 0:8.1f} {r['p90_ms'] or 0:8.1f} {r['p99_ms'] or 0:8.1f} "
              f"{r['failures']:7d} {load['load_average'][0] if load['load_average'] else 0:5.2f}"
              f"{'' if load['quiet'] else '!'}")
    report = dict(
        benchmark="serving_latency",
        command=" ".join(["python", "benchmarks/serving_latency.py"] + list(sys.argv[1:] if argv is None else argv)),
        machine={"cpu": cpu_name(), "cpu_flags": cpu_flags(), "cpu_count": os.cpu_count(),
                 "quiet": all(r["machine_load"]["quiet"] for r in results)},
        model_dir=model_dir, corpus=corpus, sentences_per_request=[1, 4], args=vars(args), results=results,
    )
    if args.output:
        write_json(args.output, report)
        print(f"wrote {args.output}")
    return report


if __name__ == "__main__":
    main()
