"""`train` on your own files, and the run directory as a preset that
`Translator.from_preset`, `translate` (streaming), `evaluate` and `export`
take as it is, and that `preset` averages.

The own-files run learns a toy English->French task from a TSV it is given:
each sentence "the [ADJ] ANIMAL VERB the THING." becomes "le ANIMAL [ADJ]
VERB la THING." word by word. Its validation sentences are combinations the
training file never holds, so translating them right is learning the words,
not recalling the sentences.
"""

import contextlib
import gzip
import io
import itertools
import json
import math
import os
import random
import re

import keras
import numpy as np
import pytest

from keras_transformer import SubwordTokenizer, Transformer, Translator
from keras_transformer.cli import main, parse_arguments
from keras_transformer.cli.common import CHUNK_BATCHES
from keras_transformer.training.training_data import read_files
from keras_transformer.evaluation import corpus_bleu
from keras_transformer.training.checkpoints import file_sha256

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the CLI trains on the default backend")

ADJECTIVES = {"big": "grand", "small": "petit", "old": "vieux", "young": "jeune", "black": "noir", "white": "blanc"}
ANIMALS = {"cat": "chat", "dog": "chien", "bird": "oiseau", "horse": "cheval", "wolf": "loup", "bear": "ours"}
VERBS = {"sees": "voit", "likes": "aime", "wants": "veut", "eats": "mange", "finds": "trouve"}
THINGS = {"apple": "pomme", "house": "maison", "door": "porte", "table": "table", "chair": "chaise", "car": "voiture"}
ARCHITECTURE = ["--architecture", "tiny", "--set", "num_layers=1", "--set", "d_model=32", "--set", "num_heads=2",
                "--set", "d_ff=64", "--set", "max_length=128"]


def _pair(adjective, animal, verb, thing):
    english = ["the", *([adjective] if adjective else []), animal, verb, "the", thing]
    french = ["le", ANIMALS[animal], *([ADJECTIVES[adjective]] if adjective else []), VERBS[verb], "la", THINGS[thing]]
    return " ".join(english) + ".", " ".join(french) + "."


def _write_tsv(path, pairs):
    path.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """`(run_dir, validation pairs, fit output)`: the tiny architecture
    trained from the command line on 2,000 pairs of a TSV file."""
    folder = tmp_path_factory.mktemp("own_files")
    combinations = list(itertools.product([None, *ADJECTIVES], ANIMALS, VERBS, THINGS))
    random.Random(0).shuffle(combinations)
    held_out, seen = combinations[:200], combinations[200:]
    train = seen + random.Random(1).sample(seen, 2000 - len(seen))
    valid = [_pair(*c) for c in held_out]
    _write_tsv(folder / "train.tsv", [_pair(*c) for c in train])
    _write_tsv(folder / "valid.tsv", valid)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        assert main([
            "train", "--train-file", str(folder / "train.tsv"), "--valid-file", str(folder / "valid.tsv"),
            *ARCHITECTURE, "--output-dir", str(folder / "run"), "--vocab-size", "300", "--train-steps", "300",
            "--checkpoint-every", "100", "--warmup-steps", "100", "--tokens-per-batch", "1024",
            "--tokens-per-step", "1024", "--fit-verbose", "2", "--no-tensorboard",
        ]) == 0
    return folder / "run", valid, output.getvalue()


@pytest.fixture(scope="module")
def translations(run):
    """The greedy translations of the validation sources by `Translator.from_preset(run_dir)`."""
    run_dir, valid, _ = run
    return Translator.from_preset(run_dir, beam_size=1).translate([source for source, _ in valid])


