"""The Keras under test is one that setup.py allows; in tests/run.sh's
lowest-Keras pass, it is the lowest one. The PyTorch under test (the
PyTorch pass's) is the lowest release the `torch` extra allows."""

import ast
import os

import keras

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def setup_keyword(name):
    """The value of a keyword argument of setup.py's `setup(...)`, read with `ast`."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"setup.py has no {name}")


def keras_requirement():
    """setup.py's `install_requires` entry for Keras."""
    return next(item for item in setup_keyword("install_requires") if item.startswith("keras"))


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


def test_the_torch_under_test_is_the_lowest_the_torch_extra_allows():
    import torch

    [requirement] = [r for r in setup_keyword("extras_require")["torch"] if r.startswith("torch>=")]  # >=LOWEST,<BELOW
    lowest = requirement[len("torch>="):].split(",")[0]
    assert release(torch.__version__.split("+")[0])[:2] == release(lowest)[:2], (torch.__version__, requirement)
