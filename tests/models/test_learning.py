"""A small Transformer really learns (reversing token sequences), and keeps what
it learned through int8 quantization and a `.keras` file."""

import os
import types

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import LabelSmoothedCrossEntropy, Transformer, paper_optimizer
from keras_transformer.decoding import greedy_decode
from keras_transformer.tokens import unpack_output
from keras_transformer.training import StalledTrainingWarning, frequency_loss
from keras_transformer.training.synthetic import copy_task

pytestmark = [pytest.mark.backend, pytest.mark.slow]  # every backend; trains a model

VOCAB = 16


def reversal_data():
    """`(training data, held-out inputs, held-out labels)` of the reversal task."""
    train = copy_task(6000, length=10, vocab_size=VOCAB, seed=0, reverse=True)
    (test_source, test_target_in), test_y = copy_task(600, length=10, vocab_size=VOCAB, seed=1, reverse=True)
    # Held out: drop the test sequences that also occur in training.
    seen = {tuple(s) for s in train[0][0]}
    new = np.array([tuple(s) not in seen for s in test_source])
    assert new.sum() > 400
    keep = np.flatnonzero(new)[:128]
    return train, (test_source[keep], test_target_in[keep]), test_y[keep]


def train_reversal_model():
    """A 2-layer Transformer (the tiny preset's depth at half its width)
    trained for 5 epochs: the recipe of tests/shared.py's `learned_reversal`,
    on TensorFlow.

    d_model 64 learns the task in 5 epochs (470 steps) to 0.98-0.99
    held-out token accuracy, in about half the time the tiny preset's width
    took for 0.95-0.97.
    """
    (train_x, train_y), _, _ = reversal_data()
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=VOCAB, num_layers=2, d_model=64, num_heads=4, d_ff=256, max_length=16)
    model.compile(
        optimizer=paper_optimizer(d_model=128, warmup_steps=100),  # the tiny preset's rates, a short warm-up
        loss=LabelSmoothedCrossEntropy(label_smoothing=0.1),
    )
    warnings = []  # a model that learns is not flagged as stalled
    stalled = StalledTrainingWarning(frequency_loss(train_y, VOCAB), warmup_steps=100, log=warnings.append)
    model.fit(train_x, train_y, batch_size=64, epochs=5, verbose=0, callbacks=[stalled])
    assert warnings == [] and stalled.first_step < 5 * len(train_y) // 64  # checked at the last epochs
    return model


@pytest.fixture(scope="module")
def trained():
    """The model of `train_reversal_model`, made once per test run
    (tests/shared.py) and loaded here, and what the tests compare with: a
    namespace of the `model`, the held-out `inputs` and `labels` (128
    sentences, one batch), the model's `logits` and greedy `outputs` on
    them, and `path`, its `.keras` file (each quantization test loads its
    own copy).

    Every backend checks the model TensorFlow trained: its predictions,
    greedy decoding and quantization on that backend. Training on each
    backend is tests/training/test_train.py's (bfloat16: the loss falls
    below any source-blind model's). The logits come from calling the
    model, not `predict`, and the greedy outputs from `greedy_decode` as it
    is: on TensorFlow each `predict` or XLA compile is another trace of the
    model.
    """
    from tests import shared

    path = os.path.join(shared.path("learned_reversal"), "model.keras")
    model = keras.saving.load_model(path)
    _, inputs, labels = reversal_data()
    return types.SimpleNamespace(
        model=model, inputs=inputs, labels=labels, logits=logits_of(model, inputs),
        outputs=greedy_outputs(model, inputs[0]), path=path,
    )


def logits_of(model, inputs):
    """The model's float32 logits `(batch, length, vocab)` as NumPy."""
    return ops.convert_to_numpy(ops.cast(model(inputs, training=False), "float32"))


def projections(model):
    """Every layer of `model` with a projection matrix: the shared embedding,
    the fused Q/K/V (or Q and K/V) and output of each attention, and the two FFN layers."""
    layers = [model.embedding]
    for block in model.encoder_layers + model.decoder_layers:
        attentions = [block.self_attention] + ([block.cross_attention] if hasattr(block, "cross_attention") else [])
        for attention in attentions:
            layers += attention.projections
        layers += [block.feed_forward.inner, block.feed_forward.outer]
    # 2 encoder layers (fused QKV, output, 2 FFN) and 2 decoder layers (the same,
    # and Q, fused KV and output of cross-attention).
    assert len(layers) == 1 + 2 * 4 + 2 * 7
    return layers


