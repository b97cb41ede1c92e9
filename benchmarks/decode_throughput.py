"""Decoding throughput: greedy and beam search, cached and uncached.

For each (preset, method, batch size, cache) the decoder is compiled for
the current backend (`tf.function(jit_compile=True)` on TensorFlow,
`jax.jit` on JAX, eager on PyTorch) with `keras_transformer.decoding.
jit_decoder`, run once to compile, then timed over `--repeats` runs (the
best is reported). Weights are random; EOS is disabled (`eos_id=None`) so
every run produces exactly `--output-length` tokens per sentence and runs
are comparable. Prints a table and writes JSON (`--output`).

"Tokens/s" counts output tokens: batch x output length (one sentence per
source); "hyp tokens/s" counts every beam's token: x beam size.

    KERAS_BACKEND=tensorflow python benchmarks/decode_throughput.py \
        --presets base --methods beam --batch-sizes 32 --cache both \
        --output benchmarks/results/decode_cpu_tf.json
"""

import argparse
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from benchmarks.report import write_json  # noqa: E402


def measure(model, method, batch_size, use_cache, args):
    from keras import ops

    from keras_transformer.decoding import beam_search, greedy_decode, jit_decoder

    rng = np.random.default_rng(0)
    source = rng.integers(4, args.vocab_size, size=(batch_size, args.source_length)).astype("int32")
    source[:, -1] = 3  # EOS
    kwargs = dict(max_length=args.output_length, eos_id=None, use_cache=use_cache)
    if method == "beam":
        fn = beam_search
        kwargs.update(beam_size=args.beam_size, alpha=args.alpha)
    else:
        fn = greedy_decode
    decode = jit_decoder(model, fn, **kwargs) if args.jit else (lambda s: fn(model, s, **kwargs))

    start = time.perf_counter()
    tokens, _ = decode(source)
    tokens = ops.convert_to_numpy(tokens)
    first = time.perf_counter() - start
    assert tokens.shape == (batch_size, args.output_length), tokens.shape
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        ops.convert_to_numpy(decode(source)[0])
        times.append(time.perf_counter() - start)
    best = min(times)
    beams = args.beam_size if method == "beam" else 1
    generated = batch_size * args.output_length
    return {
        "method": method if method == "greedy" else f"beam{args.beam_size}",
        "batch_size": batch_size,
        "cache": use_cache,
        "seconds": best,
        "first_call_seconds": first,
        "tokens_per_s": generated / best,
        "hyp_tokens_per_s": generated * beams / best,
        "sentences_per_s": batch_size / best,
        "ms_per_step": 1000 * best / args.output_length,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["tiny", "base"])
    parser.add_argument("--methods", nargs="+", choices=["greedy", "beam"], default=["greedy", "beam"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 32, 128])
    parser.add_argument("--cache", choices=["on", "off", "both"], default="both")
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--vocab-size", type=int, default=37000)
    parser.add_argument("--source-length", type=int, default=20)
    parser.add_argument("--output-length", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-jit", dest="jit", action="store_false", help="run eagerly")
    parser.add_argument("--output", help="JSON file to write")
    args = parser.parse_args()

    import keras

    from keras_transformer import Transformer

    caches = {"on": [True], "off": [False], "both": [True, False]}[args.cache]
    results = []
    header = f"{'preset':6} {'method':7} {'batch':>5} {'cache':>5} {'s/run':>8} {'1st call':>8} {'tok/s':>9} {'hyp tok/s':>10} {'sent/s':>8} {'ms/step':>8}"
    print(header)
    for preset in args.presets:
        keras.utils.set_random_seed(0)
        model = Transformer.from_architecture(preset, vocab_size=args.vocab_size, max_length=max(256, args.source_length, args.output_length))
        for method in args.methods:
            for batch_size in args.batch_sizes:
                for use_cache in caches:
                    row = {"preset": preset, **measure(model, method, batch_size, use_cache, args)}
                    results.append(row)
                    print(
                        f"{preset:6} {row['method']:7} {batch_size:5d} {str(use_cache):>5} {row['seconds']:8.2f} "
                        f"{row['first_call_seconds']:8.1f} {row['tokens_per_s']:9.1f} {row['hyp_tokens_per_s']:10.1f} "
                        f"{row['sentences_per_s']:8.2f} {row['ms_per_step']:8.1f}",
                        flush=True,
                    )
    speedups = {}
    for row in results:
        if row["cache"]:
            for other in results:
                if not other["cache"] and all(other[k] == row[k] for k in ("preset", "method", "batch_size")):
                    key = f"{row['preset']}/{row['method']}/batch{row['batch_size']}"
                    speedups[key] = other["seconds"] / row["seconds"]
    for key, value in speedups.items():
        print(f"cache speed-up {key}: {value:.1f}x")
    if args.output:
        write_json(args.output, {
            "backend": keras.backend.backend(),
            "keras": keras.__version__,
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "args": vars(args),
            "results": results,
            "cache_speedups": speedups,
        })


if __name__ == "__main__":
    main()
