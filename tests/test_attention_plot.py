import numpy as np
import pytest

from keras_transformer import Transformer
from keras_transformer.translation.attention_plot import cross_attention_weights, plot_attention


def test_cross_attention_weights_are_distributions_over_real_source_tokens():
    model = Transformer(vocab_size=30, num_layers=2, d_model=16, num_heads=4, d_ff=32)
    weights = cross_attention_weights(model, [5, 6, 7, 3, 0, 0], [2, 9, 10])
    assert weights.shape == (4, 3, 6)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert np.all(weights[..., 4:] < 1e-7)


SOURCE, TARGET = ["▁Hi", "▁there", ".", "</s>"], ["<s>", "▁Salut", "."]


def test_head_draws_that_head_alone_and_none_the_mean_and_every_head(tmp_path):
    import matplotlib.image

    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3))  # (heads, target, source)

    def drawn(w, head, name):
        path = plot_attention(w, SOURCE, TARGET, tmp_path / name, head=head)
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
        return matplotlib.image.imread(path)

    head_0_changed, head_1_changed = weights.copy(), weights.copy()
    head_0_changed[0], head_1_changed[1] = weights[0, :, ::-1], weights[1, :, ::-1]
    one = drawn(weights, 1, "one.png")
    np.testing.assert_array_equal(one, drawn(head_0_changed, 1, "other_head.png"))  # only head 1 is drawn
    assert not np.array_equal(one, drawn(head_1_changed, 1, "this_head.png"))
    every = drawn(weights, None, "every.png")  # three panels: the mean, head 0 and head 1
    assert every.shape[0] == one.shape[0] and every.shape[1] > 2.5 * one.shape[1]
    assert not np.array_equal(every, drawn(head_0_changed, None, "every_other.png"))


def test_mismatched_tokens_are_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="target"):
        plot_attention(np.ones((2, 3, 4)) / 4, ["a", "b"], ["x"], tmp_path / "a.png")
    with pytest.raises(ValueError, match="head"):
        plot_attention(np.ones((2, 1, 2)) / 2, ["a", "b"], ["x"], tmp_path / "a.png", head=5)
