#!/usr/bin/env bash
# The model's, the presets' and the export's tests with the lowest release
# of each dependency range in setup.py: a fresh virtual environment (first
# argument, default /tmp/keras-transformer-lowest) where pip installs the
# package with its test extras, every range held at its lower bound, then a
# subset of the suite on TensorFlow and on JAX. tests/run.sh covers the
# lowest Keras on every run; this covers TensorFlow, tensorflow-text,
# tensorflow-serving-api and JAX too, whose wheels are too large to fetch on
# every CI run. PyTorch keeps the release on this machine's disk: its index
# serves older releases only as CUDA builds.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-/tmp/keras-transformer-lowest}
constraints=$(mktemp)
python3 - "$constraints" <<'EOF'
import ast, re, sys
# The frameworks; the other test tools install at their newest.
LIBRARIES = {"keras", "tensorflow", "tensorflow-text", "tensorflow-serving-api", "tensorboard", "jax", "jaxlib"}
tree = ast.parse(open("setup.py", encoding="utf-8").read())
requirements = []
for node in ast.walk(tree):
    if isinstance(node, ast.keyword) and node.arg == "install_requires":
        requirements += [item.value for item in node.value.elts]
    if isinstance(node, ast.keyword) and node.arg == "extras_require":
        for key, value in zip(node.value.keys, node.value.values):
            if key.value == "test":
                requirements += [item.value for item in value.elts]
pins = {}
for requirement in requirements:
    match = re.match(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", requirement)
    if match and match.group(1) in LIBRARIES:
        pins[match.group(1)] = match.group(2)
open(sys.argv[1], "w").write("".join(f"{name}=={version}\n" for name, version in sorted(pins.items())))
EOF
cat "$constraints"
python3 -m venv "$venv"
. "$venv/bin/activate"
pip install -q --no-compile -c "$constraints" -e ".[test]"
export TF_CPP_MIN_LOG_LEVEL=2 KERAS_TRANSFORMER_TEST_SHARED=$(mktemp -d)
export KERAS_TRANSFORMER_EXPECTED_KERAS=$(grep -oE '"keras>=[0-9.]+' setup.py | cut -d= -f2)
OPTIONS=(-q -rs -p no:cacheprovider -n 2 --dist loadfile)
echo "== lowest releases, KERAS_BACKEND=tensorflow"
KERAS_BACKEND=tensorflow python -m pytest "${OPTIONS[@]}" tests/test_keras_version.py tests/layers \
  tests/models/test_transformer.py tests/test_presets.py tests/data/test_tokenizer.py tests/export/test_export.py \
  tests/serving/test_cli_presets.py
echo "== lowest releases, KERAS_BACKEND=jax"
KERAS_BACKEND=jax python -m pytest "${OPTIONS[@]}" -m backend tests/layers tests/models/test_transformer.py \
  tests/decoding/test_decoding.py
