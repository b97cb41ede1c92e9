"""The output layer and its loss as one operation (keras_transformer.output_layer)."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_transformer.losses as losses_module
from keras_transformer import LabelSmoothedCrossEntropy, Transformer
from keras_transformer.output_layer import project, projected_cross_entropy, projection_of
from tests.helpers import backend_gradients

# The fused path runs where Keras' custom gradients are reliable; on PyTorch
# the loss is differentiated automatically (losses.LabelSmoothedCrossEntropy).
FUSED_BACKENDS = ("tensorflow", "jax")
LABELS = np.array([[4, 5, 6, 0, 0], [7, 1, 8, 2, 0], [9, 9, 3, 0, 0]])


def reference(labels, hidden, embeddings, eps):
    """Loss and its gradients for hidden and embeddings, in NumPy (float64)."""
    hidden, embeddings = hidden.astype("float64"), embeddings.astype("float64")
    vocab = embeddings.shape[0]
    logits = hidden @ embeddings.T
    softmax = np.exp(logits - logits.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    target = np.full(logits.shape, eps / vocab) + (1 - eps) * np.eye(vocab)[labels]
    mask = (labels != 0)[..., None]
    loss = (-(target * np.log(softmax)).sum(-1, keepdims=True) * mask).sum() / mask.sum()
    d_logits = (softmax - target) * mask / mask.sum()
    d_hidden = d_logits @ embeddings
    d_embeddings = np.einsum("btv,btd->vd", d_logits, hidden)
    return loss, d_hidden, d_embeddings


def fused_loss_and_gradients(labels, hidden, embeddings, eps, dtype="float32"):
    hidden = ops.cast(ops.convert_to_tensor(hidden), dtype)
    embeddings = ops.cast(ops.convert_to_tensor(embeddings), dtype)

    def loss(h, w):
        return projected_cross_entropy(labels, project(h, w), h, w, eps)

    value = ops.convert_to_numpy(loss(hidden, embeddings))
    d_hidden, d_embeddings = backend_gradients(loss, hidden, embeddings)
    return value, d_hidden, d_embeddings


def problem(seed, d_model=6, vocab=11):
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=LABELS.shape + (d_model,)).astype("float32") * 2
    embeddings = rng.normal(size=(vocab, d_model)).astype("float32")
    return hidden, embeddings


@pytest.mark.skipif(keras.backend.backend() not in FUSED_BACKENDS, reason="fused path runs on TensorFlow and JAX")
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_fused_loss_and_gradients_equal_the_textbook_ones(eps):
    hidden, embeddings = problem(0)
    value, d_hidden, d_embeddings = fused_loss_and_gradients(LABELS, hidden, embeddings, eps)
    expected = reference(LABELS, hidden, embeddings, eps)
    assert float(value) == pytest.approx(expected[0], rel=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(d_hidden), expected[1], atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(d_embeddings), expected[2], atol=1e-6)
    # Padding positions pass no gradient to their hidden states.
    assert not ops.convert_to_numpy(d_hidden)[0, 3:].any()


@pytest.mark.skipif(keras.backend.backend() not in FUSED_BACKENDS, reason="fused path runs on TensorFlow and JAX")
def test_fused_loss_with_every_label_padding_is_zero_with_zero_gradients():
    hidden, embeddings = problem(1)
    value, d_hidden, d_embeddings = fused_loss_and_gradients(np.zeros_like(LABELS), hidden, embeddings, 0.1)
    assert float(value) == 0.0
    assert not ops.convert_to_numpy(d_hidden).any() and not ops.convert_to_numpy(d_embeddings).any()


@pytest.mark.skipif(keras.backend.backend() not in FUSED_BACKENDS, reason="fused path runs on TensorFlow and JAX")
def test_fused_loss_under_mixed_precision_keeps_dtypes_and_bfloat16_accuracy():
    # bfloat16 hidden states and embeddings: float32 statistics and loss,
    # gradients in bfloat16, equal to the float64 ones of the rounded inputs
    # to bfloat16 precision.
    hidden, embeddings = problem(2)
    rounded = [ops.convert_to_numpy(ops.cast(ops.cast(a, "bfloat16"), "float32")) for a in (hidden, embeddings)]
    value, d_hidden, d_embeddings = fused_loss_and_gradients(LABELS, hidden, embeddings, 0.1, dtype="bfloat16")
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    assert {keras.backend.standardize_dtype(g.dtype) for g in (d_hidden, d_embeddings)} == {"bfloat16"}
    expected = reference(LABELS, *rounded, 0.1)
    assert float(value) == pytest.approx(expected[0], rel=1e-2)
    for got, want in zip((d_hidden, d_embeddings), expected[1:]):
        got = ops.convert_to_numpy(ops.cast(got, "float32"))
        assert np.abs(got - want).max() < 0.03 * np.abs(want).max()


def test_only_unchanged_training_logits_carry_their_projection():
    model = Transformer(vocab_size=50, num_layers=1, d_model=8, num_heads=2, d_ff=16, dropout_rate=0.0)
    inputs = (np.array([[5, 6, 7, 0]]), np.array([[2, 8, 9]]))
    # Outside training nothing is recorded: logits a caller keeps keep nothing else alive.
    assert projection_of(model(inputs)) is None and projection_of(model(inputs, training=False)) is None
    logits = model(inputs, training=True)
    hidden, embeddings = projection_of(logits)
    assert tuple(hidden.shape) == (1, 3, 8) and tuple(embeddings.shape) == (50, 8)
    np.testing.assert_allclose(
        ops.convert_to_numpy(ops.matmul(hidden, ops.transpose(embeddings))), ops.convert_to_numpy(logits), atol=1e-6
    )
    for changed in (logits * 1.0, logits[:, :2], ops.cast(logits, "bfloat16"), ops.convert_to_numpy(logits)):
        assert projection_of(changed) is None


@pytest.fixture
def fused_calls(monkeypatch):
    """Counts the loss's calls of the fused operation."""
    calls = []
    original = losses_module.projected_cross_entropy

    def counting(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(losses_module, "projected_cross_entropy", counting)
    return calls


def test_loss_takes_the_fused_path_for_model_logits_only(fused_calls):
    model = Transformer(vocab_size=50, num_layers=1, d_model=8, num_heads=2, d_ff=16, dropout_rate=0.0)
    labels = np.array([[8, 9, 3]])
    logits = model((np.array([[5, 6, 7, 0]]), np.array([[2, 8, 9]])), training=True)
    loss = LabelSmoothedCrossEntropy()
    fused = float(ops.convert_to_numpy(loss(labels, logits)))
    assert len(fused_calls) == (1 if keras.backend.backend() in FUSED_BACKENDS else 0)
    plain = float(ops.convert_to_numpy(loss(labels, ops.convert_to_tensor(ops.convert_to_numpy(logits)))))
    weighted = float(ops.convert_to_numpy(loss(labels, logits, sample_weight=np.ones(1))))
    assert len(fused_calls) == (1 if keras.backend.backend() in FUSED_BACKENDS else 0)  # neither call fused
    assert fused == pytest.approx(plain, rel=1e-6) and weighted == pytest.approx(plain, rel=1e-6)


def _train(data, fused, monkeypatch):
    """Losses and weights after three SGD steps of `fit`, with or without the fused loss."""
    if not fused:  # logits that seem to come from elsewhere: the loss from the logits alone
        monkeypatch.setattr(losses_module, "projection_of", lambda logits: None)
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=40, num_layers=1, d_model=16, num_heads=2, d_ff=32, dropout_rate=0.0)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=LabelSmoothedCrossEntropy())
    history = model.fit(*data, batch_size=4, epochs=3, shuffle=False, verbose=0)
    return history.history["loss"], [ops.convert_to_numpy(w) for w in model.trainable_weights]


def test_fit_trains_the_same_with_the_fused_loss(fused_calls, monkeypatch):
    rng = np.random.default_rng(3)
    source, target = rng.integers(1, 40, (4, 7)), rng.integers(1, 40, (4, 6))
    target[:2, -2:] = 0  # padding in the labels
    data = ((source, target[:, :-1]), target[:, 1:])
    fused_loss, fused_weights = _train(data, True, monkeypatch)
    assert bool(fused_calls) == (keras.backend.backend() in FUSED_BACKENDS)
    count = len(fused_calls)
    plain_loss, plain_weights = _train(data, False, monkeypatch)
    assert len(fused_calls) == count  # the second run did not fuse
    np.testing.assert_allclose(fused_loss, plain_loss, rtol=1e-5)
    assert fused_loss[-1] < fused_loss[0]
    for fused, plain in zip(fused_weights, plain_weights):
        np.testing.assert_allclose(fused, plain, atol=1e-5)