def test_a_run_on_a_tsv_file_learns_and_its_directory_is_a_preset(run, translations):
    run_dir, valid, output = run
    losses = [float(x) for x in re.findall(r"val_loss: ([0-9.]+)", output)]
    assert len(losses) == 3 and losses[-1] < losses[0] < math.log(300), output  # an untrained model: about log(300)
    right = [sum(a == b for a, b in zip(t.split(), target.split())) / len(target.split())
             for t, (_, target) in zip(translations, valid)]
    assert np.mean(right) > 0.8, list(zip(translations, valid))[:5]  # measured 0.95; chance: about 0.1

    # evaluate --tsv scores the same translations.
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        assert main(["evaluate", str(run_dir), "--tsv", str(run_dir.parent / "valid.tsv"), "--beam-size", "1",
                     "--limit", "50"]) == 0
    bleu = corpus_bleu(translations[:50], [[target] for _, target in valid[:50]])[0]
    assert f"{bleu}" in output.getvalue()

    # export takes the run as it is (a preset), or as a run folder with other weights.
    from keras_transformer.cli.export import load_model_and_tokenizer

    model, tokenizer, metadata = load_model_and_tokenizer(parse_arguments(["export", str(run_dir), "--output-dir", "x"]))
    train_file = run_dir.parent / "train.tsv"
    assert metadata["data"]["train_file"] == [["train.tsv", os.path.getsize(train_file), file_sha256(train_file)]]
    for got, want in zip(model.get_weights(), Transformer.from_preset(run_dir).get_weights()):
        np.testing.assert_array_equal(got, want)
    first = run_dir / "checkpoints" / "ckpt-0000000100.weights.h5"
    model, tokenizer, _ = load_model_and_tokenizer(
        parse_arguments(["export", str(run_dir), "--weights", str(first), "--output-dir", "x"]))
    assert tokenizer.model_proto == (run_dir / "tokenizer.model").read_bytes()  # the run's own
    assert not np.array_equal(model.get_weights()[0], Transformer.from_preset(run_dir).get_weights()[0])


def test_the_preset_command_writes_the_mean_of_the_runs_last_checkpoints(run, tmp_path):
    run_dir = run[0]
    checkpoints = [run_dir / "checkpoints" / f"ckpt-{step:010d}.weights.h5" for step in (200, 300)]
    model = Transformer.from_preset(run_dir)
    weights = []
    for path in checkpoints:
        model.load_weights(path)
        weights.append([np.asarray(w, np.float64) for w in model.get_weights()])
    mean = [(a + b) / 2 for a, b in zip(*weights)]
    card = tmp_path / "card.md"
    card.write_text("# My model\n\nTrained on my pairs: « été », 😀.\n", encoding="utf-8")
    for dtype, tolerance in (("float32", 1e-6), ("float16", 1e-3)):
        out = tmp_path / f"preset_{dtype}"
        assert main(["preset", str(run_dir), "--average", "2", "--weights-dtype", dtype, "--output", str(out),
                     "--model-card", str(card)]) == 0
        assert (out / "README.md").read_text(encoding="utf-8") == card.read_text(encoding="utf-8")
        for got, want in zip(Transformer.from_preset(out).get_weights(), mean):
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
        assert open(out / "tokenizer.model", "rb").read() == open(run_dir / "tokenizer.model", "rb").read()
        metadata = json.load(open(out / "metadata.json"))
        assert metadata["averaged_checkpoints"] == [p.name for p in checkpoints]
        assert metadata["data"] == json.load(open(run_dir / "run.json"))["identity"]["data"]
        assert metadata["weights_dtype"] == dtype
    with pytest.raises(FileNotFoundError, match="run_dir.*no run.json"):
        main(["preset", str(tmp_path), "--output", str(tmp_path / "x")])
    last = (run_dir / "model.weights.h5").read_bytes()
    with pytest.raises(ValueError, match=r"`--output` is a training run's directory, whose last weights"):
        main(["preset", str(run_dir), "--output", str(run_dir)])
    assert (run_dir / "model.weights.h5").read_bytes() == last
    with pytest.raises(ValueError, match="--average.*Received: --average=0"):
        main(["preset", str(run_dir), "--average", "0", "--output", str(tmp_path / "x")])


