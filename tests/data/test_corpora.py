"""Corpus readers: bad lines skipped and counted with file and line, strict mode, TFDS."""

import gzip
import zlib

import pytest

from keras_transformer.data import ReadReport, load_wmt14, read_aligned, read_tsv, wmt14_files

BAD_TSV = b"Hello\tBonjour\tCC-BY attribution\n\nno tab here\n\tvide\nbad \xff utf8\tx\nCat\tChat\n"


def test_tsv_reader_skips_and_counts_bad_lines(tmp_path):
    path = tmp_path / "bad.tsv.gz"
    with gzip.open(path, "wb") as f:
        f.write(BAD_TSV)
    report = ReadReport()
    assert list(read_tsv(path, report)) == [("Hello", "Bonjour"), ("Cat", "Chat")]  # attribution column ignored
    assert report.pairs == 2 and report.total_skipped == 4
    assert report.skipped == {"empty line": 1, "line without a tab": 1, "pair with an empty side": 1, "invalid UTF-8": 1}
    assert set(report.examples) == {
        (str(path), 2, "empty line"), (str(path), 3, "line without a tab"),
        (str(path), 4, "pair with an empty side"), (str(path), 5, "invalid UTF-8"),
    }
    assert "bad.tsv.gz:3 line without a tab" in str(report)
    assert list(read_tsv(path, reverse=True))[0] == ("Bonjour", "Hello")


def test_strict_mode_and_missing_files_name_the_place(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_bytes(BAD_TSV)
    with pytest.raises(ValueError, match=r"bad.tsv:2: empty line"):
        list(read_tsv(path, strict=True))
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        list(read_tsv(tmp_path / "missing.tsv"))
    with pytest.raises(FileNotFoundError, match="missing.fr"):
        read_aligned(tmp_path / "bad.tsv", tmp_path / "missing.fr").__next__()


def test_examples_are_capped_per_kind_but_counts_are_full(tmp_path):
    path = tmp_path / "many.tsv"
    path.write_text("no tab\n" * 50 + "a\tb\n" + "\tx\n" * 30, encoding="utf-8")
    report = ReadReport(max_examples=5)
    assert list(read_tsv(path, report)) == [("a", "b")]
    assert report.skipped == {"line without a tab": 50, "pair with an empty side": 30}
    assert len(report.examples) == 10 and report.examples[-1] == (str(path), 56, "pair with an empty side")


def test_aligned_reader_counts_misaligned_lines(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n\nfour\n", encoding="utf-8")
    (tmp_path / "a.fr").write_text("un\ndeux\ntrois\nquatre\ncinq\nsix\n", encoding="utf-8")
    report = ReadReport()
    pairs = list(read_aligned(tmp_path / "a.en", tmp_path / "a.fr", report))
    assert pairs == [("one", "un"), ("two", "deux"), ("four", "quatre")]
    assert report.skipped == {"pair with an empty side": 1, "misaligned line": 2}
    assert (str(tmp_path / "a.fr"), 5, "misaligned line") in report.examples
    (tmp_path / "b.en").write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"a.fr:3: misaligned line"):
        list(read_aligned(tmp_path / "b.en", tmp_path / "a.fr", strict=True))


def test_a_corrupt_gzip_ends_the_file_without_crashing(tmp_path):
    data = gzip.compress(b"".join(b"sentence %d\tphrase %d\n" % (i, i) for i in range(2000)))
    path = tmp_path / "cut.tsv.gz"
    path.write_bytes(data[: len(data) // 2])
    report = ReadReport()
    pairs = list(read_tsv(path, report))
    # Every whole line of the part that decompresses, the cut one left out.
    readable = zlib.decompressobj(wbits=31).decompress(data[: len(data) // 2]).decode()
    whole_lines = readable.split("\n")[:-1]
    assert 0 < len(whole_lines) < 2000
    assert pairs == [tuple(line.split("\t")) for line in whole_lines] and report.skipped == {"unreadable file": 1}
    with pytest.raises(ValueError, match="cut.tsv.gz"):
        list(read_tsv(path, strict=True))


def test_tfds_wmt14_path_with_mock_data():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=5):
        pairs = list(load_wmt14("de-en", source="en", split="train"))
        reverse = list(load_wmt14("de-en", source="de", split="train"))
        streamed = load_wmt14("fr-en", source="en", split="test", as_dataset=True)
        first = next(iter(streamed))
    assert len(pairs) == 5 and all(isinstance(s, str) and isinstance(t, str) for s, t in pairs)
    assert [(t, s) for s, t in pairs] == reverse
    assert first[0].dtype.name == "string" and first[0].shape == ()


def test_tfds_offline_error_says_what_to_place_where(tmp_path, monkeypatch):
    from tensorflow_datasets.core.download import downloader

    def no_network(url, **kwargs):
        raise ConnectionError(f"no network for {url}")

    monkeypatch.setattr(downloader, "_open_url", no_network)  # never touch the network
    manual = str(tmp_path / "manual")
    with pytest.raises(RuntimeError) as error:
        load_wmt14("de-en", data_dir=str(tmp_path / "tfds"), manual_dir=manual)
    message = str(error.value)
    assert f"manual_dir={manual!r}" in message and "tatoeba_en_fr" in message
    for name, url in wmt14_files("de-en"):
        assert name in message and url in message
    assert "training-parallel-europarl-v7.tgz" in message and "dev.tgz" in message


def test_wmt14_arguments_are_checked_at_once():
    with pytest.raises(ValueError, match=r"pair.*xx-en"):
        load_wmt14("xx-en")
    with pytest.raises(ValueError, match=r"source.*'fr'"):
        load_wmt14("de-en", source="fr")
    with pytest.raises(ValueError, match=r"split.*'dev'"):
        load_wmt14("de-en", split="dev")


def test_tsv_columns_are_checked_and_a_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "bom.tsv"
    path.write_bytes(b"\xef\xbb\xbfhello\tbonjour\nnotab\n")
    report = ReadReport()
    assert list(read_tsv(path, report)) == [("hello", "bonjour")]
    assert report.skipped == {"line without a tab": 1}
    for columns in ((0, -1), (1, 1), (0,), (0, 1.0)):
        with pytest.raises(ValueError, match="columns"):
            list(read_tsv(path, columns=columns))
