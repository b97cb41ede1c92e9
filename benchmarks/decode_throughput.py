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

`--dtypes` runs our model in other dtype policies too (`bfloat16`: the
float32 model's weights cast). `--ctranslate2 float32 float16 ...` puts
CTranslate2 beside it on the same weights (`keras_transformer.
converters.ctranslate2`, a vocabulary of placeholder pieces), on
`--ct2-device` (`cpu` or `cuda`), with each listed `compute_type`: the same
sources, beam size and length penalty, and `min_decoding_length =
max_decoding_length = --output-length` so that it too decodes exactly that
many tokens per sentence (the cached rows only; CTranslate2 always caches).

    KERAS_BACKEND=tensorflow python benchmarks/decode_throughput.py \
        --presets base --methods beam --batch-sizes 32 --cache both \
        --output benchmarks/results/decode_cpu_tf.json

    # GPU: the base preset, beam 4, batch 128, beside CTranslate2's CUDA build
    KERAS_BACKEND=jax python benchmarks/decode_throughput.py --presets base \
        --methods beam --batch-sizes 128 --cache on --dtypes float32 bfloat16 \
        --ctranslate2 float32 float16 bfloat16 int8_float16 --ct2-device cuda
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
from keras_transformer.tokens import EOS_ID  # noqa: E402


def sources(batch_size, args):
    """`(batch, source_length)` int32 random ids, each row ending in EOS."""
    rng = np.random.default_rng(0)
    source = rng.integers(4, args.vocab_size, size=(batch_size, args.source_length)).astype("int32")
    source[:, -1] = EOS_ID
    return source


def rates(method, batch_size, best, first, tokens, args):
    beams = args.beam_size if method == "beam" else 1
    return {
        "method": method if method == "greedy" else f"beam{args.beam_size}",
        "batch_size": batch_size,
        "seconds": best,
        "first_call_seconds": first,
        "output_tokens": tokens,
        "tokens_per_s": tokens / best,
        "hyp_tokens_per_s": tokens * beams / best,
        "sentences_per_s": batch_size / best,
        "ms_per_step": 1000 * best / args.output_length,
    }


def timed(call, repeats):
    """`(result of the first call, its seconds, the best of `repeats` more calls' seconds)`."""
    start = time.perf_counter()
    result = call()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return result, first, min(times)


def measure(model, method, batch_size, use_cache, args):
    from keras import ops

    from keras_transformer.decoding import beam_search, greedy_decode, jit_decoder

    source = sources(batch_size, args)
    kwargs = dict(max_length=args.output_length, eos_id=None, use_cache=use_cache)
    if method == "beam":
        fn = beam_search
        kwargs.update(beam_size=args.beam_size, alpha=args.alpha)
    else:
        fn = greedy_decode
    decode = jit_decoder(model, fn, **kwargs) if args.jit else (lambda s: fn(model, s, **kwargs))

    tokens, first, best = timed(lambda: ops.convert_to_numpy(decode(source)[0]), args.repeats)
    assert tokens.shape == (batch_size, args.output_length), tokens.shape
    row = rates(method, batch_size, best, first, batch_size * args.output_length, args)
    row["cache"] = use_cache
    return row


def placeholder_pieces(vocab_size):
    """A vocabulary for a random model: the special pieces, then `w4`, `w5`, ..."""
    return ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(4, vocab_size)]


def ctranslate2_translator(model_dir, compute_type, args):
    import ctranslate2

    return ctranslate2.Translator(
        model_dir, device=args.ct2_device, compute_type=compute_type,
        intra_threads=args.threads if args.ct2_device == "cpu" else 0,
    )


def measure_ctranslate2(translator, method, batch_size, args):
    """CTranslate2 on the same sources, decoding exactly `--output-length` tokens."""
    pieces = placeholder_pieces(args.vocab_size)
    batch = [[pieces[i] for i in row] for row in sources(batch_size, args)]
    options = dict(
        beam_size=args.beam_size if method == "beam" else 1, num_hypotheses=1, length_penalty=args.alpha,
        min_decoding_length=args.output_length, max_decoding_length=args.output_length, max_batch_size=0,
    )
    results, first, best = timed(lambda: translator.translate_batch(batch, **options), args.repeats)
    lengths = [len(r.hypotheses[0]) for r in results]
    if set(lengths) != {args.output_length}:
        raise RuntimeError(f"CTranslate2 decoded {min(lengths)}..{max(lengths)} tokens, not {args.output_length}.")
    row = rates(method, batch_size, best, first, sum(lengths), args)
    row.update(cache=True, device=args.ct2_device)
    return row