def test_the_learned_tokenizer_keeps_characters_it_never_saw(run):
    tokenizer = SubwordTokenizer.from_preset(run[0])
    text = "le chat 😀 voit la Ωmega жизнь."
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    assert 1 not in ids  # no unknown piece: UTF-8 byte pieces instead
    assert "<0xF0>" in tokenizer.id_to_piece(ids)  # the emoji's first byte


def test_translate_streams_a_long_file_in_order_holding_one_chunk(run, translations, tmp_path, monkeypatch):
    """50,000 lines through `translate --input --output`: as many lines out,
    in order, and never more than one chunk read ahead of what is written.
    The lines are the 200 validation sources in a random order, so each
    chunk translates each of them once."""
    from keras_transformer.cli import translate as command

    run_dir, valid, _ = run
    sources = [source for source, _ in valid]
    expected = dict(zip(sources, translations))
    rng = random.Random(2)
    lines = [rng.choice(sources) for _ in range(50_000)]
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    counts = {"read": 0, "written": 0, "ahead": 0}

    class Reading(io.BufferedReader):
        def __next__(self):
            counts["read"] += 1
            return super().__next__()

    class Writing(io.TextIOWrapper):
        def writelines(self, translations):
            counts["ahead"] = max(counts["ahead"], counts["read"] - counts["written"])
            translations = list(translations)
            counts["written"] += len(translations)
            super().writelines(translations)

    def spying_open(path, mode="r", **kwargs):
        if mode == "rb":  # the progress bar's count of lines first, then the lines read
            counts["read"] = 0
            return Reading(io.FileIO(path, "rb"))
        return Writing(io.FileIO(path, "w"), **kwargs)

    monkeypatch.setattr(command, "open", spying_open, raising=False)
    assert main(["translate", str(run_dir), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.txt"),
                 "--beam-size", "1", "--batch-size", "1024"]) == 0
    out = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    assert len(out) == len(lines) and counts["written"] == len(lines)
    same = sum(o == expected[line] for o, line in zip(out, lines))
    assert same >= 0.99 * len(lines), same  # out of order, about 1 in 200 would match
    # Memory: one chunk read ahead at most (+1: the line that ends a chunk's read).
    assert 0 < counts["ahead"] <= CHUNK_BATCHES * 1024 + 1, counts


@pytest.mark.parametrize(
    "files, error",
    [
        ({"train.tsv": b"a cat\tun chat\na dog un chien\n"}, r"train.tsv:2: line without a tab"),
        ({"train.tsv": b"a cat\tun chat\na dog\t \n"}, r"train.tsv:2: pair with an empty side"),
        ({"train.tsv": b"a cat\tun chat\na caf\xe9\tun caf\xc3\xa9\n"}, r"train.tsv:2: invalid UTF-8"),
        ({"train.en": b"a cat\na dog\n", "train.fr": b"un chat\n"}, r"train.en:2: misaligned line"),
        ({"train.tsv": b"a cat\tun chat\n", "valid.tsv": b"a dog\n"}, r"valid.tsv:1: line without a tab"),
    ],
)
def test_a_bad_line_names_its_file_and_line_and_leaves_the_run_directory_as_it_was(tmp_path, files, error):
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("mine")
    train = [str(tmp_path / n) for n in files if n.startswith("train")]
    valid = [str(tmp_path / n) for n in files if n.startswith("valid")]
    argv = ["train", "--train-file", *train, *ARCHITECTURE, "--output-dir", str(run_dir), "--vocab-size", "300",
            "--train-steps", "1", "--checkpoint-every", "1", "--fit-verbose", "0", "--no-tensorboard"]
    with pytest.raises(ValueError, match=error + ".*--skip-bad-lines"):
        main(argv + (["--valid-file", *valid] if valid else []))
    assert os.listdir(run_dir) == ["notes.txt"]


