#!/usr/bin/env bash
# The test suite on both CI backends: everything on TensorFlow (the default),
# and the backend-independent model core again on JAX. Extra arguments go to
# pytest, e.g. `bash tests/run.sh -x -q`.
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONWARNINGS=ignore::DeprecationWarning
echo "== KERAS_BACKEND=tensorflow"
KERAS_BACKEND=tensorflow python -m pytest tests -q -p no:cacheprovider "$@"
echo "== KERAS_BACKEND=jax"
KERAS_BACKEND=jax python -m pytest tests -q -p no:cacheprovider --ignore=tests/data "$@"