def print_row(row):
    print(
        f"{row['engine']:22} {row['preset']:6} {row['method']:7} {row['batch_size']:5d} {str(row['cache']):>5} "
        f"{row['seconds']:8.3f} {row['first_call_seconds']:8.1f} {row['tokens_per_s']:9.1f} "
        f"{row['hyp_tokens_per_s']:10.1f} {row['sentences_per_s']:8.2f} {row['ms_per_step']:8.2f}",
        flush=True,
    )


def main(argv=None):
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
    parser.add_argument("--dtypes", nargs="+", default=["float32"], help="our model's dtype policies")
    parser.add_argument("--ctranslate2", nargs="*", default=[], metavar="COMPUTE_TYPE",
                        help="CTranslate2 compute types to run beside ours (e.g. float32 int8 float16)")
    parser.add_argument("--ct2-device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="CTranslate2's threads on CPU")
    parser.add_argument("--output", help="JSON file to write")
    args = parser.parse_args(argv)

    import tempfile

    import keras

    from keras_transformer import Transformer
    from keras_transformer.decoding.common import ensure_built

    caches = {"on": [True], "off": [False], "both": [True, False]}[args.cache]
    results, errors = [], []
    print(f"{'engine':22} {'preset':6} {'method':7} {'batch':>5} {'cache':>5} {'s/run':>8} {'1st call':>8} "
          f"{'tok/s':>9} {'hyp tok/s':>10} {'sent/s':>8} {'ms/step':>8}")
    for preset in args.presets:
        keras.utils.set_random_seed(0)
        shape = dict(vocab_size=args.vocab_size, max_length=max(256, args.source_length, args.output_length))
        model = Transformer.from_architecture(preset, **shape)
        ensure_built(model)
        for dtype in args.dtypes:
            ours = model
            if dtype != "float32":
                ours = Transformer.from_architecture(preset, dtype=dtype, **shape)
                ensure_built(ours)
                ours.set_weights(model.get_weights())
            for method in args.methods:
                for batch_size in args.batch_sizes:
                    for use_cache in caches:
                        row = {"engine": f"ours-{keras.backend.backend()}-{dtype}", "preset": preset,
                               **measure(ours, method, batch_size, use_cache, args)}
                        results.append(row)
                        print_row(row)
        if args.ctranslate2:
            from keras_transformer.converters.ctranslate2 import convert

            with tempfile.TemporaryDirectory() as workdir:
                model_dir = convert(model, placeholder_pieces(args.vocab_size), os.path.join(workdir, "ct2"))
                for compute_type in args.ctranslate2:
                    engine = f"ctranslate2-{args.ct2_device}-{compute_type}"
                    try:  # one load per compute type; every row decodes with it
                        translator = ctranslate2_translator(model_dir, compute_type, args)
                        for method in args.methods:
                            for batch_size in args.batch_sizes:
                                row = {"engine": engine, "preset": preset,
                                       **measure_ctranslate2(translator, method, batch_size, args)}
                                results.append(row)
                                print_row(row)
                    except (RuntimeError, ValueError) as error:  # e.g. no CUDA library, no such type
                        errors.append({"engine": engine, "preset": preset, "error": str(error)})
                        print(f"{engine:22} {preset:6} failed: {error}", flush=True)
    speedups = {}
    for row in results:
        if row["cache"] and row["engine"].startswith("ours"):
            for other in results:
                if not other["cache"] and all(other[k] == row[k] for k in ("engine", "preset", "method", "batch_size")):
                    key = f"{row['engine']}/{row['preset']}/{row['method']}/batch{row['batch_size']}"
                    speedups[key] = other["seconds"] / row["seconds"]
    for key, value in speedups.items():
        print(f"cache speed-up {key}: {value:.1f}x")
    if args.output:
        write_json(args.output, {
            "backend": keras.backend.backend(),
            "keras": keras.__version__,
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "devices": _devices(),
            "ctranslate2": _ctranslate2_version() if args.ctranslate2 else None,
            "args": vars(args),
            "results": results,
            "errors": errors,
            "cache_speedups": speedups,
        })


def _devices():
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return [str(d) for d in jax.devices()]
    return None


def _ctranslate2_version():
    import ctranslate2

    return ctranslate2.__version__


if __name__ == "__main__":
    main()
