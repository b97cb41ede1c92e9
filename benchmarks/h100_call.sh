#!/usr/bin/env bash
# One device call: our training throughput beside peer scripts kept outside this repository, on one GPU
# (a Python with JAX and PyTorch, no TensorFlow; Keras wheels carried in .whl/, the peers
# copied into .peers/), then big, a 51k-token batch and a kernel profile of our base step.
# Everything lands in one archive, $OUT/h100.tgz (the device returns few files).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1
R=/tmp/h100 && mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
export B=384 L=64 WARM=15 STEPS=50
ours="python3 benchmarks/train_throughput.py --models ours --dtype mixed_bfloat16 --source-length 64 --target-length 64 --peak-tflops 790 --windows 3 --timing fit --host-memory release"  # timed, and allocating, as the peer scripts do
timeout 90 $ours --presets base --batch-size 384 --steps 50 --warmup-steps 15 --output $R/ours_base.json > $R/ours_base.log 2>&1
timeout 90 python3 .peers/peer_tuned_keras.py 1 > $R/peer_tuned.log 2>&1
timeout 90 python3 .peers/peer_train_throughput.py keras > $R/peer_keras.log 2>&1
timeout 150 python3 .peers/peer_train_throughput.py torch > $R/peer_torch.log 2>&1
timeout 90 $ours --presets big --batch-size 384 --steps 30 --warmup-steps 10 --output $R/ours_big.json > $R/ours_big.log 2>&1
timeout 80 $ours --presets base --batch-size 800 --steps 10 --warmup-steps 3 --output $R/ours_base_51k.json > $R/ours_base_51k.log 2>&1
timeout 90 python3 benchmarks/profile_train_step.py --preset base --trace-dir /tmp/trace --top 40 --output $R/profile_base.json > $R/profile_base.log 2>&1
tar czf $OUT/h100.tgz -C /tmp h100
grep -h "tok/s\|^base\|^big\|tuned\|keras3\|torch\|kernels\|^  [a-z]" $R/*.log
