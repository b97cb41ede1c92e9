"""What a dropout mask costs: keras.layers.Dropout against our hashed masks.

Ten dropouts in a row on a `(batch, length, d_model)` activation, compiled
(XLA on TensorFlow and JAX; eager on PyTorch), each call drawing a new seed
from the layer's SeedGenerator. Prints
ms per dropout and elements/s for each shape, and writes JSON.

    KERAS_BACKEND=tensorflow python benchmarks/dropout_masks.py --output /tmp/dropout.json
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.report import write_json  # noqa: E402

CHAIN = 10


def compiled(layer):
    """Ten calls of `layer` in a row, compiled, with fresh seeds each call."""
    import keras

    def chain(x):
        for _ in range(CHAIN):
            x = layer(x, training=True) * 0.9
        return x

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(chain, jit_compile=True)
    if keras.backend.backend() == "jax":
        import jax

        variables = layer.non_trainable_variables  # the SeedGenerator state

        def stateless(state, x):
            with keras.StatelessScope(state_mapping=list(zip(variables, state))) as scope:
                y = chain(x)
            return y, [scope.get_current_value(v) for v in variables]

        step = jax.jit(stateless)
        state = [v.value for v in variables]

        def run(x):
            nonlocal state
            y, state = step(state, x)
            return y

        return run
    return chain


def measure(layer, shape, repeats):
    from keras import ops

    x = ops.convert_to_tensor(np.random.default_rng(0).normal(size=shape).astype("float32"))
    fn = compiled(layer)
    ops.convert_to_numpy(fn(x))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(5):
            out = fn(x)
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

    from keras_transformer.layers import Dropout

    rows = []
    for text in args.shapes:
        shape = tuple(int(d) for d in text.split(","))
        for name, layer in (("keras.layers.Dropout", keras.layers.Dropout(args.rate, seed=1)),
                            ("ours", Dropout(args.rate, seed=1))):
            seconds = measure(layer, shape, args.repeats)
            rows.append(dict(shape=shape, variant=name, ms_per_dropout=seconds * 1e3,
                             elements_per_s=float(np.prod(shape)) / seconds))
    print(f"\n{keras.backend.backend()}, rate {args.rate}, fastest of {args.repeats}")
    print(f"{'shape':16s} {'variant':22s} {'ms/dropout':>11s} {'Melem/s':>9s} {'speed-up':>9s}")
    for row in rows:
        base = next(r for r in rows if r["shape"] == row["shape"] and r["variant"] == "keras.layers.Dropout")
        row["speedup_vs_keras"] = base["ms_per_dropout"] / row["ms_per_dropout"]
        print(f"{'x'.join(map(str, row['shape'])):16s} {row['variant']:22s} {row['ms_per_dropout']:11.3f} "
              f"{row['elements_per_s'] / 1e6:9.0f} {row['speedup_vs_keras']:8.1f}x")
    if args.output:
        write_json(args.output, dict(backend=keras.backend.backend(), args=vars(args), results=rows))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
