"""SubwordTokenizer: round trips in Python and in the preprocessor's graph face, files, bad input."""

import os
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer
from keras_transformer.translation.preprocessor import TranslationPreprocessor
from keras_transformer.tokens import pack_source
from tests.data.conftest import TEXTS


def test_special_ids_and_python_round_trip(tokenizer):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert tokenizer.id_to_piece([PAD_ID, UNK_ID, BOS_ID, EOS_ID]) == ["<pad>", "<unk>", "<s>", "</s>"]
    ids = tokenizer.encode(TEXTS)
    assert tokenizer.decode(ids) == TEXTS  # accents, « », digits, €
    assert all(4 <= i < tokenizer.vocab_size for row in ids for i in row)
    assert tokenizer.encode(TEXTS[0]) == ids[0] and tokenizer.decode(ids[0]) == TEXTS[0]
    padded = np.array([[BOS_ID] + ids[0] + [EOS_ID, PAD_ID, PAD_ID, 7]])  # what follows EOS is dropped
    assert tokenizer.decode(padded) == [TEXTS[0]]
    assert "".join(tokenizer.id_to_piece(ids[0])).replace("▁", " ").strip() == TEXTS[0]


def test_graph_tokenize_and_detokenize_inside_tf_function(tokenizer):
    import tensorflow as tf  # here: the JAX and PyTorch passes collect this module too

    preprocessor = TranslationPreprocessor(tokenizer, max_length=64)
    op = preprocessor.graph_tokenizer()

    @tf.function
    def round_trip(strings):
        ids, _ = preprocessor.pieces_graph(strings, op)  # ragged (batch, None), EOS-ended
        return ids, preprocessor.detokenize_graph(ids, op), preprocessor.detokenize_graph(ids.to_tensor(), op)

    ids, from_ragged, from_dense = round_trip(tf.constant(TEXTS))
    assert ids.dtype == tf.int32 and isinstance(ids, tf.RaggedTensor)
    assert ids.to_list() == [pack_source(row) for row in tokenizer.encode(TEXTS)]  # the same ids in and out of the graph
    assert [t.decode() for t in from_ragged.numpy()] == TEXTS == [t.decode() for t in from_dense.numpy()]
    row = tokenizer.encode(TEXTS[1])
    dense = tf.constant([[BOS_ID] + row + [EOS_ID, PAD_ID, 9], [BOS_ID, EOS_ID, 9, PAD_ID] + [PAD_ID] * len(row)])
    assert [t.decode() for t in preprocessor.detokenize_graph(dense, op).numpy()] == [TEXTS[1], ""]


def test_save_and_load(tokenizer, tmp_path):
    path = tokenizer.save(tmp_path / "vocab")
    assert os.path.basename(path) == "tokenizer.model"
    for loaded in (SubwordTokenizer.load(path), SubwordTokenizer.load(tmp_path / "vocab")):
        assert loaded.encode(TEXTS) == tokenizer.encode(TEXTS) and loaded.model_proto == tokenizer.model_proto


def test_train_from_files(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 20) + "\n", encoding="utf-8")
    tokenizer = SubwordTokenizer.train(files=[str(corpus)], vocab_size=400, model_type="unigram")
    assert tokenizer.decode(tokenizer.encode(TEXTS)) == TEXTS


def test_bad_input_names_the_argument(tmp_path):
    with pytest.raises(ValueError, match=r"vocab_size.*Received: vocab_size=0"):
        SubwordTokenizer.train(TEXTS, vocab_size=0)
    with pytest.raises(ValueError, match="model_type"):
        SubwordTokenizer.train(TEXTS, vocab_size=100, model_type="word piece")
    with pytest.raises(ValueError, match="no non-empty sentence"):
        SubwordTokenizer.train(["", "  "])
    with pytest.raises(ValueError, match="not one string"):
        SubwordTokenizer.train("Bonjour.")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        SubwordTokenizer.train(files=[str(tmp_path / "missing.txt")])
    with pytest.raises(FileNotFoundError, match="nothing_here"):
        SubwordTokenizer.load(tmp_path / "nothing_here")
    (tmp_path / "junk.model").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="model_proto"):
        SubwordTokenizer.load(tmp_path / "junk.model")


def test_python_path_does_not_import_tensorflow(tmp_path):
    script = """
import sys
sys.modules["tensorflow"] = None  # any `import tensorflow` now fails
from keras_transformer.translation.tokenizer import SubwordTokenizer
from keras_transformer.data import numpy_batches
from keras_transformer import datasets
pairs = datasets.load("tatoeba_en_fr", "test")[:200]
tok = SubwordTokenizer.train([s for p in pairs for s in p], vocab_size=400)
assert tok.decode(tok.encode([pairs[0][1]])) == [pairs[0][1]]
assert sum(len(b[1]) for b in numpy_batches(pairs, tok, 256, 32)) == 200
print("ok")
"""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-3000:]


def test_too_small_a_vocabulary_names_the_minimum():
    with pytest.raises(ValueError, match=r"`vocab_size` must be >= \d+ for this corpus. Received: vocab_size=20"):
        SubwordTokenizer.train(TEXTS * 5, vocab_size=20)


def test_save_is_atomic_with_the_umask_mode_and_a_damaged_file_is_named(tokenizer, tmp_path, monkeypatch):
    path = tokenizer.save(tmp_path)
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    before = open(path, "rb").read()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        tokenizer.save(tmp_path)
    monkeypatch.undo()
    assert open(path, "rb").read() == before and os.listdir(tmp_path) == ["tokenizer.model"]
    with open(path, "wb") as f:
        f.write(before[:100])
    with pytest.raises(ValueError, match=f"Tokenizer file {str(path)!r}"):
        SubwordTokenizer.load(tmp_path)
