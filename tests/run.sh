#!/usr/bin/env bash
# The test suite: everything on TensorFlow (the default backend) but the
# tests marked `portable`, then the tests marked `backend` (their outcome
# depends on the Keras backend: layers, model, losses and schedule,
# decoding, training through Keras; see tests/conftest.py) again on JAX and
# on PyTorch, with the `portable` ones (the own rules of the search, the
# Translator, the training loop and the `train` command, whose outcome does
# not) once, on PyTorch, whose eager ops cost the least; and the model's
# own tests once more with the lowest Keras that setup.py allows. Data,
# export, serving, the rest of the CLI and the benchmark scripts run once,
# on TensorFlow.
# The TensorFlow and JAX passes run on two pytest-xdist workers, a test file
# at a time (--dist loadfile: a module's fixtures are made once), the
# heaviest files first (tests/conftest.py). Skipped tests are listed with
# their reasons, and the 25 slowest tests of each pass are printed.
# Python writes the bytecode of the modules it imports (the README's install,
# uv, compiles none of the installed files), once, for every later process,
# even where the environment says not to. XLA compiles without LLVM's
# optimisation passes (its expensive ones included) and with its older CPU
# emitters, which compile faster: the tests' models are tiny, so
# compiling, not running, is what XLA costs them (each JAX op a test runs
# eagerly is compiled once, and every jitted or XLA search). Extra
# arguments go to pytest, e.g. `bash tests/run.sh -x` or
# `bash tests/run.sh -n 0` (one process); a `-m EXPR` among them narrows
# each pass's own selection (pytest keeps only the last -m it is given).
set -euo pipefail
cd "$(dirname "$0")/.."
arguments=() only=""
while (($#)); do
  case $1 in
    -m) only=$2; shift 2 ;;
    *) arguments+=("$1"); shift ;;
  esac
done
set -- ${arguments[@]+"${arguments[@]}"}
# `marks EXPR`: a pass's selection, EXPR, within the one asked for.
marks() { if [ -n "$only" ]; then echo "($1) and ($only)"; else echo "$1"; fi; }
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONWARNINGS=ignore::DeprecationWarning
unset PYTHONDONTWRITEBYTECODE
export XLA_FLAGS="--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true --xla_cpu_use_fusion_emitters=false ${XLA_FLAGS:-}"
# --timeout (seconds): a test that hangs fails, with room left for the slowest.
OPTIONS=(-q -rs -p no:cacheprovider --durations=25 -n 2 --dist loadfile --no-loadscope-reorder --strict-markers
         --timeout=900)
# A folder for every pass: what several modules read (trained models,
# SavedModels, reference translations: tests/shared.py) is made there once,
# by whichever process asks first.
export KERAS_TRANSFORMER_TEST_SHARED=$(mktemp -d)
trap 'rm -rf "$KERAS_TRANSFORMER_TEST_SHARED"' EXIT
# The model's own tests with the lowest Keras that setup.py allows (the
# newest is the one installed), on TensorFlow: the model (whose tests build,
# train, save, load and quantize it with every layer inside), its losses and
# schedule, the presets (of the shipped ones, one: they are saved and load
# alike). One process with one intra-op thread
# (tests/conftest.py), beside the TensorFlow pass from its start, so that
# it never runs alone on one core at the end. Its output is printed last.
keras_lowest=$(grep -oE '"keras>=[0-9.]+' setup.py | cut -d= -f2)
lowest_log=$KERAS_TRANSFORMER_TEST_SHARED/lowest.log
(
  export KERAS_TRANSFORMER_TEST_THREADS=1
  echo "== keras==$keras_lowest, KERAS_BACKEND=tensorflow"
  pip install -q --no-deps --no-compile --target "$KERAS_TRANSFORMER_TEST_SHARED/keras-lowest" "keras==$keras_lowest" &&
    PYTHONPATH="$KERAS_TRANSFORMER_TEST_SHARED/keras-lowest" KERAS_TRANSFORMER_EXPECTED_KERAS=$keras_lowest \
    KERAS_BACKEND=tensorflow python -m pytest "${OPTIONS[@]}" -m "$(marks "not portable")" -n 0 \
      tests/test_keras_version.py::test_the_keras_under_test_is_within_the_declared_range tests/models/test_transformer.py tests/test_losses_metrics.py \
      tests/test_schedules.py tests/test_presets.py \
      --deselect "tests/test_presets.py::test_each_shipped_preset_translates[libreoffice_en_de]" \
      --deselect "tests/test_presets.py::test_each_shipped_preset_translates[tatoeba_fr_en]" "$@"
) >"$lowest_log" 2>&1 &
lowest_pass=$!
echo "== KERAS_BACKEND=tensorflow"
tf_status=0
KERAS_BACKEND=tensorflow python -m pytest tests -m "$(marks "not portable")" "${OPTIONS[@]}" "$@" || tf_status=$?
# Then the JAX pass on two workers, beside the PyTorch pass in one process
# with one intra-op thread (tests/conftest.py): its output is printed after
# the JAX pass's. They do not run beside the TensorFlow pass, whose two
# workers keep both cores busy.
torch_log=$KERAS_TRANSFORMER_TEST_SHARED/torch.log
(
  export KERAS_TRANSFORMER_TEST_THREADS=1
  echo "== KERAS_BACKEND=torch"
  KERAS_BACKEND=torch python -m pytest tests "${OPTIONS[@]}" -m "$(marks "backend or portable")" -n 0 "$@"
) >"$torch_log" 2>&1 &
torch_pass=$!
echo "== KERAS_BACKEND=jax"
jax_status=0
KERAS_BACKEND=jax python -m pytest tests -m "$(marks backend)" "${OPTIONS[@]}" "$@" || jax_status=$?
torch_status=0 lowest_status=0
wait "$torch_pass" || torch_status=$?
wait "$lowest_pass" || lowest_status=$?
cat "$torch_log" "$lowest_log"
for status in $tf_status $jax_status $torch_status $lowest_status; do
  [ "$status" -eq 0 ] || exit "$status"
done
