"""The non-finite loss guard, BLEU, the manifest, and the command line."""

import argparse
import errno
import json
import os
import re
import tempfile

import keras
import numpy as np
import pytest

from keras_transformer import LabelSmoothedCrossEntropy, Transformer
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
    latest_checkpoint,
    list_checkpoints,
)
from keras_transformer.training.manifest import check_output_dir
from tests.training.tasks import TINY, copy_task


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


def test_non_finite_loss_guard_stops_the_fit_at_its_first_non_finite_loss_and_keeps_the_finite_checkpoints(tmp_path):
    # The loss is nan at step NAN_STEP, and only there: whatever the
    # machine's rounding, the fit stops at that step, after the checkpoints
    # of the finite steps before it. One step per epoch, so that every step
    # can be checkpointed. (Non-finite weights after a finite loss: the
    # test below.)
    NAN_STEP = 4
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=20, **TINY, dropout_rate=0.0)
    smoothed = LabelSmoothedCrossEntropy()

    def loss(labels, logits):
        value = smoothed(labels, logits)
        done = model.optimizer.iterations  # the steps before this one
        return keras.ops.where(keras.ops.equal(done, NAN_STEP - 1), keras.ops.cast(float("nan"), value.dtype), value)

    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    messages = []

    class Record(keras.callbacks.Callback):
        """The loss of every step, and the weights at the end of every epoch."""

        def __init__(self):
            super().__init__()
            self.losses, self.weights = [], []

        def on_train_batch_end(self, batch, logs=None):
            self.losses.append(float(logs["loss"]))

        def on_epoch_end(self, epoch, logs=None):
            self.weights.append([np.array(w) for w in self.model.get_weights()])

    guard, record = NonFiniteLossGuard(log=messages.append), Record()
    saver = CheckpointAndRestore(tmp_path, checkpoint_every=1, keep=100, log=messages.append)
    inputs, labels = copy_task(16)
    model.fit(inputs, labels, batch_size=16, epochs=20, callbacks=[saver, guard, record], verbose=0)

    assert len(record.losses) == NAN_STEP == guard.stopped_at == int(model.optimizer.iterations)
    assert np.isfinite(record.losses[:-1]).all() and np.isnan(record.losses[-1])
    assert f"Non-finite loss (nan) at step {NAN_STEP} of this run: stopping training" in "\n".join(messages)
    assert messages[-1] == f"Not writing a checkpoint for epoch {NAN_STEP}: its loss is nan."
    assert [c.step for c in list_checkpoints(tmp_path)] == list(range(1, NAN_STEP))
    restored = Transformer(vocab_size=20, **TINY, dropout_rate=0.0)
    restored.load_weights(latest_checkpoint(tmp_path).weights_path)
    for weight, expected in zip(restored.get_weights(), record.weights[NAN_STEP - 2]):
        np.testing.assert_array_equal(weight, expected)


def test_no_checkpoint_of_non_finite_weights_after_a_finite_loss(tmp_path):
    model = Transformer(vocab_size=20, **TINY)
    model.build(((None, None), (None, None)))
    model.compile(optimizer="sgd", loss=LabelSmoothedCrossEntropy())
    messages = []
    saver = CheckpointAndRestore(tmp_path, checkpoint_every=1, log=messages.append)
    saver.set_model(model)
    saver.on_epoch_begin(0)
    saver.on_train_batch_end(0, {"loss": 3.0})
    saver.on_epoch_end(0, {"loss": 3.0})
    assert [c.step for c in list_checkpoints(tmp_path)] == [1]
    weights = model.get_weights()
    weights[3] = np.full_like(weights[3], np.inf)
    model.set_weights(weights)
    saver.on_epoch_begin(1)
    saver.on_train_batch_end(0, {"loss": 2.0})
    saver.on_epoch_end(1, {"loss": 2.0})
    assert [c.step for c in list_checkpoints(tmp_path)] == [1]
    assert re.fullmatch(r"Not writing a checkpoint for epoch 2: 1 weights are not finite \(the first: .+\)\.",
                        messages[-1]), messages


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


