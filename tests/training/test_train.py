"""`train()` in this process: accumulation, precision, output dir, resume."""

import os

import keras
import numpy as np
import pytest

from keras_transformer.models.config import TransformerConfig
from keras_transformer.training import RunMismatchError, TrainingOptions, build_model, list_checkpoints, train
from keras_transformer.training.optimizer import paper_training_optimizer
from tests.training.tasks import TINY, copy_task, numpy_passes, source_blind_loss, weights_of

CONFIG = dict(vocab_size=20, **TINY, dropout_rate=0.0)
# Output-directory, resume and time-limit logic is backend-independent
# Python; its end-to-end runs through `fit` need only one backend
# (`portable`: tests/run.sh runs them on PyTorch, the cheapest). One
# training step through each backend's trainer (`backend`: accumulated
# micro-batches against one big step) runs on every backend, like
# checkpoints' save and restore; tests/training/test_distributed.py trains
# and resumes on JAX without TensorFlow.
tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="tf.data validation input: the TensorFlow pass"
)
QUIET = dict(tensorboard=False, verbose=0, log=lambda message: None)


def global_draws():
    """The next values of the process's random generators: Python's,
    NumPy's, Keras' global `SeedGenerator`, TensorFlow's (from its global
    seed) and, on PyTorch, torch's."""
    import random

    import tensorflow as tf

    draws = [random.random(), np.random.random(), float(keras.random.uniform(())), float(tf.random.uniform(()))]
    if keras.backend.backend() == "torch":
        import torch

        draws.append(float(torch.rand(())))
    return draws


@pytest.mark.backend
@pytest.mark.slow
def test_accumulated_micro_batches_equal_one_big_step(tmp_path):
    data = copy_task(32, pad=False)  # every batch has the same token count
    # Micro-batches 2k and 2k+1 of 4 sentences are big batch k of 8.
    keras.utils.set_random_seed(7)
    expected = global_draws()
    keras.utils.set_random_seed(7)
    small = train(CONFIG, data, tmp_path / "a", train_steps=3, checkpoint_every=3,
                  batch_size=4, gradient_accumulation_steps=2, **QUIET)
    # train() seeds what it draws from, and leaves the process's generators as they were.
    assert global_draws() == expected
    big = train(CONFIG, data, tmp_path / "b", train_steps=3, checkpoint_every=3, batch_size=8, **QUIET)
    assert int(small.optimizer.iterations) == 3 == int(big.optimizer.iterations)
    np.testing.assert_allclose(
        float(small.optimizer.learning_rate), float(big.optimizer.learning_rate), rtol=1e-6
    )
    # Adam's first moments are linear in the gradients: equal up to rounding.
    numpy = keras.ops.convert_to_numpy
    for a, b in zip(small.optimizer._momentums, big.optimizer._momentums):
        np.testing.assert_allclose(numpy(a), numpy(b), rtol=1e-4, atol=1e-7)
    # The weights too, where the gradient is clearly not 0: Adam moves a
    # weight whose gradient is about 0 by up to +-lr whatever its rounding.
    # (The key projection's bias is such a weight: adding it to every key
    # leaves each query's softmax as it is.)
    step = float(big.optimizer.learning_rate)
    largest = max(np.abs(numpy(moment)).max() for moment in big.optimizer._momentums)
    compared = 0
    for a, b, moment in zip(small.trainable_weights, big.trainable_weights, big.optimizer._momentums):
        clear = np.abs(numpy(moment)) > 1e-4 * largest
        np.testing.assert_allclose(numpy(a)[clear], numpy(b)[clear], rtol=0, atol=1e-2 * step)
        compared += clear.sum()
    assert compared > 0.9 * sum(w.size for w in weights_of(big))


