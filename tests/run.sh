#!/usr/bin/env bash
# The test suite: everything on TensorFlow (the default backend), then the
# model core (layers, model, loss, schedule, decoding, plain Keras fit) again
# on JAX and on PyTorch. The rest (data, training recipe, export, serving, CLI,
# benchmarks) does not depend on the backend. Extra arguments go to pytest,
# e.g. `bash tests/run.sh -x -q`.
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONWARNINGS=ignore::DeprecationWarning
CORE="tests/layers tests/models tests/decoding tests/test_losses_metrics.py tests/test_schedules.py tests/training/test_plain_keras.py"
echo "== KERAS_BACKEND=tensorflow"
KERAS_BACKEND=tensorflow python -m pytest tests -q -p no:cacheprovider --durations=25 "$@"
echo "== KERAS_BACKEND=jax"
KERAS_BACKEND=jax python -m pytest $CORE -q -p no:cacheprovider --durations=25 "$@"
echo "== KERAS_BACKEND=torch"
KERAS_BACKEND=torch python -m pytest $CORE -q -p no:cacheprovider --durations=25 "$@"