def test_run_manifest_names_the_differing_key_a_damaged_manifest_and_a_file(tmp_path):
    run = {"model": {"d_model": 16}, "data": {"corpus": "a", "vocab_size": 20}, "seed": 0}
    claim_output_dir(tmp_path, run)
    assert os.stat(tmp_path / "run.json").st_mode & 0o777 == 0o666 & ~_umask()
    with pytest.raises(RunMismatchError, match=r"different data.corpus\)"):
        claim_output_dir(tmp_path, {**run, "data": {"corpus": "b", "vocab_size": 20}})
    # Only the keys known so far, before the model is: resume, or another run.
    assert check_output_dir(tmp_path, {"data": run["data"]}, partial=True) == "resume"
    with pytest.raises(RunMismatchError, match="data.vocab_size"):
        check_output_dir(tmp_path, {"data": {"corpus": "a", "vocab_size": 30}}, partial=True)
    for text in ("", "[1, 2]"):
        (tmp_path / "run.json").write_text(text)
        with pytest.raises(RunMismatchError, match="run.json is not a run manifest"):
            claim_output_dir(tmp_path, run)
    assert claim_output_dir(tmp_path, run, overwrite=True) == "new"
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        claim_output_dir(tmp_path / "file", run)


def test_a_new_run_writes_its_files_before_its_manifest(tmp_path):
    old = {"data": {"corpus": "a"}, "seed": 0}
    claim_output_dir(tmp_path, old)
    (tmp_path / "tokenizer.model").write_text("a's")
    run = {"data": {"corpus": "b"}, "seed": 0}

    def crash(directory):
        assert not os.path.exists(os.path.join(directory, "run.json"))  # a's manifest is gone first
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        claim_output_dir(tmp_path, run, overwrite=True, write_run_files=crash)
    # No manifest beside a's tokenizer: nothing resumes with it.
    assert check_output_dir(tmp_path, {"data": run["data"], "seed": 0}, partial=True) == "new"
    written = []
    assert claim_output_dir(tmp_path, run, write_run_files=written.append) == "new"
    assert claim_output_dir(tmp_path, run, write_run_files=written.append) == "resume"
    assert written == [tmp_path]  # once, for the new run


def test_a_manifest_from_before_the_data_was_recorded_resumes(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"identity": {"model": {"d_model": 16}, "seed": 0}}))
    run = {"model": {"d_model": 16}, "data": {"corpus": "a"}, "seed": 0}
    assert check_output_dir(tmp_path, {"data": run["data"], "seed": 0}, partial=True) == "resume"
    assert claim_output_dir(tmp_path, run) == "resume"
    with pytest.raises(RunMismatchError, match="different seed"):
        claim_output_dir(tmp_path, {**run, "seed": 1})


def test_resuming_in_a_directory_that_cannot_be_written_fails_before_training(tmp_path, monkeypatch):
    run = {"seed": 0}
    claim_output_dir(tmp_path, run)

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    with pytest.raises(OSError, match="is not writable: .*Read-only"):
        claim_output_dir(tmp_path, run)
    assert claim_output_dir(tmp_path, run, write=False) == "resume"  # a worker that writes nothing


def _umask():
    umask = os.umask(0)
    os.umask(umask)
    return umask


def test_cli_help_gives_every_default():
    # Each option that has a default (not unset: None, False, []) shows it
    # in its command's --help as "(default: X)", X the value argparse parsed.
    for name, parser in build_parser().commands.items():
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if not action.option_strings or action.default is argparse.SUPPRESS:
                continue
            assert action.help, f"{name} {action.option_strings[0]} has no help"
            if action.default is None or action.default is False or action.default == []:
                continue
            assert f"(default: {action.default})" in text, (name, action.option_strings, action.help)
    serve = " ".join(build_parser().commands["serve"].format_help().split())
    assert "(default: 127.0.0.1)" in serve


