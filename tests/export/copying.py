"""A tiny model that learned to copy 8 sentences, its exported SavedModel
(tests/shared.py's `copying_export`), and what the export tests compare it
with: beam search in memory, and a fresh process with only TensorFlow."""

import io
import json
import os
import subprocess
import sys

import keras
import numpy as np

SENTENCES = [
    "Hello there.", "How are you?", "I am fine, thank you.", "Where is the station?",
    "It costs 12 euros.", "Good morning to all!", "See you tomorrow.", "The cat sleeps.",
]
# Two buckets: 8, and the source budget (32); two decoding loops, as by
# default; its 2 best; a warm-up request per bucket, as by default.
EXPORT_OPTIONS = dict(n_best=2, buckets=(8,))


def train_copying_model():
    """`(model, tokenizer proto)`: a SentencePiece vocabulary of the
    sentences, and a few steps of learning to copy them, so that the best
    beams are far apart."""
    import sentencepiece as spm

    from keras_transformer import LabelSmoothedCrossEntropy, Transformer, paper_optimizer

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES * 10), model_writer=buffer, vocab_size=90,
        model_type="bpe", pad_id=0, unk_id=1, bos_id=2, eos_id=3, character_coverage=1.0, minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=buffer.getvalue())
    ids = [sp.encode(s) for s in SENTENCES]
    length = max(map(len, ids)) + 2
    source = np.array([x + [3] + [0] * (length - len(x) - 1) for x in ids], "int32")
    target = np.array([[2] + x + [3] + [0] * (length - len(x) - 1) for x in ids], "int32")
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=90, num_layers=1, d_model=32, num_heads=2, d_ff=64, max_length=64, dropout_rate=0.0)
    model.compile(paper_optimizer(32, warmup_steps=20), LabelSmoothedCrossEntropy())
    model.fit((source, target[:, :-1]), target[:, 1:], epochs=60, batch_size=8, verbose=0)
    return model, buffer.getvalue()


def load_copying_export():
    """`(model, SentencePiece processor, version folder)` of the shared export."""
    import sentencepiece as spm

    import keras_transformer  # noqa: F401 - registers its Keras classes, which the .keras file names
    from tests import shared

    folder = shared.path("copying_export")
    model = keras.saving.load_model(os.path.join(folder, "model.keras"))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "tokenizer.model"))
    return model, sp, os.path.join(folder, "saved", "10")


def in_memory_translations(model, sp, sentences, beam_size=4, alpha=0.6, max_extra_length=50, stop="exact",
                           num_return=1):
    """The same decoding with the Python tokenizer and eager beam search:
    `(texts, scores)`; with `num_return` > 1, each sentence's `num_return`
    best, `(lists of texts, scores of shape (sentences, num_return))`."""
    from keras_transformer.decoding import beam_search

    ids = [sp.encode(s) + [3] for s in sentences]
    width = max(map(len, ids))
    source = np.array([x + [0] * (width - len(x)) for x in ids], "int32")
    tokens, scores = beam_search(model, source, beam_size=beam_size, alpha=alpha, max_extra_length=max_extra_length,
                                 stop=stop, num_return=num_return)
    tokens = keras.ops.convert_to_numpy(tokens)
    text = lambda row: sp.decode(  # noqa: E731
        [int(t) for t in row[: list(row).index(3)] if t] if 3 in row else [int(t) for t in row if t])
    texts = [text(row) for row in tokens] if num_return == 1 else [[text(row) for row in rows] for rows in tokens]
    return texts, keras.ops.convert_to_numpy(scores)


# Runs in a fresh interpreter without this package or Keras: `-I` (isolated:
# PYTHONPATH ignored, no current directory on sys.path), from an empty
# directory, with `keras` and `keras_transformer` set to None in sys.modules:
# every import of them fails and `importlib.util.find_spec` reports them
# missing, as when they are not installed (the editable install's finder
# would otherwise still find this package). `import tensorflow_text` imports
# tf.keras (for its Keras layers), so the tensorflow-text kernels, all that
# the SavedModel needs, are loaded from their libraries instead. It prints
# serving_default's outputs for each batch of strings it is given, with
# TensorFlow's graph rewrites or without them.
RELOAD = r"""
import sys
BLOCKED = ("keras", "keras_transformer")
for name in BLOCKED:
    sys.modules[name] = None
import glob, importlib.util, json, os
import tensorflow as tf
for name in BLOCKED:
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise AssertionError(f"{name} is importable")
assert not [p for p in sys.path if os.path.exists(os.path.join(p or ".", "keras_transformer"))], sys.path
ops = os.path.join(importlib.util.find_spec("tensorflow_text").submodule_search_locations[0], "python", "ops")
for library in sorted(glob.glob(os.path.join(ops, "_*.so"))):
    tf.load_op_library(library)
if sys.argv[3] == "without rewrites":
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
translate = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
outputs = [translate(inputs=tf.constant(batch, dtype=tf.string)) for batch in json.loads(sys.argv[2])]
loaded_modules = [m for m in sys.modules if m.partition(".")[0] in BLOCKED and sys.modules[m] is not None]
assert not loaded_modules and "tensorflow_text" not in sys.modules, loaded_modules
print(json.dumps([{k: v.numpy().tolist() for k, v in out.items()} for out in outputs],
                 default=lambda b: b.decode("utf-8")))
"""


def serve_in_a_fresh_process(path, texts, tmp_path):
    """The outputs of `path`'s serving_default for `texts`, in a process with
    only tensorflow and tensorflow-text's ops (`RELOAD`)."""
    return serve_batches_in_a_fresh_process(path, [texts], tmp_path)[0]


def serve_batches_in_a_fresh_process(path, batches, tmp_path, graph_rewrites=True):
    """The outputs of `path`'s serving_default for each list of strings in
    `batches`, in one such process, with TensorFlow's graph rewrites unless
    `graph_rewrites` is False."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    rewrites = "with rewrites" if graph_rewrites else "without rewrites"
    run = subprocess.run([sys.executable, "-I", "-c", RELOAD, os.path.abspath(path), json.dumps(batches), rewrites],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
