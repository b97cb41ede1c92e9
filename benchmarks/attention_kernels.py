"""Which attention kernels a compiled forward pass uses on this machine (JAX).

Prints the cuDNN fallbacks that Keras logged while tracing and the custom
calls in the compiled HLO: on an NVIDIA GPU, `__cudnn$fmha...` means fused
attention ran. Usage: `KERAS_BACKEND=jax python benchmarks/attention_kernels.py`.
"""
import io, logging, numpy as np, keras
keras.config.set_dtype_policy("mixed_bfloat16")
from keras_transformer import Transformer
stream = io.StringIO(); logging.getLogger().addHandler(logging.StreamHandler(stream))
m = Transformer.from_architecture("tiny", vocab_size=1000)
src = np.random.randint(1, 1000, (8, 32)); src[:, 20:] = 0
tgt = np.random.randint(1, 1000, (8, 32)); tgt[:, 25:] = 0
import jax
f = jax.jit(lambda s, t: m((s, t), training=False))
out = f(src, tgt)
print("cudnn fallbacks logged:", stream.getvalue().count("Failed to apply cudnn"), "finite:", bool(np.isfinite(np.asarray(out, "float32")).all()))
hlo = f.lower(src, tgt).compile().as_text()
print("custom calls:", sorted(set(l.split('custom_call_target="')[1].split('"')[0] for l in hlo.splitlines() if 'custom_call_target="' in l)))
