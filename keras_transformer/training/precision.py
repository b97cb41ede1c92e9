"""Choosing the dtype policy: bf16 where supported, else fp16, else fp32.

`"mixed_bfloat16"` needs no loss scaling; `"mixed_float16"` does, and
`model.compile` wraps the optimizer in `keras.optimizers.LossScaleOptimizer`
for a model built with that policy (it skips steps whose gradients are not
finite and lowers the scale). Either way the model core keeps LayerNorm
statistics, softmax and the loss in float32. On a CPU, mixed precision is
slower than float32, so `"auto"` picks float32 there.

Example:

>>> policy = resolve_precision("auto")   # "mixed_bfloat16" on an A100
>>> model = Transformer.from_architecture("base", vocab_size=37000, dtype=policy)
"""

import warnings

import keras

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def resolve_precision(precision="auto"):
    """The dtype policy name for `precision` (`"auto"` or one of `POLICIES`)."""
    if precision in POLICIES:
        return precision
    if precision != "auto":
        raise ValueError(
            f"Unknown precision. Expected 'auto' or one of {POLICIES}. Received: precision={precision!r}"
        )
    support = _accelerator_bf16_support()
    if support is None:
        return "float32"
    return "mixed_bfloat16" if support else "mixed_float16"


def _accelerator_bf16_support():
    """`None` without an accelerator, else whether it computes in bf16."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            return None
        details = tf.config.experimental.get_device_details(gpus[0])
        return tuple(details.get("compute_capability", (0, 0))) >= (8, 0)
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform == "tpu":
            return True
        if device.platform != "gpu":
            return None
        capability = getattr(device, "compute_capability", "0.0")
        return tuple(int(p) for p in str(capability).split(".")[:2]) >= (8, 0)
    if backend == "torch":
        import torch

        if not torch.cuda.is_available():
            return None
        return torch.cuda.is_bf16_supported()
    return None


def resolve_jit_compile(jit_compile, distributed):
    """`jit_compile` for `model.compile`: XLA on by default where it works.

    `"auto"` gives `True` on JAX (every `jit` is XLA) and on TensorFlow with
    one GPU and no strategy. Under a `tf.distribute` strategy, and on CPU, it
    stays Keras' `"auto"` (no XLA): with `jit_compile=True`, MirroredStrategy
    over two logical CPUs fails ("Trying to access resource ... located in
    device CPU:1") while `"auto"` trains and matches one device exactly.
    """
    backend = keras.backend.backend()
    strategy = getattr(distributed, "strategy", None)
    if jit_compile is True and backend == "tensorflow" and distributed.kind in ("mirrored", "multi-worker"):
        import tensorflow as tf

        if not tf.config.list_physical_devices("GPU"):
            warnings.warn(
                "jit_compile=True under a tf.distribute strategy on CPU devices fails "
                '("Trying to access resource ... located in device CPU:1"); using "auto".',
                stacklevel=2,
            )
            return "auto"
    if jit_compile != "auto":
        return jit_compile
    if backend == "jax":
        return True
    if backend == "tensorflow" and strategy is None:
        import tensorflow as tf

        return True if tf.config.list_physical_devices("GPU") else "auto"
    return "auto"
