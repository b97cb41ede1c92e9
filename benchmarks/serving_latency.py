"""Requests/s and latency of the HTTP server under 1, 8 and 32 concurrent clients.

    KERAS_BACKEND=tensorflow python benchmarks/serving_latency.py \
        --model-dir saved_models/tatoeba_en_fr --output benchmarks/results/serving.json

Starts `keras_transformer.serving` on a free localhost port (uvicorn, in a
thread of this process), then, for each concurrency level, that many client
threads send single-sentence predict requests for `--seconds` seconds.
Without `--model-dir`, a randomly initialised `tiny` model with a small
tokenizer is exported first: the figures then measure the serving path (HTTP,
batching, in-graph tokenization and beam search), not translation quality.
"""

import argparse
import io
import os
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.report import write_json  # noqa: E402

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


def run_clients(url, concurrency, seconds):
    import httpx

    latencies, failures = [], []
    stop = time.perf_counter() + seconds
    lock = threading.Lock()

    def client(worker):
        with httpx.Client(timeout=120) as http:
            i = worker
            while time.perf_counter() < stop:
                start = time.perf_counter()
                r = http.post(url, json={"instances": [SENTENCES[i % len(SENTENCES)]]})
                elapsed = time.perf_counter() - start
                with lock:
                    (latencies if r.status_code == 200 else failures).append(elapsed)
                i += 1

    threads = [threading.Thread(target=client, args=(w,)) for w in range(concurrency)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    ms = np.array(latencies) * 1e3
    return dict(
        concurrency=concurrency, requests=len(latencies), failures=len(failures),
        requests_per_s=len(latencies) / wall,
        p50_ms=float(np.percentile(ms, 50)) if len(ms) else None,
        p99_ms=float(np.percentile(ms, 99)) if len(ms) else None,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", help="saved_models/<name>; default: a random demo model")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--max-batch-size", type=int, default=64)
    parser.add_argument("--output")
    args = parser.parse_args(argv)

    from tests.serving.conftest import RunningServer  # the same harness as the tests
    from keras_transformer.serving import ServingLimits, create_app, load_saved_model_predictor
    from keras_transformer.serving.server import model_name

    model_dir = args.model_dir or demo_model(tempfile.mkdtemp())
    predict, version = load_saved_model_predictor(model_dir)
    predict(SENTENCES)  # load and warm up every graph branch used below
    name = model_name(model_dir)
    limits = ServingLimits(max_batch_size=args.max_batch_size)
    server = RunningServer(create_app(predict, name, version, limits))
    url = f"{server.url}/v1/models/{name}:predict"
    results = []
    try:
        for concurrency in args.concurrency:
            run_clients(url, concurrency, 1.0)  # warm-up
            results.append(run_clients(url, concurrency, args.seconds))
    finally:
        server.stop()
    print(f"\nmodel {model_dir} (version {version}), CPU, {os.cpu_count()} cores")
    print(f"{'clients':>8s} {'requests':>9s} {'req/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'failed':>7s}")
    for r in results:
        print(f"{r['concurrency']:8d} {r['requests']:9d} {r['requests_per_s']:8.1f} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {r['failures']:7d}")
    if args.output:
        write_json(args.output, dict(model_dir=model_dir, version=version, args=vars(args), results=results))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
