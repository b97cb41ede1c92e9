#!/usr/bin/env bash
# One device call: trains the EN-DE and FR-EN zoo models side by side on one GPU (JAX, no
# TensorFlow: the corpora are batched with NumPy), turns each run into a float16 preset, scores
# it on its held-out test split with beam 4, and packs everything into $OUT.
# Needs: .whl/ (keras, namex, optree) and .zoo/data/tatoeba_en_fr.tsv.gz (the full Tatoeba file)
# carried. MODELS="en_de" trains one of them; DECODE=1 adds a decoding benchmark. Each training
# stops at its step count or at its time limit, whichever comes first; the preset averages the
# newest 5 checkpoints that exist then.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.45}  # two trainings share the GPU
R=$(mktemp -d /tmp/zoo.XXXXXX)  # fresh: a warm machine keeps the last call's runs
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
kt="python3 -m keras_transformer.cli"
common="--architecture small --checkpoint-every 250 --keep-checkpoints 5 --fit-verbose 2"
case " ${MODELS:-fr_en en_de} " in *" fr_en "*)
( timeout ${TRAIN_SECONDS:-330} $kt train --corpus tatoeba_fr_en --corpus-file .zoo/data/tatoeba_en_fr.tsv.gz \
    --vocab-size 5000 --tokens-per-batch 16384 --tokens-per-step 16384 --train-steps 3000 --warmup-steps 1500 \
    $common --output-dir $R/fr_en > $R/fr_en.log 2>&1; echo "train exit $?" >> $R/fr_en.log ) & ;; esac
case " ${MODELS:-fr_en en_de} " in *" en_de "*)
# Pre-norm layers: the paper's post-norm ones leave `small` behind `tiny` on this corpus
# (keras_transformer/zoo/libreoffice_en_de/README.md).
( timeout ${TRAIN_SECONDS:-330} $kt train --corpus libreoffice_en_de --set dropout_rate=0.2 --set norm_first=True \
    --vocab-size 8000 --tokens-per-batch 8192 --tokens-per-step 8192 --train-steps 6000 --warmup-steps 1000 \
    $common --output-dir $R/en_de > $R/en_de.log 2>&1; echo "train exit $?" >> $R/en_de.log ) & ;; esac
wait
for pair in fr_en:tatoeba_fr_en en_de:libreoffice_en_de; do
  run=${pair%%:*} corpus=${pair#*:}
  [ -d $R/$run ] || continue
  ( $kt preset $R/$run --average 5 --weights-dtype float16 --output $R/preset_$run >> $R/$run.log 2>&1
    timeout ${EVALUATE_SECONDS:-150} python3 tools/score_preset.py $R/preset_$run $corpus >> $R/$run.log 2>&1 ) &
done
wait
if [ -n "$DECODE" ]; then  # issue 25's GPU figure: the base architecture, beam 4, batch 128, random weights
  timeout 100 python3 benchmarks/decode_throughput.py --presets base --methods beam --batch-sizes 128 --cache on \
    --repeats 3 --output $R/decode_gpu.json > $R/decode_gpu.log 2>&1
fi
cd $R && tar czf $OUT/logs.tgz gpu.txt *.log decode_gpu.json */run.json */checkpoints/*.json preset_*/test_* preset_*/metadata.json 2>/dev/null
for run in fr_en en_de; do
  [ -d preset_$run ] && tar cf - preset_$run | split -b 15m - $OUT/preset_$run.tar.part-
done
ls -la $OUT; grep -h "TEST\|exit\|Epoch .*/\|Wrote\|Error\|error" $R/*.log | tail -40