# The `train` command's own rules (its options reach the run, a rerun
# resumes, the run's identity, fine-tuning a preset) do not depend on the
# backend: `portable`, run once, on PyTorch (tests/run.sh). Its files and
# the tf.data pipeline of the TensorFlow backend:
# tests/training/test_own_files.py.
@pytest.mark.portable
def test_cli_training_options_reach_the_run(tmp_path, capsys):
    # 4 steps of two batches each, a checkpoint a step, the newest 2 kept,
    # a validation pass every second checkpoint, bfloat16 computation and a
    # label smoothing of 0.2.
    options = ["--train-steps", "4", "--gradient-accumulation-steps", "2", "--keep-checkpoints", "2",
               "--validate-every", "2", "--precision", "mixed_bfloat16", "--label-smoothing", "0.2",
               "--fit-verbose", "2"]
    assert main(_tiny_argv(tmp_path, "synthetic-copy", *options)) == 0
    out = capsys.readouterr().out
    assert re.search(r"Training new run in .*: .*, mixed_bfloat16, jit_compile=\w+, 2 batch\(es\) per step", out), out
    identity = json.load(open(tmp_path / "run.json"))["identity"]
    assert (identity["precision"], identity["label_smoothing"], identity["optimizer"]["gradient_accumulation_steps"]) == (
        "mixed_bfloat16", 0.2, 2)
    assert [c.step for c in list_checkpoints(tmp_path / "checkpoints")] == [3, 4]
    # Keras' epoch lines (verbose 2): each of 2 batches, val_loss on epochs 2 and 4 only.
    epochs = re.findall(r"^Epoch (\d)/4\n(.*)$", out, re.M)
    assert [epoch for epoch, _ in epochs] == ["1", "2", "3", "4"], out
    assert [("val_loss" in line, line.startswith("2/2 ")) for _, line in epochs] == [(False, True), (True, True)] * 2


@pytest.mark.portable
def test_cli_trains_a_tiny_model_resumes_and_warns_while_it_learns_nothing(tmp_path, capsys, recwarn):
    # A learning rate of almost 0: from step 4 (twice the warm-up) the loss
    # is still above that of predicting the tokens by their frequency,
    # without label smoothing here (tokens that never occur: 0 log 0). A
    # checkpoint every 3 steps: the warning comes at the end of the shorter
    # second interval, at step 4.
    def argv(steps, *extra, corpus="synthetic-reverse"):
        return [
            "train", "--corpus", corpus, "--architecture", "tiny", "--output-dir", str(tmp_path),
            "--set", "num_layers=1", "--set", "d_model=16", "--set", "num_heads=2", "--set", "d_ff=32",
            "--train-steps", str(steps), "--checkpoint-every", "3", "--batch-size", "16", "--fit-verbose", "0",
            "--warmup-steps", "2", "--learning-rate-scale", "1e-9", "--label-smoothing", "0", *extra,
        ]

    assert main(argv(4)) == 0
    out = capsys.readouterr().out
    [warning] = [line for line in out.splitlines() if line.startswith("Warning")]
    assert re.match(r"Warning: at step 4 the training loss, [0-9.]+, is not 0.5 below [0-9]\.[0-9]+, the loss of", warning)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]  # no 0 * log 0
    assert [c.step for c in list_checkpoints(tmp_path / "checkpoints")] == [3, 4]
    assert Transformer.from_preset(tmp_path).transformer_config.d_model == 16  # the run's last weights
    manifest = json.load(open(tmp_path / "run.json"))["identity"]
    assert manifest["model"]["d_model"] == 16 and manifest["label_smoothing"] == 0.0
    assert manifest["checkpoint_every"] == 3
    try:
        import tensorboard  # noqa: F401

        assert os.listdir(tmp_path / "logs")
    except ImportError:
        assert "Not writing TensorBoard logs" in out
    assert main(argv(5)) == 0  # a longer run of the same run resumes
    assert [c.step for c in list_checkpoints(tmp_path / "checkpoints")] == [3, 4, 5]
    assert "Resumed from" in capsys.readouterr().out
    with pytest.raises(RunMismatchError, match=r"different seed\)"):
        main(argv(3, "--seed", "3"))
    with pytest.raises(RunMismatchError, match=r"different data.corpus\)"):  # a run on another corpus is another run
        main(argv(3, corpus="synthetic-copy"))


