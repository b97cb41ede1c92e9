import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import Transformer

# `backend` (also on JAX and PyTorch): the model's weights, inputs and
# cache. Masks, causality and mixed precision are checked against NumPy
# layer by layer on every backend (tests/layers); here on TensorFlow. Its
# config, `.keras` files, symbolic calls and mixed precision on every
# backend: tests/layers/test_public_layers.py. The `backend` tests call
# the model on ids of the same shapes where they can: on JAX each eager op
# compiles once for each shape.

TINY = dict(vocab_size=50, num_layers=2, d_model=16, num_heads=4, d_ff=32, max_length=32)


def ids(batch, length, vocab=50, low=4):
    return np.random.randint(low, vocab, size=(batch, length)).astype("int32")


def analytic_parameter_count(vocab_size, num_layers, d_model, d_ff, **_):
    attention = 4 * (d_model * d_model + d_model)
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    norm = 2 * d_model
    encoder = attention + feed_forward + 2 * norm
    decoder = 2 * attention + feed_forward + 3 * norm
    return vocab_size * d_model + num_layers * (encoder + decoder)


@pytest.mark.backend
def test_separate_vocabularies_and_learned_positions_add_their_weights():
    model = Transformer(**TINY, target_vocab_size=30, learned_positions=True)
    model.build(((None, None), (None, None)))
    expected = analytic_parameter_count(**TINY) + 30 * 16 + 2 * 32 * 16
    assert model.count_params() == expected
    out = model((ids(2, 5), ids(2, 4, vocab=30)))
    assert out.shape == (2, 4, 30)


def test_logits_shape_and_causality():
    model = Transformer(**TINY)
    source, target = ids(2, 7), ids(2, 6)
    logits = ops.convert_to_numpy(model((source, target)))
    assert logits.shape == (2, 6, 50)
    for i in range(6):
        changed = target.copy()
        changed[:, i + 1 :] = ids(2, 6)[:, i + 1 :]
        changed[:, i + 1 :] = np.where(changed[:, i + 1 :] == target[:, i + 1 :], 4, changed[:, i + 1 :])
        new = ops.convert_to_numpy(model((source, changed)))
        np.testing.assert_allclose(new[:, : i + 1], logits[:, : i + 1], atol=1e-5)
        if i < 5:
            assert not np.allclose(new[:, i + 1 :], logits[:, i + 1 :])


def test_source_padding_is_masked():
    model = Transformer(**TINY)
    source, target = ids(2, 5), ids(2, 4)
    logits = ops.convert_to_numpy(model((source, target)))
    padded = np.concatenate([source, np.zeros((2, 3), "int32")], axis=1)
    np.testing.assert_allclose(ops.convert_to_numpy(model((padded, target))), logits, atol=1e-5)
    # Padding one sentence of a batch to the length of a longer one.
    short = source.copy()
    short[1, 3:] = 0
    alone = ops.convert_to_numpy(model((short[1:, :3], target[1:])))
    batched = ops.convert_to_numpy(model((short, target)))[1:]
    np.testing.assert_allclose(batched, alone, atol=1e-5)


def test_target_padding_leaves_real_positions_unchanged():
    model = Transformer(**TINY)
    source, target = ids(1, 5), ids(1, 4)
    logits = ops.convert_to_numpy(model((source, target)))
    padded = np.concatenate([target, np.zeros((1, 3), "int32")], axis=1)
    np.testing.assert_allclose(ops.convert_to_numpy(model((source, padded)))[:, :4], logits, atol=1e-5)


@pytest.mark.backend
def test_cached_decoding_equals_full_pass():
    model = Transformer(**TINY)
    source, target = ids(2, 5), ids(2, 4)
    source[1, 3:] = 0
    full = ops.convert_to_numpy(model((source, target)))
    memory = model.encode(source)
    mask = ops.not_equal(source, 0)
    cache = model.init_cache(memory, max_length=8)
    for i in range(4):
        step, cache = model.decode(target[:, i : i + 1], None, mask, cache=cache, cache_update_index=i)
        np.testing.assert_allclose(ops.convert_to_numpy(step)[:, 0], full[:, i], atol=1e-5)


