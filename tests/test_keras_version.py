"""The Keras under test is one that setup.py allows; in tests/run.sh's
lowest-Keras pass, it is the lowest one."""

import ast
import os

import keras

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def keras_requirement():
    """setup.py's `install_requires` entry for Keras, read with `ast`."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            return next(item.value for item in node.value.elts if item.value.startswith("keras"))
    raise AssertionError("setup.py has no install_requires")


def release(text):
    return tuple(int(part) for part in text.split(".")[:3])


def test_the_keras_under_test_is_within_the_declared_range():
    requirement = keras_requirement()  # as keras>=LOWEST,<BELOW
    lowest, below = (bound.split("=")[-1].lstrip("<") for bound in requirement[len("keras"):].split(","))
    version = release(keras.__version__)
    assert release(lowest) <= version < release(below), (keras.__version__, requirement)
    expected = os.environ.get("KERAS_TRANSFORMER_EXPECTED_KERAS")
    if expected:  # the lowest-Keras pass: that release, not the one installed
        assert version == release(expected) + (0,) * (3 - len(release(expected))), (keras.__version__, expected)
