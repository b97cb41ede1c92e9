"""`import keras_transformer` as a real process: it changes nothing that
importing Keras and TensorFlow does not, and TensorFlow writes its
start-up lines there; the `keras-transformer` command hides them unless
given `--verbose`. That the installed wheel's command translates without
the server packages and writes nothing to standard error is
tests/test_wheel.py's. `serve` without the server packages stopping with
one line naming the extra is tests/serving/test_cli.py's, in this process:
a `SystemExit` with a message, which Python prints alone and exits 1 on."""

import json
import os
import re
import subprocess
import sys

import keras
import pytest

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the command line runs in the TensorFlow pass"),
    pytest.mark.slow,  # processes that import TensorFlow
]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What TensorFlow writes to standard error as it starts (oneDNN, CUDA drivers, cuInit, CPU features).
TENSORFLOW_START_UP = re.compile(
    r"WARNING: All log messages before absl::InitializeLog|^[IWEF]\d{4} |cudart_stub|cuInit|cuda_|"
    r"cpu_feature_guard|oneDNN|To enable the following instructions",
    re.MULTILINE,
)


def run_code(code, timeout=120):
    """`python -c code` with the real default: TensorFlow's log level not set."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["KERAS_BACKEND"] = "tensorflow"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=timeout)


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
    run = run_code(PROCESS_STATE.format(imports=imports))
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1]), run.stderr


@pytest.fixture(scope="module")
def plain_import():
    """`(state, stderr)` of a process that imports the library, and of one that imports Keras and TensorFlow alone."""
    return process_state("import keras_transformer, keras"), process_state("import keras")


def test_the_command_hides_tensorflows_start_up_lines_unless_verbose(monkeypatch, capfd):
    """`keras-transformer` imports TensorFlow with standard error muted (the
    lines that the processes below show, written to file descriptor 2 by
    C++ code), before the command runs; with `--verbose`, before or after
    the command, it does not."""
    import keras_transformer_command as command

    with command.stderr_muted():
        os.write(2, b"written by C++\n")
    sys.stderr.write("after\n")
    assert capfd.readouterr().err == "after\n"
    imported = []
    monkeypatch.setattr(command, "import_tensorflow_quietly", lambda: imported.append(True))
    monkeypatch.setattr("keras_transformer.cli.main", lambda: len(imported))
    for argv, quiet in ((["translate", "m", "Hi."], True), (["--verbose", "translate", "m", "Hi."], False),
                        (["translate", "m", "Hi.", "--verbose"], False)):
        imported.clear()
        monkeypatch.setattr(sys, "argv", ["keras-transformer", *argv])
        assert command.main() == int(quiet), argv


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
