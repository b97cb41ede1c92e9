"""What a dropout mask costs: keras.random.dropout against our hashed masks.

Ten dropouts in a row on a `(batch, length, d_model)` activation, compiled
(XLA on TensorFlow and JAX; eager on PyTorch), fresh seeds each call. Prints
ms per dropout and elements/s for each shape, and writes JSON.

    KERAS_BACKEND=tensorflow python benchmarks/dropout_masks.py --output /tmp/dropout.json
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHAIN = 10


def compiled(fn):
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(fn)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    return fn


def variants(rate):
    import keras
    from keras import ops

    from keras_transformer.layers.dropout import keep_mask

    def keras_dropout(x, seed):  # seed: int32 (2,), a stateless Keras seed
        for i in range(CHAIN):
            x = keras.random.dropout(x, rate, seed=seed + i) * 0.9
        return x

    def hashed(x, seed):  # seed: int32 scalar
        scale = ops.cast(1 / (1 - rate), x.dtype)
        for i in range(CHAIN):
            keep = keep_mask(ops.shape(x), seed + i, rate)
            x = ops.where(keep, x * scale, ops.zeros_like(x)) * 0.9
        return x

    return {"keras.random.dropout": (keras_dropout, (2,)), "ours (hashed)": (hashed, ())}


def measure(fn, seed_shape, shape, repeats):
    import keras
    from keras import ops

    x = ops.convert_to_tensor(np.random.default_rng(0).normal(size=shape).astype("float32"))
    fn = compiled(fn)
    seed = lambda i: ops.convert_to_tensor(np.full(seed_shape, 1000 * i, "int32"))  # noqa: E731
    ops.convert_to_numpy(fn(x, seed(0)))
    best = float("inf")
    for r in range(repeats):
        start = time.perf_counter()
        for i in range(5):
            out = fn(x, seed(5 * r + i + 1))
        ops.convert_to_numpy(out)
        best = min(best, (time.perf_counter() - start) / (5 * CHAIN))
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["32,32,128", "32,32,512", "384,64,512"],
                        help="activation shapes, comma-separated")
    parser.add_argument("--rate", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)

    import keras

    rows = []
    for text in args.shapes:
        shape = tuple(int(d) for d in text.split(","))
        for name, (fn, seed_shape) in variants(args.rate).items():
            seconds = measure(fn, seed_shape, shape, args.repeats)
            rows.append(dict(shape=shape, variant=name, ms_per_dropout=seconds * 1e3,
                             elements_per_s=float(np.prod(shape)) / seconds))
    print(f"\n{keras.backend.backend()}, rate {args.rate}, fastest of {args.repeats}")
    print(f"{'shape':16s} {'variant':22s} {'ms/dropout':>11s} {'Melem/s':>9s} {'speed-up':>9s}")
    for row in rows:
        base = next(r for r in rows if r["shape"] == row["shape"] and r["variant"] == "keras.random.dropout")
        row["speedup_vs_keras"] = base["ms_per_dropout"] / row["ms_per_dropout"]
        print(f"{'x'.join(map(str, row['shape'])):16s} {row['variant']:22s} {row['ms_per_dropout']:11.3f} "
              f"{row['elements_per_s'] / 1e6:9.0f} {row['speedup_vs_keras']:8.1f}x")
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(dict(backend=keras.backend.backend(), args=vars(args), results=rows), f, indent=2)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
