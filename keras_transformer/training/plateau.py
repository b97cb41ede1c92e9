"""The loss of a model that has learned only how often each target token
occurs, and a warning for a run whose training loss stays near it.

A Transformer that ignores its source and the target words before each
position can still predict every target token by its frequency. Its
label-smoothed cross-entropy is the plateau that training starts by
reaching; a run that is still there long after its warm-up is not learning
to translate. The paper's post-norm layers (`norm_first=False`) can stall
there when the learning rate is high for their depth: on LibreOffice help
English->German, `small` (4 layers) sat on this plateau for hundreds of
steps where `tiny` (2 layers) and `small` with `norm_first=True` learned at
once (docs/training.md, "A run that stalls").

Example:

>>> loss = frequency_loss([[5, 6, 3], [5, 3]], vocab_size=8, label_smoothing=0.1)
>>> callback = StalledTrainingWarning(loss, warmup_steps=4000)  # checked at each epoch end from step 8000
>>> model.fit(..., callbacks=[callback])
"""

import keras
import numpy as np

from keras_transformer.tokens import PAD_ID

# The check starts at this many times the warm-up steps: at the end of the
# warm-up a model that learns well can still be close to the plateau.
CHECK_AFTER_WARMUPS = 2
# How far below the plateau, in nats per token, the training loss must be.
MARGIN = 0.5


def frequency_loss(labels, vocab_size, label_smoothing=0.1):
    """The label-smoothed cross-entropy of the best source-blind and
    context-blind prediction: every target token's frequency in `labels`.

    Args:
        labels: rows of target token ids (lists or arrays, the EOS included,
            padding `PAD_ID` left out of the counts).
        vocab_size: int. The model's output vocabulary.
        label_smoothing: float. The run's eps_ls.

    Returns:
        A float, in nats per token: with frequencies `p` and smoothed
        targets `(1 - eps) * one_hot + eps / vocab_size`, the best constant
        prediction is `q = (1 - eps) * p + eps / vocab_size`, the mean
        smoothed target, and its loss `-sum((1 - eps) * p * log q) - eps /
        vocab_size * sum(log q)` is q's entropy, `-sum(q * log q)`, where
        `0 * log 0` is 0: without smoothing, a token that never occurs has
        `q = 0`.
    """
    counts = np.zeros(vocab_size)
    for row in labels:
        ids = np.asarray(row, np.int64).ravel()
        if ids.size and not 0 <= ids.min() <= ids.max() < vocab_size:
            raise ValueError(f"Argument `labels` holds ids outside [0, {vocab_size}). Received: {row!r}")
        counts += np.bincount(ids[ids != PAD_ID], minlength=vocab_size)
    if not counts.sum():
        raise ValueError("Argument `labels` holds no token other than padding.")
    p = counts / counts.sum()
    q = (1 - label_smoothing) * p + label_smoothing / vocab_size
    q = q[q > 0]
    return float(-np.sum(q * np.log(q)))


class StalledTrainingWarning(keras.callbacks.Callback):
    """Logs a warning, once, when the training loss at an epoch end (a
    checkpoint, in `train()`) is still within `MARGIN` of `frequency_loss`,
    from `CHECK_AFTER_WARMUPS` times the warm-up on.

    The step is the optimizer's (`optimizer.iterations`, in optimizer steps
    with gradient accumulation too): right after a shorter last interval,
    and in a resumed run.

    Args:
        frequency_loss: float. The run's `frequency_loss`.
        warmup_steps: int. The schedule's warm-up, in optimizer steps.
        log: callable taking a message.
    """

    def __init__(self, frequency_loss, warmup_steps, log=print):
        super().__init__()
        self.frequency_loss = float(frequency_loss)
        self.first_step = CHECK_AFTER_WARMUPS * int(warmup_steps)
        self.log = log
        self.warned = False

    def on_epoch_end(self, epoch, logs=None):
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        loss = (logs or {}).get("loss")
        if self.warned or loss is None or step < self.first_step or loss < self.frequency_loss - MARGIN:
            return
        self.warned = True
        self.log(
            f"Warning: at step {step} the training loss, {loss:.2f}, is not {MARGIN} below {self.frequency_loss:.2f}, "
            "the loss of predicting each target token by its frequency alone, blind to the source: the model is "
            "not learning to translate. Post-norm layers (the paper's, norm_first=False) can stall like this when "
            "the learning rate is high for their depth. Start again with pre-norm layers (norm_first=True; "
            "`--set norm_first=True` on the command line), a smaller learning-rate scale, or a longer warm-up."
        )