def greedy_outputs(model, source):
    tokens, _ = greedy_decode(model, source, max_extra_length=2)
    return [unpack_output(row) for row in ops.convert_to_numpy(tokens)]


def test_a_small_transformer_learns_to_reverse_sequences(trained):
    real = trained.labels != 0
    predicted = trained.logits.argmax(-1)
    accuracy = (predicted == trained.labels)[real].mean()
    # 0.984-0.992 on TensorFlow, JAX and PyTorch; an untrained model gets about 1 in 12.
    assert accuracy >= 0.95, f"held-out masked token accuracy {accuracy:.3f}"
    expected = [unpack_output(row) for row in trained.labels]
    # Whole sentences, greedy: 0.89-0.94.
    sentences = np.mean([a == b for a, b in zip(trained.outputs, expected)])
    assert sentences > 0.75, f"held-out sentences reversed exactly {sentences:.3f}"


def test_int8_quantized_model_keeps_outputs_and_loss(trained, tmp_path):
    test_x, test_y, logits = trained.inputs, trained.labels, trained.logits
    quantized = keras.saving.load_model(trained.path)
    quantized.quantize("int8")
    assert all(layer.quantization_mode == "int8" for layer in projections(quantized))

    int8_logits = logits_of(quantized, test_x)
    # int8 weights and activations move the logits of real tokens by well
    # under a hundredth of their range on average, and nearly all of them by
    # less than a twentieth (a token whose attention tips over moves
    # further). A scale left out or applied twice moves them all by about
    # their range or more.
    real = test_y != 0
    error, scale = np.abs(int8_logits - logits)[real], np.abs(logits[real]).max()
    assert error.mean() < 0.01 * scale and np.quantile(error, 0.99) < 0.05 * scale
    loss = LabelSmoothedCrossEntropy()
    float_loss = float(ops.convert_to_numpy(loss(test_y, logits)))
    int8_loss = float(ops.convert_to_numpy(loss(test_y, int8_logits)))
    # README.md's bounds: the loss within a relative 0.002 (met on the three
    # backends) and the same greedy output for at least 0.97 of the sentences.
    assert int8_loss == pytest.approx(float_loss, rel=0.002)
    same = [a == b for a, b in zip(greedy_outputs(quantized, test_x[0]), trained.outputs)]
    assert np.mean(same) >= 0.97

    # The int8 model saves and loads as a .keras file, with the same logits.
    quantized_path = os.path.join(tmp_path, "int8.keras")
    quantized.save(quantized_path)
    reloaded = keras.saving.load_model(quantized_path)
    assert reloaded.embedding.quantization_mode == "int8"
    np.testing.assert_allclose(logits_of(reloaded, test_x), int8_logits, rtol=1e-5, atol=1e-5)


def test_float8_quantized_model_keeps_its_loss_and_trains(trained, tmp_path):
    test_x, test_y = trained.inputs, trained.labels
    quantized = keras.saving.load_model(trained.path)
    quantized.quantize("float8")  # the Dense layers; Keras' Embedding has no float8 mode
    layers = projections(quantized)
    assert layers[0].quantization_mode is None
    assert all(layer.quantization_mode == "float8" for layer in layers[1:])
    loss = LabelSmoothedCrossEntropy()
    float_loss = float(ops.convert_to_numpy(loss(test_y, trained.logits)))
    float8_logits = logits_of(quantized, test_x)
    assert float(ops.convert_to_numpy(loss(test_y, float8_logits))) == pytest.approx(float_loss, rel=0.1)
    # float8 layers train (their scales are part of the state) and save.
    quantized.compile(optimizer=keras.optimizers.Adam(1e-4), loss=loss)
    quantized.fit(test_x, test_y, batch_size=64, epochs=1, verbose=0)
    trained_logits = logits_of(quantized, test_x)
    assert not np.allclose(trained_logits, float8_logits)
    path = os.path.join(tmp_path, "float8.keras")
    quantized.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_allclose(logits_of(reloaded, test_x), trained_logits, atol=1e-5)