def test_aligned_files_read_as_the_tsv_of_their_lines(tmp_path):
    pairs = [_pair(*c) for c in itertools.islice(itertools.product(ADJECTIVES, ANIMALS, VERBS, THINGS), 50)]
    _write_tsv(tmp_path / "pairs.tsv", pairs)
    (tmp_path / "pairs.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    with gzip.open(tmp_path / "pairs.fr.gz", "wt", encoding="utf-8") as f:
        f.writelines(t + "\n" for _, t in pairs)
    assert read_files([tmp_path / "pairs.en", tmp_path / "pairs.fr.gz"]) == read_files([tmp_path / "pairs.tsv"]) == pairs


def test_skipping_bad_lines_counts_them(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(b"a cat\tun chat\nno tab\n\t\na dog\tun chien\nbad \xff\tx\n")
    messages = []
    assert read_files([path], skip_bad_lines=True, log=messages.append) == [("a cat", "un chat"), ("a dog", "un chien")]
    assert re.search(r"2 pairs read; skipped 1 empty line, 1 invalid UTF-8, 1 line without a tab \(first: .*pairs.tsv:2",
                     messages[0]), messages


@pytest.mark.parametrize(
    "extra, error",
    [
        (["--corpus", "tatoeba_en_fr"], "Give one of --corpus .* and --train-file"),
        (["--from-preset", "tatoeba_en_fr", "--architecture", "tiny"], "--architecture comes from the preset"),
        (["--from-preset", "tatoeba_en_fr", "--vocab-size", "500"], "--vocab-size comes from the preset"),
        (["--valid-file", "missing.tsv"], "--valid-file: no such file.*missing.tsv"),
        # Found before the data is read: not Keras' "objects could not be loaded" after it.
        (["--from-preset", "tatoeba_en_fr", "--set", "num_layers=3"],
         r"--set changes the shapes of the weights of --from-preset 'tatoeba_en_fr'.*Received: --set num_layers=3"),
        (["--architecture", "tiny", "--tokens-per-batch", "64"],
         r"--tokens-per-batch 64 cannot hold 1 pair\(s\) of 128 tokens.*--set max_length=N"),
    ],
)
def test_data_arguments_that_do_not_go_together_are_named(tmp_path, extra, error):
    _write_tsv(tmp_path / "train.tsv", [("a cat", "un chat")])
    with pytest.raises((ValueError, FileNotFoundError), match=error):
        main(["train", "--train-file", str(tmp_path / "train.tsv"), "--output-dir", str(tmp_path / "run"), *extra])
    assert not os.path.exists(tmp_path / "run")


def test_pairs_longer_than_the_models_max_length_are_left_out(tmp_path, monkeypatch):
    """`--set max_length=16`: the batches `train` gets hold no longer pair
    (the model would refuse it mid-run)."""
    import keras_transformer.training

    pairs = [_pair(*c) for c in itertools.islice(itertools.product(ADJECTIVES, ANIMALS, VERBS, THINGS), 300)]
    pairs += [(" ".join([source] * 4), " ".join([target] * 4)) for source, target in pairs[:10]]  # about 40 tokens
    _write_tsv(tmp_path / "train.tsv", pairs)
    got = {}

    def train(config, train_data, *args, **kwargs):
        got["config"], got["data"] = config, train_data
        raise KeyboardInterrupt  # stop before training

    monkeypatch.setattr(keras_transformer.training, "train", train)
    with pytest.raises(KeyboardInterrupt):
        main(["train", "--train-file", str(tmp_path / "train.tsv"), *ARCHITECTURE, "--set", "max_length=16",
              "--output-dir", str(tmp_path / "run"), "--vocab-size", "500", "--tokens-per-batch", "512",
              "--fit-verbose", "0"])
    assert got["config"].max_length == 16
    widths = {int(source.shape[1]) for (source, _), _ in got["data"].take(40)}
    assert widths and max(widths) <= 16, widths
