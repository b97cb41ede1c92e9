"""`keras-transformer translate` and `serve` as real processes: translate needs
no server package, serve without them stops with one line naming the extra,
and TensorFlow's start-up lines stay off standard error unless `--verbose`,
in the pip script, `python -m keras_transformer.cli` and examples/wmt14.py,
while a plain `import keras_transformer` changes nothing."""

import os
import re
import shutil
import subprocess
import sys

import keras
import pytest

from keras_transformer import quiet
from keras_transformer.quiet import ENVIRONMENT_VARIABLE, is_command_line, quiet_tensorflow_if_asked

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the command line runs in the TensorFlow pass"),
    pytest.mark.slow,  # processes that import TensorFlow
]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "wmt14.py")
SCRIPT = shutil.which("keras-transformer", path=os.path.dirname(sys.executable))  # pip install -e . puts it there

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


def run_process(command, timeout=300, pythonpath=None):
    # The real defaults: neither TensorFlow's log level nor KERAS_TRANSFORMER_QUIET set.
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", ENVIRONMENT_VARIABLE)}
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


@pytest.fixture(scope="module")
def plain_import():
    """A process that imports the library (and runs a TensorFlow op) without asking for quiet."""
    code = (
        "import sys, keras_transformer, keras, tensorflow as tf\n"
        "tf.ones([1])\n"
        "print(keras.saving.get_registered_object('keras_transformer>Transformer') is keras_transformer.Transformer,"
        " 'tensorflow' in sys.modules, os.environ.get('TF_CPP_MIN_LOG_LEVEL'),"
        " any(type(f).__name__ == '_MutedImport' for f in sys.meta_path))\n"
    )
    return run_command(code="import os\n" + code, timeout=120)


@pytest.fixture(scope="module")
def start_up_lines(plain_import):
    """What TensorFlow writes to standard error as it starts on this machine (nobody hid it)."""
    assert plain_import.returncode == 0, plain_import.stderr[-3000:]
    return [line for line in plain_import.stderr.splitlines() if TENSORFLOW_START_UP.search(line)]


@pytest.fixture(scope="module")
def translated(without_server_packages, tiny_saved_model):
    """The pip script (or, without one, `main()` under `python -c`) translating
    two sentences with a SavedModel, the server packages unimportable,
    nothing made quiet."""
    argv = ["translate", tiny_saved_model, "I love you.", "Where is the station?"]
    if SCRIPT is None:
        return run_command(*argv)
    return run_process([SCRIPT, *argv], pythonpath=without_server_packages)


def test_translate_needs_no_server_package(translated):
    assert translated.returncode == 0, translated.stderr[-3000:]
    assert len(translated.stdout.splitlines()) == 2  # only the translations on standard output (an untrained model's)


def test_serve_without_server_packages_is_one_line_naming_the_extra(tiny_saved_model):
    served = run_command("serve", tiny_saved_model)
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


# The pip script runs in `translated` (test_translate_writes_no_tensorflow_start_up_lines);
# `python -m keras_transformer.cli` without --verbose decides as the script does
# (test_who_asks_for_quiet); as a process it runs once, with --verbose.
def test_python_m_shows_tensorflow_start_up_lines_with_verbose(start_up_lines):
    command = [sys.executable, "-m", "keras_transformer.cli", "translate", "tatoeba_en_fr", "I love you.", "--verbose"]
    run = run_process(command)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout in ("Je t'aime.\n", "Je vous aime.\n")
    if not start_up_lines:
        pytest.skip("TensorFlow writes no start-up lines on this machine")
    assert TENSORFLOW_START_UP.search(run.stderr), run.stderr[-3000:]


@pytest.mark.parametrize("verbose", [False, True])
def test_example_hides_tensorflow_start_up_lines_unless_verbose(verbose, start_up_lines, tmp_path):
    # --vocab-size 1 stops the run at the tokenizer's argument check, after
    # the example has imported TensorFlow and loaded the shipped corpus.
    command = [sys.executable, EXAMPLE, "--vocab-size", "1", "--output-dir", str(tmp_path)]
    run = run_process(command + (["--verbose"] if verbose else []), timeout=120)
    assert run.returncode == 1 and run.stdout.startswith("[data] tatoeba_en_fr:"), run.stderr[-3000:]
    assert run.stderr.splitlines()[-1].startswith("ValueError: Argument `vocab_size`")
    if not verbose:
        assert not TENSORFLOW_START_UP.search(run.stderr), run.stderr[-3000:]
    elif not start_up_lines:
        pytest.skip("TensorFlow writes no start-up lines on this machine")
    else:
        assert TENSORFLOW_START_UP.search(run.stderr), run.stderr[-3000:]


def test_importing_the_library_registers_its_classes_and_leaves_tensorflow_as_it_is(plain_import):
    # Registered; and nothing hidden, since nobody asked: TensorFlow's log level
    # not quiet's (TensorFlow itself may set its default) and standard error
    # never muted while it was imported.
    assert plain_import.returncode == 0, plain_import.stderr[-3000:]
    registered, imported, log_level, muted = plain_import.stdout.split()
    assert (registered, imported, muted) == ("True", "True", "False") and log_level != quiet.LOG_LEVEL


def test_who_asks_for_quiet(monkeypatch):
    assert is_command_line(["/venv/bin/keras-transformer", "translate"])
    assert is_command_line(["/venv/Scripts/keras-transformer.exe"])
    # python -m: sys.argv[0] is "-m" while Python imports the packages above the module.
    assert is_command_line(["-m", "translate"], ["python", "-X", "utf8", "-m", "keras_transformer.cli", "translate"])
    assert is_command_line(["-m"], ["python", "-mkeras_transformer.cli"])
    assert not is_command_line(["-m", "x"], ["python", "-m", "pytest", "keras_transformer.cli"])
    assert not is_command_line(["train.py"]) and not is_command_line([])
    # TensorFlow is imported here already: quiet_tensorflow() would change nothing, and says so.
    assert not quiet_tensorflow_if_asked(["keras-transformer", "translate"], environ={})
    monkeypatch.setattr(quiet, "quiet_tensorflow", lambda: True)  # as before TensorFlow's import
    cases = [
        (["keras-transformer", "translate", "m"], {}),  # the command line: quiet
        (["keras-transformer", "--verbose", "translate", "m"], {}),  # unless --verbose
        (["keras-transformer", "translate", "m", "--verbose"], {ENVIRONMENT_VARIABLE: "1"}),  # --verbose wins
        (["train.py"], {}),  # another program: only if asked
        (["train.py"], {ENVIRONMENT_VARIABLE: "1"}),
        (["train.py"], {ENVIRONMENT_VARIABLE: "0"}),
    ]
    assert [quiet_tensorflow_if_asked(argv, environ=env) for argv, env in cases] == [
        True, False, False, False, True, False]
