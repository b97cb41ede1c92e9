#!/usr/bin/env bash
# The test suite: everything on TensorFlow (the default backend), then the
# tests marked `backend` (their outcome depends on the Keras backend: layers,
# model, losses and schedule, decoding, training through Keras; see
# tests/conftest.py) again on JAX and on PyTorch. Data, export, serving, the
# CLI and the benchmark scripts run once, on TensorFlow. Each pass runs on two
# pytest-xdist workers, a test file at a time (--dist loadfile: a module's
# fixtures, such as a trained model, are made once), the files with a `slow`
# test first (tests/conftest.py). Skipped tests are listed with their reasons,
# and the 25 slowest tests of each pass are printed. Extra arguments go to
# pytest, e.g. `bash tests/run.sh -x` or `bash tests/run.sh -n 0` (one process).
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONWARNINGS=ignore::DeprecationWarning
OPTIONS=(-q -rs -p no:cacheprovider --durations=25 -n 2 --dist loadfile --no-loadscope-reorder)
echo "== KERAS_BACKEND=tensorflow"
KERAS_BACKEND=tensorflow python -m pytest tests "${OPTIONS[@]}" "$@"
echo "== KERAS_BACKEND=jax"
KERAS_BACKEND=jax python -m pytest tests -m backend "${OPTIONS[@]}" "$@"
echo "== KERAS_BACKEND=torch"
KERAS_BACKEND=torch python -m pytest tests -m backend "${OPTIONS[@]}" "$@"
