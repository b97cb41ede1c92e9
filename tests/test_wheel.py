"""The wheel that `python -m build` makes holds the whole package: installed
alone in a fresh virtual environment, its `keras-transformer` command
translates with a shipped preset, without the server packages, and writes
only the translation."""

import os
import shutil
import subprocess
import sys
import sysconfig

import keras
import pytest

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="packaging is tested in the TensorFlow pass"),
    pytest.mark.slow,  # a build, a virtual environment and a process that imports TensorFlow
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])
    return done


def test_the_wheel_installs_in_a_fresh_environment_and_translates_with_a_preset(tmp_path):
    source, dist, venv = tmp_path / "source", tmp_path / "dist", tmp_path / "venv"
    # A copy without this checkout's build outputs, which setuptools would reuse.
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "runs", "saved_models"))
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(source)], cwd=source)
    (wheel,) = dist.glob("keras_transformer-*.whl")
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)])
    # The dependencies (TensorFlow, Keras, ...) from this environment: its
    # folders on the new one's path, but not its .pth files, so not the
    # editable install of this checkout.
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    folders = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    with open(os.path.join(site, "dependencies.pth"), "w", encoding="utf-8") as f:
        f.write("\n".join(folders) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")}
    # First on its path, a folder where fastapi and uvicorn fail to import, as when they are not installed.
    blocked = tmp_path / "no-server-packages"
    for name in ("fastapi", "uvicorn"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError({'No module named ' + repr(name)!r}, name={name!r})\n")
    env["PYTHONPATH"] = str(blocked)
    for name in ("fastapi", "uvicorn"):
        missing = subprocess.run([str(python), "-c", f"import {name}"], capture_output=True, text=True, env=env)
        assert missing.returncode == 1 and f"No module named '{name}'" in missing.stderr, missing.stderr

    # Where the imports resolve, found without running them (importing the package imports TensorFlow).
    where = run([str(python), "-c", "import importlib.util as u; "
                 "print(*(u.find_spec(m).origin for m in ('keras_transformer', 'keras_transformer_command')))"],
                cwd=tmp_path, env=env).stdout.split()
    assert all(path.startswith(site) for path in where), (where, site)
    translated = run([str(venv / "bin" / "keras-transformer"), "translate", "tatoeba_en_fr", "Where is the station?"],
                     cwd=tmp_path, env=env)
    assert translated.stdout == "Où se trouve la gare ?\n"
    # TensorFlow's start-up lines hidden: the one check of it in a process
    # (that --verbose leaves them: tests/serving/test_cli_process.py).
    assert translated.stderr == "", translated.stderr[-3000:]