def test_precision_policies_and_label_smoothing_reach_the_compiled_model():
    config = TransformerConfig(**CONFIG)
    fp16 = build_model(config, "mixed_float16", TrainingOptions(), 1, "auto")
    assert isinstance(fp16.optimizer, keras.optimizers.LossScaleOptimizer)
    assert fp16.compute_dtype == "float16" and fp16.variable_dtype == "float32"
    bf16 = build_model(config, "mixed_bfloat16", TrainingOptions(label_smoothing=0.2), 2, "auto")
    assert not isinstance(bf16.optimizer, keras.optimizers.LossScaleOptimizer)
    assert bf16.compute_dtype == "bfloat16" and bf16.optimizer.gradient_accumulation_steps == 2
    assert (fp16.loss.label_smoothing, bf16.loss.label_smoothing) == (0.1, 0.2)  # the run's eps_ls
    ids = np.array([[3, 4, 2]], "int32")
    logits = bf16((ids, ids))
    loss = bf16.loss(ids, logits)
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"


def layer_norms(model):
    blocks = model.encoder_layers + model.decoder_layers
    return [norm for block in blocks for norm in (block.self_attention_norm, block.feed_forward_norm)] + [
        block.cross_attention_norm for block in model.decoder_layers
    ]


def assert_float32_statistics(norm):
    """`norm`, a LayerNormalization under mixed_bfloat16, on 1000 + N(0, 1).

    With float32 statistics its output is the float64 reference rounded to
    bf16 once: relative error at most 2^-8 (8 significant bits), and about
    1e-4 from float32 (whose spacing at 1000 is 6e-5). The tolerance is
    twice the rounding, plus 1e-3. In bf16, whose spacing at 1000 is 4, the
    inputs or their mean would be off by up to 2 standard deviations:
    errors of 2-6 (measured), a hundred times the tolerance.
    """
    x = (1000.0 + np.random.normal(size=(4, 16))).astype("float32")
    out = keras.ops.convert_to_numpy(keras.ops.cast(norm(x), "float32"))
    gamma, beta = (keras.ops.convert_to_numpy(w).astype("float64") for w in (norm.gamma, norm.beta))
    x = x.astype("float64")
    expected = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + norm.epsilon) * gamma + beta
    np.testing.assert_allclose(out, expected, rtol=2**-7, atol=1e-3)


@pytest.mark.slow
def test_mixed_bfloat16_learns_with_float32_variables_and_statistics(tmp_path):
    data = copy_task(1024)
    model = train(CONFIG, data, tmp_path, train_steps=80, checkpoint_every=40, batch_size=32,
                  warmup_steps=40, precision="mixed_bfloat16", **QUIET)
    # Computes in bf16 and keeps float32 variables, the optimizer's too.
    assert model.compute_dtype == "bfloat16" and model.variable_dtype == "float32"
    (source, target_in), labels = copy_task(1024, seed=1)
    logits = model((source[:2], target_in[:2]))
    assert keras.backend.standardize_dtype(logits.dtype) == "bfloat16"
    floats = [v for v in model.variables + model.optimizer.variables if "float" in str(v.dtype)]
    assert len(floats) > len(model.trainable_variables)  # Adam's moments among them
    assert {keras.backend.standardize_dtype(v.dtype) for v in floats} == {"float32"}
    # It learns: the loss falls, and on new sentences it is below the least
    # loss of any model that does not read the source (2.64 here), the
    # independent reference. Over seeds 0-5: falls by 0.29-0.72, and ends
    # 0.12-1.0 below that bound.
    losses = model.history.history["loss"]
    assert losses[-1] < losses[0], losses
    seen = {tuple(s) for s in data[0][0]}
    new = np.array([tuple(s) not in seen for s in source])
    loss, _ = model.evaluate((source[new], target_in[new]), labels[new], batch_size=1024, verbose=0)
    assert loss < source_blind_loss(labels[new], CONFIG["vocab_size"]) - 0.05, loss
    # LayerNorm statistics stay float32 under the bf16 policy.
    for norm in layer_norms(model):
        assert keras.backend.standardize_dtype(norm.compute_dtype) == "bfloat16"
        assert_float32_statistics(norm)