def test_cli_errors_are_one_line_and_an_invalid_config_claims_no_directory(tmp_path, monkeypatch, capsys):
    # As the process's command line: a message and status, no traceback.
    missing = str(tmp_path / "missing")
    monkeypatch.setattr("sys.argv", ["keras-transformer", "translate", missing, "Hello."])
    with pytest.raises(SystemExit) as exit_:
        main()
    message = exit_.value.code
    assert message.startswith(f"keras-transformer translate: error: No model at {missing!r}: expected a shipped preset")
    assert "\n" not in message and message.endswith(f"Received: model={missing!r}")
    # From Python the exception itself; and a config that fails validation
    # leaves no run behind that a corrected command would then refuse.
    argv = ["train", "--corpus", "synthetic-copy", "--architecture", "tiny", "--output-dir", str(tmp_path / "run"),
            "--train-steps", "1", "--checkpoint-every", "1", "--fit-verbose", "0"]
    with pytest.raises(ValueError, match="d_model"):
        main(argv + ["--set", "d_model=0"])
    assert not os.path.exists(tmp_path / "run")


def _tiny_argv(output_dir, corpus, *extra):
    return [
        "train", "--corpus", corpus, "--architecture", "tiny", "--output-dir", str(output_dir),
        "--set", "num_layers=1", "--set", "d_model=16", "--set", "num_heads=2", "--set", "d_ff=32",
        "--train-steps", "1", "--checkpoint-every", "1", "--batch-size", "16", "--fit-verbose", "0", "--no-tensorboard",
        *extra,
    ]


# A strategy this backend refuses: --strategy reaches `select_strategy`.
REFUSED_STRATEGY = "mirrored" if keras.backend.backend() == "jax" else "data-parallel"


@pytest.mark.parametrize(
    "extra, error, message",
    [
        (["--strategy", REFUSED_STRATEGY], ValueError, f"'{REFUSED_STRATEGY}'"),
        (["--set", "foo=1"], ValueError, "unknown model field 'foo'"),
        (["--set", "vocab_size=50"], ValueError, "use --vocab-size"),
        (["--set", "d_model"], ValueError, "FIELD=VALUE"),
        # train()'s arguments, named as the command's flags (cli.in_flag_terms).
        (["--vocab-size", "0"], ValueError, "`--vocab-size` must be >= 4 .* Received: --vocab-size=0"),
        (["--batch-size", "257"], ValueError, r"at most the number of examples \(256\). Received: --batch-size=257"),
    ],
)
def test_cli_bad_arguments_are_named_and_leave_no_run(tmp_path, extra, error, message):
    with pytest.raises(error, match=message):
        main(_tiny_argv(tmp_path / "run", "synthetic-copy", *extra))
    assert not os.path.exists(tmp_path / "run")


