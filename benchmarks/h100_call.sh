#!/usr/bin/env bash
# One device call: our training throughput beside the peers of ../shared/bench on the lent GPU
# (Python 3.12 with JAX and PyTorch, no TensorFlow; Keras wheels carried in .whl/, the peers
# copied into .peers/), plus two ablations that split our step time: dropout off, and a
# 1,024-token vocabulary (what the 37k output projection and loss cost). Results land in $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
python3 benchmarks/attention_kernels.py 2>&1 | tail -2
export B=384 L=64 WARM=20 STEPS=60
ours="python3 benchmarks/train_throughput.py --models ours --dtype mixed_bfloat16 --source-length 64 --target-length 64 --peak-tflops 790 --windows 3"
timeout 100 $ours --presets base --batch-size 384 --steps 60 --warmup-steps 20 --output $OUT/ours_base.json > $OUT/ours_base.log 2>&1
timeout 80 $ours --presets base --batch-size 384 --steps 60 --warmup-steps 20 --dropout-rate 0 --output $OUT/ours_base_nodrop.json > $OUT/ours_base_nodrop.log 2>&1
timeout 80 $ours --presets base --batch-size 384 --steps 60 --warmup-steps 20 --vocab-size 1024 --output $OUT/ours_base_v1k.json > $OUT/ours_base_v1k.log 2>&1
timeout 120 python3 .peers/peer_train_throughput.py torch > $OUT/peer_torch.log 2>&1
timeout 80 python3 .peers/peer_train_throughput.py keras > $OUT/peer_keras.log 2>&1
timeout 80 python3 .peers/peer_tuned_keras.py 1 > $OUT/peer_tuned.log 2>&1
timeout 100 $ours --presets big --batch-size 384 --steps 30 --warmup-steps 10 --output $OUT/ours_big.json > $OUT/ours_big.log 2>&1
timeout 80 $ours --presets base --batch-size 800 --steps 10 --warmup-steps 3 --output $OUT/ours_base_50k.json > $OUT/ours_base_50k.log 2>&1
grep -h "tok/s\|^base\|^big\|peak \|tuned\|keras3\|torch nn" $OUT/*.log