def test_paper_training_optimizer_defaults():
    optimizer = paper_training_optimizer(512)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    assert optimizer.gradient_accumulation_steps is None


@pytest.mark.portable
@pytest.mark.slow
def test_resume_after_an_interrupt_past_the_last_whole_interval_and_from_a_corrupt_checkpoint(tmp_path):
    # A `pass -> NumPy batches` function, the input of machines without
    # TensorFlow (JAX, PyTorch), for training and validation. Intervals of 2
    # steps: a run of 5 ends with a 1-step interval, and checkpoints it.
    # One run, interrupted and resumed, then extended, and one whose latest
    # checkpoint is damaged, each end with the weights of a straight run.
    data = numpy_passes(copy_task(24))  # 3 batches per pass: the steps cross passes
    checkpointed = lambda run: [c.step for c in list_checkpoints(os.path.join(tmp_path, run, "checkpoints"))]
    straight = train(CONFIG, data, tmp_path / "straight", validation_data=data, train_steps=5, checkpoint_every=2,
                     **QUIET)
    assert int(straight.optimizer.iterations) == 5 and checkpointed("straight") == [2, 4, 5]
    assert len(straight.history.history["val_loss"]) == 3  # a validation pass a checkpoint
    expected = weights_of(straight)

    def assert_straight_runs_weights(model):
        for a, b in zip(expected, weights_of(model)):
            np.testing.assert_allclose(a, b, atol=1e-6)

    class Interrupt(keras.callbacks.Callback):
        """Interrupts the run in its third step, after the checkpoint of step 2."""

        batches = 0

        def on_train_batch_end(self, batch, logs=None):
            self.batches += 1
            if self.batches == 3:
                raise KeyboardInterrupt

    # A run of 3 steps, interrupted in its last, ...
    with pytest.raises(KeyboardInterrupt):
        train(CONFIG, data, tmp_path / "run", train_steps=3, checkpoint_every=2, callbacks=[Interrupt()], **QUIET)
    assert checkpointed("run") == [2]
    # ... is no other run's to resume (the model or the seed differ) ...
    other = dict(CONFIG, d_ff=64)
    with pytest.raises(RunMismatchError, match="belongs to another run .*model"):
        train(other, data, tmp_path / "run", train_steps=3, checkpoint_every=2, **QUIET)
    with pytest.raises(RunMismatchError, match="seed"):
        train(CONFIG, data, tmp_path / "run", train_steps=3, checkpoint_every=2, seed=1, **QUIET)
    # ... resumes from step 2 ...
    messages = []
    train(CONFIG, data, tmp_path / "run", train_steps=3, checkpoint_every=2, tensorboard=False, verbose=0,
          log=messages.append)
    assert "Training resume run" in messages[0] and "step 2, skipping 2 consumed batches" in messages[-1]
    assert checkpointed("run") == [2, 3]
    # ... and, extended to 5 steps, from step 3 on, to the weights of the run of 5.
    extended = train(CONFIG, data, tmp_path / "run", train_steps=5, checkpoint_every=2, **QUIET)
    assert checkpointed("run") == [2, 3, 5] and int(extended.optimizer.iterations) == 5
    assert_straight_runs_weights(extended)
    # Run again when done, it trains nothing more.
    done = train(CONFIG, data, tmp_path / "run", train_steps=5, checkpoint_every=2, **QUIET)
    assert int(done.optimizer.iterations) == 5 and checkpointed("run") == [2, 3, 5]
    assert_straight_runs_weights(done)

    # The straight run's latest checkpoint damaged: it falls back to step 4
    # and trains step 5 again, to the same weights.
    latest = tmp_path / "straight" / "checkpoints" / "ckpt-0000000005.weights.h5"
    with open(latest, "r+b") as f:
        f.seek(os.path.getsize(latest) // 2)
        f.write(b"\0garbage\0" * 8)
    messages = []
    with pytest.warns(UserWarning, match="does not match its SHA-256"):
        retrained = train(CONFIG, data, tmp_path / "straight", validation_data=data, train_steps=5,
                          checkpoint_every=2, tensorboard=False, verbose=0, log=messages.append)
    text = "\n".join(messages)
    assert "step 5 is unusable" in text and "Falling back to the previous checkpoint" in text
    assert "ckpt-0000000004.weights.h5: step 4, skipping 4 consumed batches" in text
    assert int(retrained.optimizer.iterations) == 5 and checkpointed("straight") == [2, 4, 5]
    assert_straight_runs_weights(retrained)

    # With `overwrite`, another run takes the directory: a new run, from step 0.
    model = train(other, data, tmp_path / "run", train_steps=1, checkpoint_every=1, overwrite=True, **QUIET)
    assert int(model.optimizer.iterations) == 1
    assert sorted(os.listdir(tmp_path / "run" / "checkpoints")) == ["ckpt-0000000001.json", "ckpt-0000000001.weights.h5"]


@pytest.mark.portable
def test_an_empty_pass_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"train_data\(0\)"):
        train(CONFIG, lambda index: iter(()), tmp_path, train_steps=2, checkpoint_every=2, **QUIET)


