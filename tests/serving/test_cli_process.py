"""`keras-transformer translate` and `serve` as real processes: translate needs
no server package, serve without them stops with one line naming the extra,
and the command keeps TensorFlow's start-up lines off standard error unless
`--verbose`, while `import keras_transformer` changes nothing in the process
that importing Keras and TensorFlow does not."""

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


@pytest.fixture(scope="module")
def saved_model():
    """A SavedModel's model folder (the copying model's, tests/export/copying.py)."""
    from tests.export.copying import load_copying_export

    return os.path.dirname(load_copying_export()[2])


@pytest.fixture(scope="module")
def translated(without_server_packages, saved_model):
    """The pip script (or, without one, `main()` under `python -c`) translating
    two sentences with a SavedModel, the server packages unimportable,
    the start-up lines hidden by the command itself."""
    argv = ["translate", saved_model, "Hello there.", "Where is the station?"]
    if SCRIPT is None:
        return run_command(*argv)
    return run_process([SCRIPT, *argv], pythonpath=without_server_packages)


def test_translate_needs_no_server_package(translated):
    assert translated.returncode == 0, translated.stderr[-3000:]
    assert translated.stdout.splitlines()[0] == "Hello there."  # only the translations on standard output
    assert len(translated.stdout.splitlines()) == 2


def test_serve_without_server_packages_is_one_line_naming_the_extra(saved_model):
    served = run_command("serve", saved_model)
    assert served.returncode == 1 and "Traceback" not in served.stderr
    own = [line for line in served.stderr.splitlines() if not TENSORFLOW_START_UP.search(line)]
    assert own == [
        'keras-transformer serve needs the server packages (fastapi is missing): pip install "keras-transformer[serve]"'
    ]
    assert served.stdout == ""


def test_translate_writes_no_tensorflow_start_up_lines(translated, start_up_lines):
    # Another library's warning may appear; TensorFlow's start-up lines may not.
    assert translated.returncode == 0, translated.stderr[-3000:]
    assert not TENSORFLOW_START_UP.search(translated.stderr), translated.stderr[-3000:]
    if not start_up_lines:
        pytest.skip("TensorFlow writes no start-up lines on this machine")


def test_the_server_packages_are_unimportable_where_translate_ran(without_server_packages):
    # So that test_translate_needs_no_server_package means what it says.
    run = run_process([sys.executable, "-c", "import fastapi"], pythonpath=without_server_packages, timeout=60)
    assert run.returncode == 1 and "ModuleNotFoundError: No module named 'fastapi'" in run.stderr


def test_the_command_shows_tensorflow_start_up_lines_with_verbose(start_up_lines, without_server_packages):
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
