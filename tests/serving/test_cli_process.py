"""`keras-transformer translate` as a real process: it needs no server
package, and it shows TensorFlow's start-up lines on standard error with
`--verbose` (the command hides them otherwise: the installed wheel's
command writes nothing there, tests/test_wheel.py), while `import
keras_transformer` changes nothing in the process that importing Keras and
TensorFlow does not. `serve` without the server packages stopping with one
line naming the extra is tests/serving/test_cli.py's, in this process: a
`SystemExit` with a message, which Python prints alone and exits 1 on."""

import json
import os
import re
import shutil
import subprocess
import sys

import keras
import pytest

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the command line runs in the TensorFlow pass"),
    pytest.mark.slow,  # processes that import TensorFlow
]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = shutil.which("keras-transformer", path=os.path.dirname(sys.executable))  # pip install -e . puts it there

# The command line in a process where fastapi and uvicorn cannot be imported.
WITHOUT_SERVER_PACKAGES = """
import sys
sys.modules["fastapi"] = sys.modules["uvicorn"] = None  # as if not installed
sys.argv[0] = "keras-transformer"
from keras_transformer_command import main
sys.exit(main())
"""

# What TensorFlow writes to standard error as it starts (oneDNN, CUDA drivers, cuInit, CPU features).
TENSORFLOW_START_UP = re.compile(
    r"WARNING: All log messages before absl::InitializeLog|^[IWEF]\d{4} |cudart_stub|cuInit|cuda_|"
    r"cpu_feature_guard|oneDNN|To enable the following instructions",
    re.MULTILINE,
)


def run_process(command, timeout=300, pythonpath=None):
    # The real default: TensorFlow's log level not set.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["KERAS_BACKEND"] = "tensorflow"
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


def run_command(*argv, code=WITHOUT_SERVER_PACKAGES, timeout=300):
    return run_process([sys.executable, "-c", code, *argv], timeout=timeout)


@pytest.fixture(scope="module")
def without_server_packages(tmp_path_factory):
    """A folder to put first on PYTHONPATH: there `fastapi` and `uvicorn`
    fail to import, as when they are not installed."""
    folder = tmp_path_factory.mktemp("no-server-packages")
    for name in ("fastapi", "uvicorn"):
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError({'No module named ' + repr(name)!r}, name={name!r})\n")
    return str(folder)


# What a process looks like to the import machinery and TensorFlow: printed
# after importing either Keras and TensorFlow alone or keras_transformer.
PROCESS_STATE = """
import builtins, json, os, sys
original_import = builtins.__import__
environ = dict(os.environ)
{imports}
import tensorflow as tf
threading = tf.config.threading
print(json.dumps({{
    "meta_path": [type(finder).__qualname__ for finder in sys.meta_path],
    "path_hooks": [getattr(hook, "__qualname__", type(hook).__qualname__) for hook in sys.path_hooks],
    "import": builtins.__import__ is original_import,
    "environ": sorted(set(os.environ.items()) ^ set(environ.items())),
    "optimizer": tf.config.optimizer.get_experimental_options(),
    "threads": [threading.get_intra_op_parallelism_threads(), threading.get_inter_op_parallelism_threads()],
    "registered": keras.saving.get_registered_object("keras_transformer>Transformer") is not None,
}}))
tf.ones([1])  # TensorFlow's first op: its last start-up lines
"""


def process_state(imports):
    run = run_command(code=PROCESS_STATE.format(imports=imports), timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1]), run.stderr


@pytest.fixture(scope="module")
def plain_import():
    """`(state, stderr)` of a process that imports the library, and of one that imports Keras and TensorFlow alone."""
    return process_state("import keras_transformer, keras"), process_state("import keras")


@pytest.fixture(scope="module")
def start_up_lines(plain_import):
    """What TensorFlow writes to standard error as it starts on this machine (nobody hid it)."""
    (_, stderr), _ = plain_import
    return [line for line in stderr.splitlines() if TENSORFLOW_START_UP.search(line)]


def test_the_server_packages_are_unimportable_where_translate_ran(without_server_packages):
    # So that the translate test below means what it says.
    run = run_process([sys.executable, "-c", "import fastapi"], pythonpath=without_server_packages, timeout=60)
    assert run.returncode == 1 and "ModuleNotFoundError: No module named 'fastapi'" in run.stderr


def test_translate_needs_no_server_package_and_shows_tensorflow_start_up_lines_with_verbose(
        start_up_lines, without_server_packages):
    # The pip script (or, without one, `main()` under `python -c`), the
    # server packages unimportable: only the translation on standard output.
    argv = ["translate", "tatoeba_en_fr", "I love you.", "--verbose"]
    run = run_command(*argv) if SCRIPT is None else run_process([SCRIPT, *argv], pythonpath=without_server_packages)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout in ("Je t'aime.\n", "Je vous aime.\n")
    if not start_up_lines:
        pytest.skip("TensorFlow writes no start-up lines on this machine")
    assert TENSORFLOW_START_UP.search(run.stderr), run.stderr[-3000:]


def test_importing_the_library_registers_its_classes_and_changes_nothing_else(plain_import):
    # The same import machinery, environment and TensorFlow settings as a
    # process that imports only Keras and TensorFlow (which change some
    # themselves), and standard error never muted: TensorFlow's start-up
    # lines reach it as they do there.
    (library, library_stderr), (keras_alone, keras_stderr) = plain_import
    assert library.pop("registered") and not keras_alone.pop("registered")
    assert library == keras_alone
    assert library["import"] and library["optimizer"].get("disable_meta_optimizer") is False
    started = [bool(TENSORFLOW_START_UP.search(stderr)) for stderr in (library_stderr, keras_stderr)]
    assert started[0] == started[1], library_stderr[-3000:]
