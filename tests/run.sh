#!/usr/bin/env bash
# The test suite on every backend: everything on TensorFlow (the default),
# and the backend-independent model core again on JAX and on PyTorch. Extra arguments go to
# pytest, e.g. `bash tests/run.sh -x -q`.
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONWARNINGS=ignore::DeprecationWarning
echo "== KERAS_BACKEND=tensorflow"
KERAS_BACKEND=tensorflow python -m pytest tests -q -p no:cacheprovider "$@"
echo "== KERAS_BACKEND=jax"
KERAS_BACKEND=jax python -m pytest tests -q -p no:cacheprovider --ignore=tests/data "$@"
echo "== KERAS_BACKEND=torch"
KERAS_BACKEND=torch python -m pytest tests -q -p no:cacheprovider --ignore=tests/data "$@"
