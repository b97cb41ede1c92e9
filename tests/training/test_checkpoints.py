"""Atomic, verified, pruned checkpoints and their averaging."""

import os

import h5py
import keras
import numpy as np
import pytest

from keras_transformer.cli import main
from keras_transformer.models.config import TransformerConfig
from keras_transformer.models.transformer import Transformer
from keras_transformer.training import (
    TrainingOptions,
    average_checkpoints,
    build_model,
    latest_checkpoint,
    list_checkpoints,
    restore_checkpoint,
    save_checkpoint,
)
from keras_transformer.training.checkpoints import prune_checkpoints, rng_variables, verify_checkpoint
from tests.training.tasks import TINY, weights_of

CONFIG = TransformerConfig(vocab_size=20, **TINY, dropout_rate=0.1)


def new_model():
    return build_model(CONFIG, "float32", TrainingOptions(), 1, "auto")


def randomise(model, seed):
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(size=w.shape).astype(w.dtype) for w in model.get_weights()])


@pytest.mark.backend
def test_save_and_restore_round_trip_with_optimizer_and_rng(tmp_path):
    model = new_model()
    randomise(model, 0)
    model.optimizer.iterations.assign(7)
    for variable in rng_variables(model):
        variable.assign(np.array([5, 9], dtype=variable.dtype))
    path = save_checkpoint(model, tmp_path, step=7, epoch=1)
    assert os.path.basename(path) == "ckpt-0000000007.weights.h5"
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]

    restored = new_model()
    metadata = restore_checkpoint(restored, latest_checkpoint(tmp_path))
    assert metadata["step"] == 7 and metadata["epoch"] == 1
    assert int(restored.optimizer.iterations) == 7
    for a, b in zip(weights_of(model), weights_of(restored)):
        np.testing.assert_array_equal(a, b)
    assert rng_variables(restored) and all(
        np.array_equal(keras.ops.convert_to_numpy(v), [5, 9]) for v in rng_variables(restored)
    )


def test_damaged_checkpoints_are_detected_and_skipped(tmp_path):
    model = new_model()
    for step in (1, 2, 3, 4):
        save_checkpoint(model, tmp_path, step=step, epoch=step)
    ckpts = {c.step: c for c in list_checkpoints(tmp_path)}
    # 4: truncated (a partial write); 3: bytes changed; 2: metadata unreadable.
    with open(ckpts[4].weights_path, "r+b") as f:
        f.truncate(100)
    with open(ckpts[3].weights_path, "r+b") as f:
        f.seek(500)
        f.write(b"\xff" * 16)
    with open(ckpts[2].metadata_path, "w") as f:
        f.write("{not json")
    assert "wrong size" in verify_checkpoint(ckpts[4])
    assert "SHA-256" in verify_checkpoint(ckpts[3])
    assert "unreadable metadata" in verify_checkpoint(ckpts[2])
    messages = []
    with pytest.warns(UserWarning, match="Falling back"):
        assert latest_checkpoint(tmp_path, log=messages.append).step == 1
    assert len(messages) == 3 and "step 4 is unusable" in messages[0]


def test_weights_without_metadata_are_not_a_checkpoint_and_pruning_keeps_the_newest(tmp_path):
    model = new_model()
    for step in (1, 2, 3):
        save_checkpoint(model, tmp_path, step=step, epoch=step)
    # A crash between the two renames leaves weights without metadata,
    # a crash mid-write a temporary file.
    model.save_weights(os.path.join(tmp_path, "ckpt-0000000009.weights.h5"))
    open(os.path.join(tmp_path, ".tmp-abc.weights.h5"), "wb").close()
    assert latest_checkpoint(tmp_path).step == 3
    prune_checkpoints(tmp_path, keep=2)
    assert [c.step for c in list_checkpoints(tmp_path)] == [2, 3]
    assert not os.path.exists(os.path.join(tmp_path, "ckpt-0000000001.weights.h5"))
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp-")]
    assert latest_checkpoint(tmp_path / "missing") is None


@pytest.mark.backend
def test_average_equals_numpy_mean_of_the_last_n(tmp_path):
    model = new_model()
    saved = []
    for step in (1, 2, 3, 4):
        randomise(model, step)
        save_checkpoint(model, tmp_path, step=step, epoch=step)
        saved.append(weights_of(model))
    output = tmp_path / "average.weights.h5"
    paths = average_checkpoints(tmp_path, output, last=3)
    assert [os.path.basename(p)[5:15] for p in paths] == ["0000000002", "0000000003", "0000000004"]
    with h5py.File(output, "r") as f:
        assert "optimizer" not in f
    averaged = Transformer(**CONFIG.__dict__)
    averaged.build(((None, None), (None, None)))
    averaged.load_weights(output)
    for i, weight in enumerate(weights_of(averaged)):
        expected = np.mean([saved[k][i].astype("float64") for k in (1, 2, 3)], axis=0)
        np.testing.assert_allclose(weight, expected, rtol=1e-6, atol=1e-7)

    # The command line writes the same file.
    assert main(["average-checkpoints", str(tmp_path), "--last", "3", "--output", str(tmp_path / "cli.weights.h5")]) == 0
    with h5py.File(output, "r") as a, h5py.File(tmp_path / "cli.weights.h5", "r") as b:
        def same(name, item):
            if isinstance(item, h5py.Dataset):
                np.testing.assert_array_equal(item[()], b[name][()])
        a.visititems(same)

    # Explicit files; bad arguments are clear errors.
    average_checkpoints(paths[:1], tmp_path / "one.weights.h5")
    with pytest.raises(ValueError, match=".weights.h5"):
        average_checkpoints(tmp_path, tmp_path / "average.h5")
    with pytest.raises(FileNotFoundError, match="No intact checkpoint"):
        average_checkpoints(tmp_path / "empty", tmp_path / "x.weights.h5")


def test_written_files_get_the_mode_of_the_umask(tmp_path):
    # `mkstemp` makes 0o600 files; checkpoints and averages are meant to be shared like any file.
    umask = os.umask(0o027)
    try:
        weights = save_checkpoint(new_model(), tmp_path, step=1, epoch=1)
        average_checkpoints(tmp_path, tmp_path / "average.weights.h5", last=1)
    finally:
        os.umask(umask)
    for name in (weights, tmp_path / "ckpt-0000000001.json", tmp_path / "average.weights.h5"):
        assert os.stat(name).st_mode & 0o777 == 0o640