def test_cli_output_dir_that_is_a_file_or_holds_a_damaged_manifest(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("")
    for output_dir, message in ((tmp_path / "file", "is not a directory"), (tmp_path / "run", "run.json is not a run manifest")):
        monkeypatch.setattr("sys.argv", ["keras-transformer", *_tiny_argv(output_dir, "synthetic-copy")])
        with pytest.raises(SystemExit) as exit_:
            main()
        assert str(exit_.value.code).startswith("keras-transformer train: error: ") and message in str(exit_.value.code)
    with pytest.raises(SystemExit):
        main(_tiny_argv(tmp_path / "other", "synthetic-copy", "--fit-verbose", "abc"))
    assert "argument --fit-verbose: invalid choice" in capsys.readouterr().err


@pytest.mark.portable
def test_cli_vocabulary_size_is_part_of_the_run_and_the_tokenizer_is_written_once_checked(tmp_path, monkeypatch):
    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer

    pairs = datasets.load("tatoeba_en_fr", "validation")[:300]
    monkeypatch.setattr(datasets, "load", lambda name, split: pairs)
    run = tmp_path / "run"

    def argv(vocab_size, *extra):
        return _tiny_argv(run, "tatoeba_en_fr", "--vocab-size", str(vocab_size), "--tokens-per-batch", "512",
                          "--tokens-per-step", "512", *extra)

    refused = {
        "`--warmup-steps` must be a positive integer. Received: --warmup-steps=0": ["--warmup-steps", "0"],
        "`d_model` must be even. Received: d_model=15": ["--set", "d_model=15"],
    }
    for message, bad in refused.items():
        with pytest.raises(ValueError, match=re.escape(message)):
            main(argv(400, *bad))
    assert not os.path.exists(run)
    assert main(argv(400)) == 0
    assert SubwordTokenizer.load(run).vocab_size == 400
    with pytest.raises(RunMismatchError, match=r"different data.vocab_size\)"):
        main(argv(450))
    tokenizer = (run / "tokenizer.model").read_bytes()
    assert main(argv(400)) == 0  # the same run: resumed (finished: nothing more to train), its tokenizer as it was
    assert (run / "tokenizer.model").read_bytes() == tokenizer
    # Another run takes the directory (--overwrite) and is interrupted in
    # its first step: nothing of the old run's model stays beside the new
    # run's tokenizer, for `translate` or `evaluate` to take.
    assert {"config.json", "model.weights.h5", "metadata.json"} <= set(os.listdir(run))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    fit = keras.Model.fit
    monkeypatch.setattr(keras.Model, "fit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(argv(450, "--overwrite"))
    monkeypatch.setattr(keras.Model, "fit", fit)
    assert sorted(os.listdir(run)) == ["run.json", "tokenizer.model"] and SubwordTokenizer.load(run).vocab_size == 450
    with pytest.raises((SystemExit, ValueError), match="training run without its final model"):  # a run folder, with no model of its own yet
        main(["translate", str(run), "Hello."])
    assert main(argv(450, "--overwrite")) == 0
    assert SubwordTokenizer.load(run).vocab_size == 450
    assert json.load(open(run / "run.json"))["identity"]["data"] == {"corpus": "tatoeba_en_fr", "vocab_size": 450}


@pytest.mark.portable
def test_cli_own_files_with_carriage_return_line_ends_and_their_content_make_the_runs_data(tmp_path, capsys):
    """A TSV file whose lines end in a carriage return alone (old Mac
    files) reads as its lines; a rerun asking for fewer steps than trained
    says so; the same file edited in place, its size the same, is another
    run's data, named by its SHA-256."""
    import hashlib

    from keras_transformer import datasets

    pairs = datasets.load("tatoeba_en_fr", "validation")[:300]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_bytes("".join(f"{source}\t{target}\r" for source, target in pairs).encode("utf-8"))
    run = tmp_path / "run"

    def argv(steps):
        return ["train", "--train-file", str(tsv), "--architecture", "tiny", "--set", "num_layers=1", "--set",
                "d_model=16", "--set", "num_heads=2", "--set", "d_ff=32", "--output-dir", str(run), "--vocab-size",
                "400", "--tokens-per-batch", "512", "--tokens-per-step", "512", "--train-steps", str(steps),
                "--checkpoint-every", "1", "--fit-verbose", "0", "--no-tensorboard"]

    assert main(argv(2)) == 0
    assert "300 pairs kept;" in capsys.readouterr().out
    [[name, size, sha256]] = json.load(open(run / "run.json"))["identity"]["data"]["train_file"]
    assert (name, size, sha256) == ("pairs.tsv", tsv.stat().st_size, hashlib.sha256(tsv.read_bytes()).hexdigest())
    assert main(argv(1)) == 0
    assert ("Nothing to train: the run is at step 2, past train_steps=1, and keeps the weights of step 2."
            in capsys.readouterr().out)
    tsv.write_bytes("".join(f"{target}\t{source}\r" for source, target in pairs).encode("utf-8"))  # French->English
    assert tsv.stat().st_size == size
    with pytest.raises(RunMismatchError, match=r"different data.train_file\)"):
        main(argv(3))


@pytest.mark.portable
def test_cli_a_checkpoint_that_does_not_fit_on_the_disk_is_an_error_that_writes_nothing(tmp_path, monkeypatch, capsys):
    # The disk is full once the first checkpoint is written (as
    # `os.statvfs` tells); tests/training/test_distributed.py fills the
    # process's file size limit.
    run = tmp_path / "run"
    argv = _tiny_argv(run, "synthetic-copy", "--train-steps", "2")
    statvfs = os.statvfs

    def full_after_the_first_checkpoint(path):
        stat = list(statvfs(path))
        if (run / "checkpoints" / "ckpt-0000000001.json").exists():
            stat[3] = stat[4] = 0  # f_bfree, f_bavail
        return os.statvfs_result(stat)

    monkeypatch.setattr(os, "statvfs", full_after_the_first_checkpoint)
    with pytest.raises(OSError, match=r"No space left on device for checkpoint .*ckpt-0000000002.weights.h5: it "
                                      r"takes about [0-9.]+ MiB, and .* has 0.0 MiB free") as error:
        main(argv)
    assert error.value.errno == errno.ENOSPC
    assert sorted(os.listdir(run / "checkpoints")) == ["ckpt-0000000001.json", "ckpt-0000000001.weights.h5"]
    monkeypatch.setattr(os, "statvfs", statvfs)
    capsys.readouterr()
    assert main(argv) == 0
    assert "ckpt-0000000001.weights.h5: step 1, skipping 1 consumed batches" in capsys.readouterr().out
    assert [c.step for c in list_checkpoints(run / "checkpoints")] == [1, 2]


FINE_TUNING = """\
The frobnicator is ready.\tLe frobnicateur est prêt.
Where is the frobnicator?\tOù est le frobnicateur ?
I bought a frobnicator.\tJ'ai acheté un frobnicateur.
The frobnicator is broken.\tLe frobnicateur est cassé.
"""


@pytest.mark.portable
@pytest.mark.slow
def test_fine_tuning_a_preset_from_the_command_line_teaches_it_a_new_word(tmp_path):
    """Four pairs with a word the preset never saw, 3 steps: the run's
    preset uses the word, and still knows French."""
    from keras_transformer import Translator
    from keras_transformer.data import SubwordTokenizer

    (tmp_path / "pairs.tsv").write_text(FINE_TUNING * 8, encoding="utf-8")
    before = Translator.from_preset("tatoeba_en_fr").translate(["The frobnicator is ready."])
    assert "frobnicateur" not in before[0]
    assert main([
        "train", "--from-preset", "tatoeba_en_fr", "--train-file", str(tmp_path / "pairs.tsv"),
        "--output-dir", str(tmp_path / "run"), "--train-steps", "3", "--checkpoint-every", "3", "--warmup-steps", "3",
        "--learning-rate-scale", "0.01", "--tokens-per-batch", "1024", "--tokens-per-step", "1024",
        "--jit-compile", "off", "--fit-verbose", "0", "--no-tensorboard",
    ]) == 0
    assert open(tmp_path / "run" / "tokenizer.model", "rb").read() == SubwordTokenizer.from_preset("tatoeba_en_fr").model_proto
    translator = Translator.from_preset(tmp_path / "run")
    assert translator.translate(["The frobnicator is ready.", "I love you."]) == ["Le frobnicateur est prêt.", "Je t'aime."]
