"""The shipped Tatoeba corpus: splits disjoint by English source, deterministic, references."""

import gzip
import os
import re

import pytest

from keras_transformer import datasets
from tools import build_tatoeba
from keras_transformer.datasets import tatoeba


@pytest.fixture(scope="module")
def splits():
    return {s: datasets.load("tatoeba_en_fr", s) for s in ("train", "validation", "test")}


def card_counts():
    """`{split: (pairs, English sources or None)}` from the corpus card's table."""
    card = os.path.join(os.path.dirname(datasets.__file__), "data", "tatoeba_en_fr", "README.md")
    rows = re.findall(r"^\| `(\w+)\.tsv\.gz` \| ([\d,]+) \| ([\d,]*)", open(card, encoding="utf-8").read(), re.M)
    return {s: (int(p.replace(",", "")), int(n.replace(",", "")) if n else None) for s, p, n in rows}


def test_splits_are_disjoint_by_english_source_and_deterministic(splits):
    counts = card_counts()
    assert {s: len(pairs) for s, pairs in splits.items()} == {s: pairs for s, (pairs, _) in counts.items()}
    assert all(isinstance(p, tuple) and len(p) == 2 and all(p) for p in splits["test"])
    keys = {s: {tatoeba.group_key(e) for e, _ in pairs} for s, pairs in splits.items()}
    assert not keys["train"] & keys["test"] and not keys["train"] & keys["validation"]
    assert not keys["validation"] & keys["test"]
    assert (len(keys["test"]), len(keys["validation"])) == (counts["test"][1], counts["validation"][1])
    assert all(tatoeba.split_of(e) == "test" for e, _ in splits["test"])
    assert datasets.load("tatoeba_en_fr", "test") == splits["test"]


def test_references_group_every_translation_of_a_source(splits):
    sources, references = datasets.load_references("tatoeba_en_fr", "test")
    assert len(sources) == len(references) == card_counts()["test"][1] and max(map(len, references)) > 1
    assert sum(map(len, references)) == len(splits["test"])
    assert sources == list(dict.fromkeys(e for e, _ in splits["test"]))


def test_unknown_names_and_splits_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"tatoeba_en_fr.*wmt99"):
        datasets.load("wmt99")
    with pytest.raises(ValueError, match=r"'train', 'validation', 'test'.*'dev'"):
        datasets.load("tatoeba_en_fr", "dev")


def _synthetic_corpus(path):
    """A full-file stand-in: sentences of every split, two references each."""
    lines, by_split = [], {}
    for i in range(3000):
        english = f"Sentence number {i}."
        by_split.setdefault(tatoeba.split_of(english), []).append(english)
        for j in range(2):
            lines.append(f"{english}\tPhrase {i}-{j}.\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i} & #{j}\n")
    lines.insert(5, "malformed line\n")
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(lines)
    return by_split


def test_full_train_pairs_exclude_validation_and_test_sources(tmp_path):
    path = tmp_path / "full.tsv.gz"
    by_split = _synthetic_corpus(path)
    train = list(datasets.full_train_pairs(str(path)))
    assert {e for e, _ in train} == set(by_split["train"]) and len(train) == 2 * len(by_split["train"])
    assert by_split["test"] and by_split["validation"]


def test_build_writes_the_same_split_rule_with_attribution(tmp_path):
    path = tmp_path / "full.tsv.gz"
    by_split = _synthetic_corpus(path)
    counts = build_tatoeba.build(str(path), str(tmp_path / "out"), shipped_train_below=1000)
    assert counts == {s: 2 * len(by_split[s]) for s in tatoeba.SPLITS}
    with gzip.open(tmp_path / "out" / "test.tsv.gz", "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert all(line.split("\t")[2].startswith("CC-BY 2.0 (France)") for line in lines)
    first = (tmp_path / "out" / "test.tsv.gz").read_bytes()
    build_tatoeba.build(str(path), str(tmp_path / "out"), shipped_train_below=1000)
    assert (tmp_path / "out" / "test.tsv.gz").read_bytes() == first  # byte for byte
    with pytest.raises(FileNotFoundError, match="nope.tsv.gz"):
        build_tatoeba.build(str(tmp_path / "nope.tsv.gz"), str(tmp_path / "out"))


def test_libreoffice_splits_hold_out_whole_help_modules():
    from keras_transformer.datasets import libreoffice

    modules = {}
    for split in libreoffice.SPLITS:
        with gzip.open(datasets.path("libreoffice_en_de", split), "rt", encoding="utf-8") as f:
            modules[split] = {libreoffice.module_of(line.split("\t")[2]) for line in f}
    assert modules["test"] == {"sdatabase"} and modules["validation"] == {"schart", "sdraw"}
    assert not modules["train"] & (modules["test"] | modules["validation"]) and len(modules["train"]) == 5
    pairs = {s: datasets.load("libreoffice_en_de", s) for s in libreoffice.SPLITS}
    assert [len(pairs[s]) for s in libreoffice.SPLITS] == [29_922, 1_264, 1_232]
    assert all(e and g for e, g in pairs["test"])
    with pytest.raises(ValueError, match="ships whole"):
        datasets.full_train_pairs("any.tsv.gz", name="libreoffice_en_de")


def test_libreoffice_build_splits_by_module_byte_for_byte(tmp_path):
    from tools import build_libreoffice

    path = tmp_path / "full.tsv.gz"
    modules = ["shared", "sdatabase", "schart", "sdraw", "scalc"]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(50):
            f.write(f"Line {i}.\tZeile {i}.\tLibreOffice help 7.4 ({modules[i % 5]}), MPL-2.0\n")
        f.write("no tab\n")
    assert build_libreoffice.build(str(path), str(tmp_path / "out")) == {"train": 20, "validation": 20, "test": 10}
    first = (tmp_path / "out" / "test.tsv.gz").read_bytes()
    build_libreoffice.build(str(path), str(tmp_path / "out"))
    assert (tmp_path / "out" / "test.tsv.gz").read_bytes() == first
    with gzip.open(tmp_path / "out" / "test.tsv.gz", "rt", encoding="utf-8") as f:
        assert all("(sdatabase)" in line for line in f)


def test_tatoeba_fr_en_reads_the_same_files_backwards_without_held_out_french(splits):
    reversed_test = datasets.load("tatoeba_fr_en", "test")
    assert reversed_test == [(f, e) for e, f in splits["test"]]
    held_out = {" ".join(f.lower().split()) for pairs in (splits["test"], splits["validation"]) for _, f in pairs}
    train = datasets.load("tatoeba_fr_en", "train")
    assert not {" ".join(f.lower().split()) for f, _ in train} & held_out
    dropped = [(f, e) for e, f in splits["train"] if " ".join(f.lower().split()) in held_out]
    assert dropped and len(train) + len(dropped) == len(splits["train"])
