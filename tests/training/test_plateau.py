"""The frequency loss is the label-smoothed loss of the best prediction
blind to the source and the context, and a run that stays near it after
its warm-up is flagged once."""

import keras
import numpy as np
import pytest

from keras_transformer import LabelSmoothedCrossEntropy
from keras_transformer.training import StalledTrainingWarning, frequency_loss


@pytest.mark.parametrize("eps", [0.1, 0.0])  # 0: the tokens that never occur have q = 0
def test_the_frequency_loss_is_the_smoothed_loss_of_the_best_constant_prediction(eps):
    vocab = 12
    rng = np.random.default_rng(0)
    labels = rng.choice(np.arange(1, vocab), size=(40, 9), p=np.arange(1, vocab) / np.arange(1, vocab).sum())
    labels[:, 6:] = 0  # padding: not counted
    labels[labels == 11] = 10  # token 11 never occurs
    counts = np.bincount(labels[:, :6].ravel(), minlength=vocab)
    best = (1 - eps) * counts / counts.sum() + eps / vocab
    loss = LabelSmoothedCrossEntropy(eps)

    def loss_of(q):  # every position predicts q (a probability of 0 as e^-60)
        logits = np.log(np.maximum(q, np.exp(-60)))
        return float(loss(labels, np.broadcast_to(logits, labels.shape + (vocab,)).astype("float32")))

    with np.errstate(all="raise"):
        expected = frequency_loss(list(labels), vocab, eps)
    assert np.isfinite(expected) and loss_of(best) == pytest.approx(expected, rel=1e-5)
    for _ in range(5):  # any other constant prediction does worse
        other = best * np.exp(rng.normal(0, 0.3, vocab))
        assert loss_of(other / other.sum()) > expected
    with pytest.raises(ValueError, match="no token other than padding"):
        frequency_loss([[0, 0]], vocab)
    with pytest.raises(ValueError, match=r"ids outside \[0, 12\). Received: \[3, 12\]"):
        frequency_loss([[3, 12]], vocab)


@pytest.mark.parametrize("steps, losses, warned_at", [
    (None, [7.5, 7.2, 7.1, 6.9, 6.8, 6.4, 7.2], 200),  # still near at twice the warm-up: once
    (None, [7.5, 7.2, 6.4, 6.0, 5.5, 5.0], None),  # below by more than the margin there
    (None, [7.5, 7.2, 7.1], None),  # a run too short to tell
    ([50, 100, 150, 170, 220], [7.5, 7.2, 7.1, 6.9, 6.8], 220),  # a shorter interval, then resumed: the optimizer's step
])
def test_a_loss_near_the_plateau_from_twice_the_warmup_is_flagged_once(steps, losses, warned_at):
    messages = []
    callback = StalledTrainingWarning(7.0, warmup_steps=100, log=messages.append)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.optimizer.build(model.trainable_variables)
    callback.set_model(model)
    for epoch, (step, loss) in enumerate(zip(steps or range(50, 50 * len(losses) + 1, 50), losses)):
        model.optimizer.iterations.assign(step)  # checkpoints at steps 50, 100, ...
        callback.on_epoch_end(epoch, {"loss": loss})
    assert [m.split(" the training loss")[0] for m in messages] == ([] if warned_at is None else
                                                                    [f"Warning: at step {warned_at}"])