def test_cross_attention_weights_for_plots():
    model = Transformer(**TINY)
    source, target = ids(1, 6), ids(1, 3)
    source[0, 4:] = 0
    memory = model.encode(source)
    logits, weights = model.decode(target, memory, ops.not_equal(source, 0), return_attention_scores=True)
    assert len(weights) == 2 and weights[0].shape == (1, 4, 3, 6)
    w = ops.convert_to_numpy(weights[-1])
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
    assert np.all(w[..., 4:] < 1e-7)


def test_summary_shows_every_layers_output_shape():
    lines = []
    Transformer(**TINY).summary(print_fn=lambda line, **kwargs: lines.append(line))
    rows = [line for line in "\n".join(lines).split("\n") if "(None, None, 16)" in line]
    assert len(rows) == 4 + 2 * 2 and "?" not in "\n".join(lines)  # embedding, positions, dropout, layers


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.function's traces")
def test_plain_fit_traces_its_training_step_once():
    # Left alone, Keras' TensorFlow trainer makes the optimizer's variables
    # inside the first traced step, and tf.function traces it a second time
    # (keras_transformer/compat/training.py).
    model = Transformer(**dict(TINY, num_layers=1))
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    traced, step = [], model.train_step
    model.train_step = lambda data: traced.append(data) or step(data)
    model.fit((ids(4, 5), ids(4, 6)), ids(4, 6), batch_size=2, epochs=2, verbose=0)
    assert len(traced) == 1 and model.optimizer.iterations.numpy() == 4


@pytest.mark.backend
def test_numpy_integer_sizes_are_accepted_as_ints():
    model = Transformer(**{k: np.int64(v) for k, v in TINY.items()})
    assert model((ids(2, 5), ids(2, 4))).shape == (2, 4, 50)
    assert all(type(model.get_config()[k]) is int for k in TINY)


@pytest.mark.backend
def test_cache_longer_than_max_length_is_refused():
    model = Transformer(**TINY)
    memory = model.encode(ids(2, 5))
    with pytest.raises(ValueError, match=r"max_length.*\[1, 32\].*33"):
        model.init_cache(memory, 33)


@pytest.mark.backend
def test_token_ids_are_integers_in_the_vocabulary():
    model = Transformer(**TINY)
    source, target = ids(2, 5), ids(2, 4)
    expected = ops.convert_to_numpy(model((source, target)))
    # Any integer dtype is cast.
    np.testing.assert_array_equal(ops.convert_to_numpy(model((source.astype("int64"), target.astype("int16")))),
                                  expected)
    # Float ids are refused: their fractions would be cut.
    with pytest.raises(TypeError, match="`source_ids` must hold integer token ids.*float32"):
        model((source + 0.5, target))
    # Ids outside the vocabulary are refused where they hold values.
    with pytest.raises(ValueError, match=r"`target_ids` must hold token ids in \[0, 50\).*from -3 to"):
        model((source, np.where(target == target[0, 0], -3, target)))
    with pytest.raises(ValueError, match=r"`source_ids` must hold token ids in \[0, 50\).* to 50"):
        model.encode(np.where(source == source[0, 0], 50, source))
    # Keras builds a model under a tf.distribute strategy from a batch
    # averaged across replicas, whose ids are float32, by calling it in its
    # shape inference (the trainer's `_symbolic_build`), which takes them.
    from keras.src.backend import compute_output_spec

    floats = keras.KerasTensor((2, 5), "float32"), keras.KerasTensor((2, 4), "float32")
    assert compute_output_spec(model, floats).shape == (2, 4, 50)
    # Float ids are refused in a traced function too (last: on JAX, an
    # error inside `predict` leaves the model's variables without values).
    symbolic = keras.Input((None,), dtype="float32"), keras.Input((None,), dtype="int32")
    with pytest.raises(TypeError, match="`source_ids` must hold integer token ids.*float32"):
        keras.Model(symbolic, model(symbolic)).predict((source.astype("float32"), target), verbose=0)


