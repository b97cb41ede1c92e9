#!/usr/bin/env bash
# One device call: decoding on one GPU, ours (JAX) beside
# CTranslate2's CUDA build.
# 1. The base architecture with random weights, beam 4 and greedy, batch 128, 32 -> 32 tokens.
# 2. The zoo model tatoeba_en_fr on its test split, batch 128, beam 4: translate_speed.py --device gpu,
#    then the JAX Translator again with --narrow-batches.
# 3. Base, beam 4, 64 -> 64 tokens, if time is left.
# Parts 1 and 2 take most of the call, mostly XLA compiling for each JAX engine in its warm-up;
# part 3 runs only if they leave time. Give the call the longest limit a device command may have.
# A Python with JAX and CUDA 13, no TensorFlow; Keras and ctranslate2 wheels carried in .whl/,
# and keras_transformer/zoo/tatoeba_en_fr.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_MEM_FRACTION=0.5
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# The carried ctranslate2 wheel is built for CUDA 12 and opens libcublas.so.12 by name; the image
# holds CUDA 13's cuBLAS. The handful of cuBLAS calls it makes (cublasGemmEx, cublasSgemm_v2,
# the strided-batched ones) exist in 13 with the same signatures, so 12's name points to 13's file.
lib=$(find / -xdev -name 'libcublas.so.13*' 2>/dev/null | head -1)
echo "cuBLAS: $lib"
mkdir -p /tmp/cu12 && ln -sf "$lib" /tmp/cu12/libcublas.so.12
export LD_LIBRARY_PATH=/tmp/cu12:$(dirname "$lib"):$LD_LIBRARY_PATH
python3 -c "import ctranslate2 as c; print('ctranslate2', c.__version__, 'cuda devices', c.get_cuda_device_count(), sorted(c.get_supported_compute_types('cuda')))"
python3 -c "import jax; print('jax', jax.__version__, jax.devices(), 'matmul precision', jax.config.jax_default_matmul_precision)"
start=$SECONDS
run() {  # name, then decode_throughput.py's arguments
    local name=$1; shift
    timeout 200 python3 benchmarks/decode_throughput.py --presets base --batch-sizes 128 --cache on --repeats 10 \
        --output $OUT/$name.json "$@" 2>&1 | grep -v "^WARNING\|^I0000\|^W0000" | tee $OUT/$name.log
}
ct2="--ctranslate2 float32 float16 bfloat16 int8_float16 --ct2-device cuda"
run decode_gpu_32 --source-length 32 --output-length 32 --methods beam greedy --dtypes float32 bfloat16 $ct2
echo "part 1: $((SECONDS - start)) s"
# BLEU needs sacrebleu; without it the outputs come back to be scored elsewhere.
python3 -c "import sacrebleu" 2>/dev/null && bleu= || bleu=--no-bleu
speed() {  # name, then translate_speed.py's arguments
    local name=$1; shift
    timeout 240 python3 benchmarks/translate_speed.py --device gpu --batch-size 128 --latency-sentences 50 \
        --keep-outputs $bleu --output $OUT/$name.json "$@" 2>&1 | grep -v "^WARNING\|^I0000\|^W0000" | tee $OUT/$name.log
}
speed translate_gpu --engines translator-jax-float32 translator-jax-bfloat16 ctranslate2-float32 ctranslate2-float16
echo "part 2a: $((SECONDS - start)) s"
speed translate_gpu_narrow --engines translator-jax-float32 --narrow-batches
echo "part 2b: $((SECONDS - start)) s"
[ $((SECONDS - start)) -lt 330 ] && run decode_gpu_64 --source-length 64 --output-length 64 --methods beam \
    --dtypes float32 bfloat16 --ctranslate2 float16 bfloat16 --ct2-device cuda
echo "done: $((SECONDS - start)) s"