@pytest.mark.portable
def test_time_limit_stops_at_the_first_checkpoint_after_it(tmp_path):
    from keras_transformer.training import TimeLimit, latest_checkpoint

    limit = TimeLimit(1e-6, log=lambda message: None)
    model = train(CONFIG, numpy_passes(copy_task(24)), tmp_path, train_steps=6, checkpoint_every=2,
                  callbacks=[limit], **QUIET)
    assert int(model.optimizer.iterations) == 2 and limit.stopped_at_epoch == 1
    assert latest_checkpoint(os.path.join(tmp_path, "checkpoints")).step == 2
    for bad in (0, -1.0, "60", True):
        with pytest.raises(ValueError, match="seconds"):
            TimeLimit(bad)


@tensorflow_only
def test_validation_over_bucketed_batches_of_unknown_count(tmp_path, recwarn):
    import tensorflow as tf

    (source, target_in), labels = copy_task(16)
    batches = tf.data.Dataset.from_tensor_slices(((source, target_in), labels)).batch(8)
    valid = batches.filter(lambda inputs, labels: True)  # as bucketing does: the count is unknown
    assert int(valid.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    model = train(CONFIG, batches, tmp_path / "a", validation_data=valid, train_steps=2, checkpoint_every=1, **QUIET)
    assert len(model.history.history["val_loss"]) == 2
    # Keras warned at the end of every validation pass of such a dataset.
    assert not [w for w in recwarn if "ran out of data" in str(w.message)]
    with pytest.raises(ValueError, match="validation_steps"):
        train(CONFIG, batches, tmp_path / "b", validation_data=valid.repeat(), train_steps=1, checkpoint_every=1, **QUIET)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(train_steps=0), "train_steps=0"),
        (dict(checkpoint_every=-1), "checkpoint_every=-1"),
        (dict(tokens_per_batch=0), "tokens_per_batch=0"),
        (dict(batch_size=2.5), "batch_size=2.5"),
        (dict(label_smoothing=1.0), "label_smoothing=1.0"),
        (dict(learning_rate_scale=0.0), "learning_rate_scale=0.0"),
    ],
)
def test_invalid_training_options_are_refused_by_name(options, message):
    with pytest.raises(ValueError, match=message):
        TrainingOptions(**{"train_steps": 1000, "checkpoint_every": 100, **options})


@pytest.mark.portable
def test_a_batch_larger_than_the_numpy_data_is_an_error_before_the_directory_is_claimed(tmp_path):
    # Whole batches only: none would ever come, and training would wait forever.
    with pytest.raises(ValueError, match=r"batch_size.*\(16\). Received: batch_size=17"):
        train(CONFIG, copy_task(16), tmp_path / "run", train_steps=1, checkpoint_every=1, batch_size=17, **QUIET)
    assert not os.path.exists(tmp_path / "run")