@pytest.mark.backend
def test_wrong_inputs_give_clear_errors():
    model = Transformer(**TINY)
    with pytest.raises(ValueError, match="source_ids"):
        model((ids(2, 5)[0], ids(2, 4)))
    with pytest.raises(TypeError, match="integer token ids.*bool"):
        model((ids(2, 5) > 9, ids(2, 4)))
    with pytest.raises(ValueError, match="source_ids, target_input_ids"):
        model(ids(2, 5))
    with pytest.raises(ValueError, match="max_length"):
        model((ids(1, 33), ids(1, 4)))
    with pytest.raises(ValueError, match=r"same batch size.*\(3, 5\).*\(2, 4\)"):
        model((ids(3, 5), ids(2, 4)))


def test_mixed_precision_keeps_float32_layer_norm_statistics():
    # (Logits close to float32's: tests/layers/test_public_layers.py.)
    half = Transformer(**TINY, dtype="mixed_bfloat16")
    # Inside the model the LayerNorms' inputs are about N(0, 1), whose bf16
    # statistics are as good as float32 ones; on 1000 + N(0, 1) bf16 ones
    # would be off by up to 2 standard deviations (bf16's spacing at 1000 is
    # 4). Float32 statistics leave the output's rounding to bf16 (relative
    # 2^-8; the bound is twice that, with 1e-3 for float32's own error).
    norms = [
        norm
        for block in half.encoder_layers + half.decoder_layers
        for norm in (block.self_attention_norm, getattr(block, "cross_attention_norm", None), block.feed_forward_norm)
        if norm is not None
    ]
    assert len(norms) == 2 * 2 + 2 * 3
    x = (1000.0 + np.random.normal(size=(2, 5, 16))).astype("float32")
    for norm in norms:
        assert keras.backend.standardize_dtype(norm.compute_dtype) == "bfloat16"
        normalized = ops.convert_to_numpy(ops.cast(norm(x), "float32"))
        gamma, beta = (ops.convert_to_numpy(w).astype("float64") for w in (norm.gamma, norm.beta))
        centred = x.astype("float64") - x.mean(-1, keepdims=True, dtype="float64")
        reference = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + norm.epsilon) * gamma + beta
        np.testing.assert_allclose(normalized, reference, rtol=2**-7, atol=1e-3)


def test_quantize_freezes_older_objects_out_of_keras_collections_and_restores_the_collector(monkeypatch):
    """`Transformer.quantize` runs Keras' quantization with the objects that
    existed before frozen (`gc.freeze`), so that Keras' collection per
    dropped weight walks only new ones; afterwards nothing stays frozen,
    also when Keras raises, and a caller's own freeze is left as it was."""
    import gc

    seen = []
    collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *args: seen.append(gc.get_freeze_count()) or collect(*args))

    def tiny():
        return Transformer(vocab_size=50, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=16)

    model = tiny()
    assert gc.get_freeze_count() == 0
    model.quantize("int8")
    # Keras' collections (one per dropped weight, many), each with the older
    # objects frozen, then ours, after the unfreeze.
    assert len(seen) > 2 and all(count > 0 for count in seen[:-1]) and seen[-1] == 0, seen
    assert gc.get_freeze_count() == 0
    assert all(layer.quantization_mode == "int8" for layer in model.embedding._flatten_layers())

    with pytest.raises(ValueError):
        tiny().quantize("int3")
    assert gc.get_freeze_count() == 0

    mine = [["an object the caller froze"]]
    gc.freeze()
    try:
        tiny().quantize("int8")
        # Still frozen: frozen objects are out of `gc.get_objects()`.
        assert not any(o is mine for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is mine for o in gc.get_objects())
