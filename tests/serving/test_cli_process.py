"""`keras-transformer translate` and `serve` as real processes: translate needs
no server package, serve without them stops with one line naming the extra,
and TensorFlow's start-up lines stay off standard error unless `--verbose`."""

import os
import re
import subprocess
import sys

import keras
import pytest

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the command line runs in the TensorFlow pass"
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "saved_models", "tatoeba_en_fr")

# The command line in a process where fastapi and uvicorn cannot be imported.
WITHOUT_SERVER_PACKAGES = """
import sys
sys.modules["fastapi"] = sys.modules["uvicorn"] = None  # as if not installed
sys.argv[0] = "keras-transformer"
from keras_transformer.cli import main
sys.exit(main())
"""

# What TensorFlow writes to standard error as it starts (oneDNN, CUDA drivers, cuInit, CPU features).
TENSORFLOW_START_UP = re.compile(
    r"WARNING: All log messages before absl::InitializeLog|^[IWEF]\d{4} |cudart_stub|cuInit|cuda_|"
    r"cpu_feature_guard|oneDNN|To enable the following instructions",
    re.MULTILINE,
)


def run_command(*argv, code=WITHOUT_SERVER_PACKAGES, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the real default
    env["KERAS_BACKEND"] = "tensorflow"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def translated():
    return run_command("translate", MODEL, "I love you.", "Where is the station?")


def test_translate_needs_no_server_package(translated):
    assert translated.returncode == 0, translated.stderr[-3000:]
    first, second = translated.stdout.splitlines()  # only the translations on standard output
    assert first in ("Je t'aime.", "Je vous aime.") and "gare" in second


def test_serve_without_server_packages_is_one_line_naming_the_extra():
    served = run_command("serve", MODEL)
    assert served.returncode == 1 and "Traceback" not in served.stderr
    own = [line for line in served.stderr.splitlines() if not TENSORFLOW_START_UP.search(line)]
    assert own == [
        'keras-transformer serve needs the server packages (fastapi is missing): pip install "keras-transformer[serve]"'
    ]
    assert served.stdout == ""


def test_translate_writes_no_tensorflow_start_up_lines(translated):
    imports = run_command(code="import sys, keras_transformer.cli; print('tensorflow' in sys.modules)", timeout=120)
    if imports.stdout.strip() != "False":
        pytest.xfail("importing keras_transformer imports TensorFlow before the CLI can hide its start-up lines")
    assert translated.returncode == 0 and translated.stderr == "", translated.stderr[-3000:]


def test_quiet_tensorflow_hides_everything_tensorflow_writes_as_it_starts():
    # quiet.py loaded by path: keras_transformer's own imports play no part here.
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('quiet', {os.path.join(ROOT, 'keras_transformer', 'quiet.py')!r})\n"
        "quiet = importlib.util.module_from_spec(spec); spec.loader.exec_module(quiet)\n"
        "assert quiet.quiet_tensorflow()\n"
        "import tensorflow as tf\n"
        "print(float(tf.reduce_sum(tf.ones([2, 2]))), quiet.quiet_tensorflow())\n"
    )
    run = run_command(code=code, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (0, "4.0 False\n", "")
