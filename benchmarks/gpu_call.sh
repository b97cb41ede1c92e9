#!/usr/bin/env bash
# One device call: decoding on the lent GPU, ours (JAX) beside CTranslate2's CUDA build on the
# same random weights of the base preset, beam 4 and greedy, batch 128 (issue 25's GPU figure).
# Python 3.12 with JAX and CUDA 13, no TensorFlow; Keras and ctranslate2 wheels carried in .whl/.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.5
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# ctranslate2 4.8.5's wheel is built for CUDA 12 and opens libcublas.so.12 by name; the image
# holds CUDA 13's cuBLAS. The handful of cuBLAS calls it makes (cublasGemmEx, cublasSgemm_v2,
# the strided-batched ones) exist in 13 with the same signatures, so 12's name points to 13's file.
lib=$(find / -xdev -name 'libcublas.so.13*' 2>/dev/null | head -1)
echo "cuBLAS: $lib"
mkdir -p /tmp/cu12 && ln -sf "$lib" /tmp/cu12/libcublas.so.12
export LD_LIBRARY_PATH=/tmp/cu12:$(dirname "$lib"):$LD_LIBRARY_PATH
python3 -c "import ctranslate2 as c; print('ctranslate2', c.__version__, 'cuda devices', c.get_cuda_device_count(), sorted(c.get_supported_compute_types('cuda')))"
python3 -c "import jax; print('jax', jax.__version__, jax.devices(), 'matmul precision', jax.config.jax_default_matmul_precision)"
run() {  # name, then decode_throughput.py's arguments
    local name=$1; shift
    timeout 240 python3 benchmarks/decode_throughput.py --presets base --batch-sizes 128 --cache on --repeats 10 \
        --output $OUT/$name.json "$@" 2>&1 | grep -v "^WARNING\|^I0000\|^W0000" | tee $OUT/$name.log
}
ct2="--ctranslate2 float32 float16 bfloat16 int8_float16 --ct2-device cuda"
run decode_gpu_32 --source-length 32 --output-length 32 --methods beam greedy --dtypes float32 bfloat16 $ct2
run decode_gpu_64 --source-length 64 --output-length 64 --methods beam --dtypes float32 bfloat16 $ct2
# JAX's default precision lets XLA multiply float32 matrices in TF32 on this GPU; here full float32.
JAX_DEFAULT_MATMUL_PRECISION=highest run decode_gpu_32_fp32 --source-length 32 --output-length 32 --methods beam
