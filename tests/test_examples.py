"""examples/wmt14.py end to end on the shipped corpus, shortened."""

import os
import runpy

import keras
import pytest


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the example exports a SavedModel: TensorFlow pass")
def test_main_job_trains_evaluates_exports_and_reloads(tmp_path, capsys):
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "wmt14.py")
    module = runpy.run_path(script)
    bleu = module["main"]([
        "--output-dir", str(tmp_path), "--preset", "tiny", "--train-steps", "20", "--checkpoint-every", "10",
        "--tokens-per-batch", "2048", "--test-limit", "24", "--vocab-size", "2000",
    ])
    out = capsys.readouterr().out
    assert 0.0 <= bleu <= 100.0
    assert "nrefs:" in out and "version:" in out  # the sacreBLEU signature
    assert "chrF2" in out
    assert os.path.isfile(tmp_path / "saved_models" / "tatoeba_en_fr" / "1" / "saved_model.pb")
    assert os.path.isfile(tmp_path / "model.keras") and os.path.isfile(tmp_path / "average.weights.h5")
    assert "[reloaded SavedModel]" in out and out.count("  ->  ") == 5


def test_offline_wmt14_gives_the_way_out(tmp_path):
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "wmt14.py")
    module = runpy.run_path(script)
    with pytest.raises(SystemExit, match="manual_dir"):
        module["main"](["--data", "tfds", "--data-dir", str(tmp_path / "tfds"), "--manual-dir", str(tmp_path / "m"), "--output-dir", str(tmp_path)])
