import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import LabelSmoothedCrossEntropy, MaskedAccuracy
from tests.helpers import backend_gradients

pytestmark = pytest.mark.backend  # run on TensorFlow, JAX and PyTorch (tests/run.sh)


def reference_loss(labels, logits, eps):
    v = logits.shape[-1]
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    target = np.full(logits.shape, eps / v)
    target += (1 - eps) * np.eye(v)[labels]
    per_token = -(target * logp).sum(-1)
    mask = labels != 0
    return per_token[mask].mean()


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_label_smoothed_loss_equals_numpy_over_real_tokens(eps):
    labels = np.array([[4, 5, 6, 0, 0], [7, 1, 0, 0, 0]])
    logits = np.random.normal(size=(2, 5, 9)).astype("float32")
    loss = LabelSmoothedCrossEntropy(label_smoothing=eps)
    value = float(ops.convert_to_numpy(loss(labels, logits)))
    assert value == pytest.approx(reference_loss(labels, logits, eps), rel=1e-5)
    # Padding positions do not count, whatever the logits there.
    logits[0, 3:] = 1e4
    assert float(ops.convert_to_numpy(loss(labels, logits))) == pytest.approx(value, rel=1e-5)


def test_loss_upcasts_half_precision_logits():
    labels = np.array([[4, 5, 6]])
    logits = np.random.normal(size=(1, 3, 9)).astype("float32") * 30
    value = LabelSmoothedCrossEntropy()(labels, ops.cast(logits, "bfloat16"))
    assert keras.backend.standardize_dtype(value.dtype) == "float32"
    rounded = ops.convert_to_numpy(ops.cast(ops.cast(logits, "bfloat16"), "float32"))
    assert float(ops.convert_to_numpy(value)) == pytest.approx(reference_loss(labels, rounded, 0.1), rel=1e-4)


def test_loss_config_round_trip_and_validation():
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.2, pad_id=1)
    clone = LabelSmoothedCrossEntropy.from_config(loss.get_config())
    assert clone.get_config() == loss.get_config()
    with pytest.raises(ValueError, match="label_smoothing"):
        LabelSmoothedCrossEntropy(label_smoothing=1.5)


def test_masked_accuracy_ignores_padding():
    labels = np.array([[4, 5, 6, 0], [7, 0, 0, 0]])
    predicted = np.array([[4, 1, 6, 9], [7, 9, 9, 9]])
    logits = np.eye(10)[predicted].astype("float32")
    metric = MaskedAccuracy()
    metric.update_state(labels, logits)
    assert float(metric.result()) == pytest.approx(3 / 4)
    assert MaskedAccuracy.from_config(metric.get_config()).pad_id == 0


def test_sample_weight_weights_each_token():
    labels = np.array([[4, 5, 6, 0], [7, 2, 0, 0]])
    logits = np.random.normal(size=(2, 4, 9)).astype("float32")
    v = 9
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    target = np.full(logits.shape, 0.1 / v) + 0.9 * np.eye(v)[labels]
    per_token = -(target * logp).sum(-1)  # (2, 4)
    real = labels != 0
    loss = LabelSmoothedCrossEntropy()
    # Per token: only (0, 0) and (1, 0) count, each with weight 1, divided
    # by the 5 real tokens, as Keras' sum_over_batch_size divides by the count.
    token_weight = np.zeros((2, 4), "float32")
    token_weight[0, 0] = token_weight[1, 0] = 1
    value = float(ops.convert_to_numpy(loss(labels, logits, sample_weight=token_weight)))
    assert value == pytest.approx((per_token[0, 0] + per_token[1, 0]) / real.sum(), rel=1e-5)
    # Per sentence, (batch, 1) as Keras broadcasts it: the second sentence's tokens count three times.
    value = float(ops.convert_to_numpy(loss(labels, logits, sample_weight=np.array([[1.0], [3.0]]))))
    expected = (per_token[0][real[0]].sum() + 3 * per_token[1][real[1]].sum()) / real.sum()
    assert value == pytest.approx(expected, rel=1e-5)


def test_masked_accuracy_weights_tokens_and_checks_pad_id():
    labels = np.array([[4, 5, 6, 0], [7, 8, 0, 0]])
    predicted = np.array([[4, 1, 6, 9], [1, 1, 9, 9]])
    logits = np.eye(10)[predicted].astype("float32")
    metric = MaskedAccuracy()
    metric.update_state(labels, logits, sample_weight=np.array([3.0, 1.0]))
    assert float(metric.result()) == pytest.approx(6 / 11)  # hits 2 x 3; tokens 3 x 3 + 2
    for bad in ("x", -1, True):
        with pytest.raises(ValueError, match="pad_id"):
            MaskedAccuracy(pad_id=bad)
        with pytest.raises(ValueError, match="pad_id"):
            LabelSmoothedCrossEntropy(pad_id=bad)


def logits_gradient(loss, labels, logits, dtype="float32"):
    """d loss / d logits on the active backend, for logits of `dtype`: (gradient as float32, its dtype)."""
    labels = ops.convert_to_tensor(labels)
    (gradient,) = backend_gradients(lambda x: loss(labels, x), ops.cast(ops.convert_to_tensor(logits), dtype))
    return ops.convert_to_numpy(ops.cast(gradient, "float32")), keras.backend.standardize_dtype(gradient.dtype)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_gradient_is_softmax_minus_smoothed_target(eps):
    # The loss is written so that its gradient is one fused expression;
    # check that expression against the textbook one, with padding rows zero.
    labels = np.array([[4, 5, 6, 0, 0], [7, 1, 8, 2, 0]])
    logits = np.random.default_rng(0).normal(size=(2, 5, 9)).astype("float32") * 3
    gradient, _ = logits_gradient(LabelSmoothedCrossEntropy(label_smoothing=eps), labels, logits)
    softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    target = np.full(logits.shape, eps / 9) + (1 - eps) * np.eye(9)[labels]
    mask = (labels != 0)[..., None]
    expected = (softmax - target) * mask / mask.sum()
    np.testing.assert_allclose(gradient, expected, atol=1e-6)
    assert not gradient[0, 3:].any()


def test_loss_gradient_under_mixed_precision_is_bfloat16_and_right():
    # bfloat16 logits (mixed precision): the loss works in float32 inside and
    # hands back a bfloat16 gradient, equal to softmax - target of the
    # rounded logits to bfloat16 precision.
    labels = np.array([[4, 5, 6, 0], [7, 1, 8, 2]])
    logits = np.random.default_rng(1).normal(size=(2, 4, 9)).astype("float32") * 3
    gradient, dtype = logits_gradient(LabelSmoothedCrossEntropy(), labels, logits, dtype="bfloat16")
    assert dtype == "bfloat16"
    rounded = ops.convert_to_numpy(ops.cast(ops.cast(logits, "bfloat16"), "float32"))
    softmax = np.exp(rounded) / np.exp(rounded).sum(-1, keepdims=True)
    target = np.full(logits.shape, 0.1 / 9) + 0.9 * np.eye(9)[labels]
    mask = (labels != 0)[..., None]
    expected = (softmax - target) * mask / mask.sum()
    np.testing.assert_allclose(gradient, expected, atol=2e-3)
    assert np.abs(gradient - expected).max() < 0.02 * np.abs(expected).max()
    assert not gradient[0, 3].any()
