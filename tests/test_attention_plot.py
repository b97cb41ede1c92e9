import numpy as np
import pytest

from keras_transformer import Transformer
from keras_transformer.attention_plot import cross_attention_weights, plot_attention


@pytest.mark.backend
def test_cross_attention_weights_are_distributions_over_real_source_tokens():
    model = Transformer(vocab_size=30, num_layers=2, d_model=16, num_heads=4, d_ff=32)
    weights = cross_attention_weights(model, [5, 6, 7, 3, 0, 0], [2, 9, 10])
    assert weights.shape == (4, 3, 6)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert np.all(weights[..., 4:] < 1e-7)


@pytest.mark.parametrize("head", [None, 1])
def test_plot_is_written_as_a_png(tmp_path, head):
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3))
    path = plot_attention(weights, ["▁Hi", "▁there", ".", "</s>"], ["<s>", "▁Salut", "."], tmp_path / "a.png", head=head)
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    import matplotlib.image

    image = matplotlib.image.imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100
    assert image[..., :3].std() > 0.05  # something was drawn


def test_mismatched_tokens_are_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="target"):
        plot_attention(np.ones((2, 3, 4)) / 4, ["a", "b"], ["x"], tmp_path / "a.png")
    with pytest.raises(ValueError, match="head"):
        plot_attention(np.ones((2, 1, 2)) / 2, ["a", "b"], ["x"], tmp_path / "a.png", head=5)
