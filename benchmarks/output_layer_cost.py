"""What the output layer costs: the shared-embedding projection and the loss.

Forward and backward of `loss(labels, x @ W^T)` for `tokens` hidden states of
width `d_model` and a `vocab_size` vocabulary, compiled (XLA, TensorFlow or
JAX), four ways: our label-smoothed loss fused with the projection
(`output_layer.projected_cross_entropy`, what `Transformer` logits get), the
same loss from the logits alone (its hand-written gradient, `softmax -
target`), the plain Keras peer's log-softmax loss with a gathered label, and
the matrix products alone (the logits simply summed). The difference between
a loss and the last is what its passes over the logits cost.

    KERAS_BACKEND=tensorflow python benchmarks/output_layer_cost.py --d-model 128
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.report import write_json  # noqa: E402


def losses(label_smoothing):
    """`{name: value(x, w, labels)}`: the scalar loss of the logits `x @ w^T`."""
    from keras import ops

    from keras_transformer.losses import smoothed_cross_entropy, token_mean
    from keras_transformer.output_layer import project, projected_cross_entropy

    def fused(x, w, labels):
        return projected_cross_entropy(labels, project(x, w), x, w, label_smoothing)

    def ours(x, w, labels):
        logits = project(x, w, record=False)  # (tokens, vocab), nothing for a fused loss to find
        return token_mean(smoothed_cross_entropy(labels, logits, label_smoothing), labels > 0)

    def plain(x, w, labels):
        log_p = ops.log_softmax(project(x, w, record=False), axis=-1)
        nll = -ops.squeeze(ops.take_along_axis(log_p, labels[:, None], axis=-1), -1)
        return ops.mean((1 - label_smoothing) * nll - label_smoothing * ops.mean(log_p, axis=-1))

    def matmul_only(x, w, labels):
        return ops.sum(project(x, w, record=False))

    return {
        "ours, fused": fused,
        "ours, from logits": ours,
        "plain Keras peer": plain,
        "matrix products only": matmul_only,
    }


def gradient_function(value):
    """Compiled (x, w, labels) -> (dx, dw) of the scalar value(x, w, labels)."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(jax.grad(value, argnums=(0, 1)))
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        @tf.function(jit_compile=True)
        def grads(x, w, labels):
            with tf.GradientTape() as tape:
                tape.watch([x, w])
                result = value(x, w, labels)
            return tape.gradient(result, [x, w])

        return grads
    raise SystemExit("Run with KERAS_BACKEND=tensorflow or jax (a compiled gradient).")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=1024, help="target tokens per step (32 x 32 in the CPU table)")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=37000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)

    import keras
    from keras import ops

    rng = np.random.default_rng(0)
    x = ops.convert_to_tensor(rng.normal(0, 0.1, (args.tokens, args.d_model)).astype("float32"))
    w = ops.convert_to_tensor(rng.normal(0, 0.1, (args.vocab_size, args.d_model)).astype("float32"))
    labels = ops.convert_to_tensor(rng.integers(1, args.vocab_size, (args.tokens,)).astype("int32"))
    # Rounds interleaved across the variants: a machine whose speed drifts slows them alike.
    compiled = {name: gradient_function(value) for name, value in losses(0.1).items()}
    for grads in compiled.values():
        [ops.convert_to_numpy(g) for g in grads(x, w, labels)]
    times = {name: [] for name in compiled}
    for _ in range(args.repeats):
        for name, grads in compiled.items():
            start = time.perf_counter()
            for _ in range(5):
                out = grads(x, w, labels)
            [ops.convert_to_numpy(g) for g in out]
            times[name].append((time.perf_counter() - start) / 5 * 1e3)
    rows = [dict(variant=name, ms=min(t), ms_median=float(np.median(t)), ms_all=t) for name, t in times.items()]
    print(f"\n{keras.backend.backend()}: {args.tokens} tokens x d_model {args.d_model} x vocab {args.vocab_size}, "
          f"forward + backward, fastest (median) of {args.repeats} interleaved rounds")
    for row in rows:
        print(f"{row['variant']:22s} {row['ms']:8.1f} ms ({row['ms_median']:.1f})")
    if args.output:
        write_json(args.output, dict(backend=keras.backend.backend(), args=vars(args), results=rows))
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
