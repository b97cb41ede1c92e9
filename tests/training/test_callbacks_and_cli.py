"""The non-finite loss guard, BLEU, the manifest, and the command line."""

import json
import os

import keras
import pytest

from keras_transformer.cli import build_parser, main
from keras_transformer.models.config import TransformerConfig
from keras_transformer.training import (
    BleuCallback,
    CheckpointAndRestore,
    NonFiniteLossGuard,
    RunMismatchError,
    TrainingOptions,
    build_model,
    claim_output_dir,
    list_checkpoints,
)
from tests.training.tasks import TINY


@pytest.fixture(scope="module")
def model():
    return build_model(TransformerConfig(vocab_size=20, **TINY), "float32", TrainingOptions(), 1, "auto")


def test_non_finite_loss_stops_training_and_writes_no_checkpoint(model, tmp_path):
    messages = []
    guard = NonFiniteLossGuard(batches_per_step=2, log=messages.append)
    saver = CheckpointAndRestore(tmp_path, checkpoint_every=2, batches_per_step=2, log=messages.append)
    for callback in (guard, saver):
        callback.set_model(model)
    model.stop_training = False
    saver.on_epoch_begin(0)
    for batch, loss in enumerate([2.0, 1.9, 1.8, float("nan")]):
        guard.on_train_batch_end(batch, {"loss": loss})
        saver.on_train_batch_end(batch, {"loss": loss})
    assert model.stop_training and guard.stopped_at == 2
    assert "Non-finite loss (nan) at step 2" in messages[0] and "stopping training (not skipping" in messages[0]
    saver.on_epoch_end(0, {"loss": float("nan")})
    assert "Not writing a checkpoint" in messages[-1] and not list_checkpoints(tmp_path)
    saver.on_epoch_begin(1)
    saver.on_train_batch_end(0, {"loss": 1.0})
    saver.on_epoch_end(1, {"loss": 1.0})  # stopped after 1 of 4 batches
    assert "stopped after 1 of 4 batches" in messages[-1] and not list_checkpoints(tmp_path)
    model.stop_training = False


def test_bleu_callback_scores_translations():
    sources = ["a b c d", "e f g h"]
    references = ["a b c d", "e f g h"]
    logs = {}
    messages = []
    BleuCallback(lambda batch: list(batch), sources, references, log=messages.append).on_epoch_end(0, logs)
    assert logs["val_bleu"] == pytest.approx(100.0) and "validation BLEU 100.00" in messages[0]
    bad = BleuCallback(lambda batch: ["x y z w"] * len(batch), sources, references, every=2)
    skipped = {}
    bad.on_epoch_end(0, skipped)
    assert "val_bleu" not in skipped
    bad.on_epoch_end(1, skipped)
    assert skipped["val_bleu"] < 1.0
    with pytest.raises(ValueError, match="one reference per source"):
        BleuCallback(list, sources, references[:1])


def test_run_manifest(tmp_path):
    run = {"model": {"d_model": 16}, "seed": 0}
    assert claim_output_dir(tmp_path, run) == "new"
    assert claim_output_dir(tmp_path, run) == "resume"
    with pytest.raises(RunMismatchError, match=r"different seed"):
        claim_output_dir(tmp_path, {**run, "seed": 1})
    os.makedirs(tmp_path / "checkpoints")
    open(tmp_path / "checkpoints" / "ckpt-0000000001.json", "w").close()
    assert claim_output_dir(tmp_path, {**run, "seed": 1}, overwrite=True) == "new"
    assert not os.path.exists(tmp_path / "checkpoints")
    assert json.load(open(tmp_path / "run.json"))["identity"]["seed"] == 1
    stray = tmp_path / "stray"
    os.makedirs(stray / "checkpoints")
    open(stray / "checkpoints" / "ckpt-0000000001.json", "w").close()
    with pytest.raises(RunMismatchError, match="checkpoints but no run manifest"):
        claim_output_dir(stray, run)


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "train" in text and "average-checkpoints" in text
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--tokens-per-batch" in capsys.readouterr().out
    assert set(build_parser()._subparsers._group_actions[0].choices) == {"train", "average-checkpoints", "export", "translate", "evaluate", "serve"}


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the CLI trains on the default backend")
def test_cli_trains_a_tiny_model_and_resumes(tmp_path, capsys):
    def argv(steps, *extra):
        return [
            "train", "--corpus", "synthetic-reverse", "--preset", "tiny", "--output-dir", str(tmp_path),
            "--set", "num_layers=1", "--set", "d_model=16", "--set", "num_heads=2", "--set", "d_ff=32",
            "--train-steps", str(steps), "--checkpoint-every", "1", "--batch-size", "16", "--verbose", "0",
            *extra,
        ]

    assert main(argv(2)) == 0
    assert [c.step for c in list_checkpoints(tmp_path / "checkpoints")] == [1, 2]
    assert keras.saving.load_model(tmp_path / "model.keras").transformer_config.d_model == 16
    manifest = json.load(open(tmp_path / "run.json"))["identity"]
    assert manifest["model"]["d_model"] == 16 and manifest["label_smoothing"] == 0.1
    try:
        import tensorboard  # noqa: F401

        assert os.listdir(tmp_path / "logs")
    except ImportError:
        assert "Not writing TensorBoard logs" in capsys.readouterr().out
    assert main(argv(3)) == 0  # a longer run of the same run resumes
    assert [c.step for c in list_checkpoints(tmp_path / "checkpoints")] == [1, 2, 3]
    assert "Resumed from" in capsys.readouterr().out
    with pytest.raises(RunMismatchError):
        main(argv(3, "--seed", "3"))


def test_cli_errors_are_one_line_and_an_invalid_config_claims_no_directory(tmp_path, monkeypatch, capsys):
    # As the process's command line: a message and status, no traceback.
    missing = str(tmp_path / "missing")
    monkeypatch.setattr("sys.argv", ["keras-transformer", "translate", missing, "Hello."])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == f"keras-transformer translate: error: No model folder at {missing!r}"
    # From Python the exception itself; and a config that fails validation
    # leaves no run behind that a corrected command would then refuse.
    argv = ["train", "--corpus", "synthetic-copy", "--preset", "tiny", "--output-dir", str(tmp_path / "run"),
            "--train-steps", "1", "--checkpoint-every", "1", "--verbose", "0"]
    with pytest.raises(ValueError, match="d_model"):
        main(argv + ["--set", "d_model=0"])
    assert not os.path.exists(tmp_path / "run")
