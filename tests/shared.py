"""What several test modules read, made once per test run: trained models,
SavedModel exports, reference translations.

Each is a folder in $KERAS_TRANSFORMER_TEST_SHARED, which tests/run.sh
makes for its three passes and tests/conftest.py for a pytest run without
it (a folder it names that does not exist yet is made here, at first use).
The first test process to ask for one (any pytest-xdist worker, any pass)
makes it under a file lock, in a partial folder that it then renames; the
others wait on the lock and read it. It is always made the same way,
on TensorFlow: in a TensorFlow process itself, from the JAX and PyTorch
passes by `python -m tests.shared NAME FOLDER` with KERAS_BACKEND=tensorflow.
So a pass run alone reads what it would read after the others, and no pass
depends on an earlier one having run.

    from tests import shared
    folder = shared.path("permuting")  # made now if no process made it before
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys

FOLDER = "KERAS_TRANSFORMER_TEST_SHARED"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPES = {}  # name -> function(folder) that writes it


def recipe(function):
    RECIPES[function.__name__] = function
    return function


def path(name):
    """The folder of `name` (one of `RECIPES`), made now unless it was before."""
    os.makedirs(os.environ[FOLDER], exist_ok=True)
    folder = os.path.join(os.environ[FOLDER], name)
    with open(folder + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not os.path.isdir(folder):
            partial = folder + ".partial"
            shutil.rmtree(partial, ignore_errors=True)
            os.makedirs(partial)
            _make(name, partial)
            os.replace(partial, folder)
    return folder


def _make(name, folder):
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        from tests.helpers import graph_rewrites

        # With TensorFlow's graph rewrites, as in `python -m tests.shared`:
        # the pytest processes leave them out (tests/conftest.py), and a
        # model trained without them learns along another path of rounding.
        options = graph_rewrites(True)
        try:
            RECIPES[name](folder)
        finally:
            tf.config.optimizer.set_experimental_options(options)
        return
    env = dict(os.environ, KERAS_BACKEND="tensorflow", PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-m", "tests.shared", name, folder], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"making {name} on TensorFlow failed:\n{run.stderr[-3000:]}"


# The recipes -----------------------------------------------------------------


@recipe
def permuting(folder):
    """tests/decoding/permuting.py's model and tokenizer: `model.keras`, `tokenizer.model`."""
    from tests.decoding.permuting import train_permuting_model

    model, tokenizer = train_permuting_model()
    tokenizer.save(folder)
    model.save(os.path.join(folder, "model.keras"))


@recipe
def learned_reversal(folder):
    """tests/models/test_learning.py's model: `model.keras`."""
    from tests.models.test_learning import train_reversal_model

    train_reversal_model().save(os.path.join(folder, "model.keras"))


@recipe
def copying_export(folder):
    """tests/export/test_export.py's copying model, `model.keras` and
    `tokenizer.model`, and its SavedModel, `saved/10`, beside an empty `saved/9`."""
    from keras_transformer.export import export
    from tests.export.copying import EXPORT_OPTIONS, train_copying_model

    model, tokenizer_proto = train_copying_model()
    model.save(os.path.join(folder, "model.keras"))
    with open(os.path.join(folder, "tokenizer.model"), "wb") as f:
        f.write(tokenizer_proto)
    os.makedirs(os.path.join(folder, "saved", "9"))  # an older version: the export is the next one, 10
    export(model, tokenizer_proto, os.path.join(folder, "saved"), **EXPORT_OPTIONS)


@recipe
def permuting_export(folder):
    """The permuting model's SavedModel with every signature and its 3 best
    (outputs of their source's length + 16 tokens), `1`."""
    _export_permuting(folder)


@recipe
def permuting_xla_export(folder):
    """The same, compiled by XLA, with narrowing batches, `1`: each decoding
    loop once (no `details`, whose search is serving_default's), in the one
    bucket that tests/export/test_xla_export.py's inputs fill (each bucket
    is another graph of each loop to trace)."""
    _export_permuting(folder, jit_compile=True, narrow_batches=True, signatures=("sample", "score", "steer"),
                      buckets=(16,))


def _export_permuting(folder, jit_compile=False, narrow_batches=False, signatures=None, buckets=None):
    import keras

    from keras_transformer import SubwordTokenizer, Translator
    from keras_transformer.export.saved_model import SIGNATURES, write_saved_model
    from tests.decoding.permuting import EXPORT_MAX_EXTRA_LENGTH, N_BEST

    model_folder = path("permuting")
    model = keras.saving.load_model(os.path.join(model_folder, "model.keras"))
    translator = Translator(model, SubwordTokenizer.load(model_folder), max_extra_length=EXPORT_MAX_EXTRA_LENGTH,
                            narrow_batches=narrow_batches, **({"buckets": buckets} if buckets else {}))
    write_saved_model(translator, folder, n_best=N_BEST, jit_compile=jit_compile,
                      parallel_loops=None if jit_compile else 1, warmup_batch_sizes=(),
                      signatures=SIGNATURES if signatures is None else signatures)


@recipe
def one_pipeline_translations(folder):
    """tests/pipeline/test_one_pipeline.py's texts and their translations
    by the preset on TensorFlow: `translations.json`, `{"texts", "translations"}`."""
    from keras_transformer import Translator
    from tests.pipeline.test_one_pipeline import BUCKETS, PRESET, texts

    inputs, _ = texts()
    translations = Translator.from_preset(PRESET, buckets=BUCKETS).translate(inputs)
    with open(os.path.join(folder, "translations.json"), "w", encoding="utf-8") as f:
        json.dump({"texts": inputs, "translations": translations}, f)


@recipe
def marian(folder):
    """tests/marian's models and `transformers`' answers
    (`tests/marian/reference.py`, in a PyTorch process of its own), and
    `preset/`, the folder that `keras-transformer import hf/` writes."""
    from keras_transformer.translation.marian.preset import import_preset

    env = dict(os.environ, KERAS_BACKEND="torch", PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-m", "tests.marian.reference", folder], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"tests/marian/reference.py failed:\n{run.stderr[-3000:]}"
    import_preset(os.path.join(folder, "hf"), os.path.join(folder, "preset"))


if __name__ == "__main__":  # python -m tests.shared NAME FOLDER: a recipe in a TensorFlow process
    sys.path.insert(0, ROOT)
    RECIPES[sys.argv[1]](sys.argv[2])
