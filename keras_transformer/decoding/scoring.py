"""Forced decoding: the model's log-probabilities of given output tokens.

`force_decode` runs the decoder once over a whole given output (teacher
forcing), which scores it, as CTranslate2's `score_batch` does, and reads
its cross-attention, from which `keras_transformer.translation.alignment` aligns
words. Decoding computes the same numbers one step at a time: for the
tokens a sampler chose, the summed log-probabilities are those it scored.
"""

from keras import ops

from keras_transformer.decoding.common import check_source_ids, ensure_built, log_softmax, suppressed_mask
from keras_transformer.tokens import BOS_ID, PAD_ID


def scoring_limits(max_length):
    """`(source, target)`: the most tokens a scored source and target hold,
    EOS included, in a model of `max_length`: the decoder's input is BOS
    and the target but its last token, so a target holds one less."""
    return max_length, max_length - 1


def force_decode(model, source_ids, target_ids, attention_layer=None, bos_id=BOS_ID):
    """Log-probabilities of `target_ids` given `source_ids`.

    Args:
        model: a `Transformer` (`encode` and `decode`).
        source_ids: int `(batch, source_length)`, packed (EOS last), padded with 0.
        target_ids: int `(batch, target_length)`: the outputs, EOS
            included where they end with one, padded with 0.
        attention_layer: None, or the index of the decoder layer whose
            cross-attention to return (negative counts from the last).
        bos_id: the decoder's first input.

    Returns:
        float32 `(batch, target_length)`, each token's log-probability (0
        at padding); with `attention_layer`, also float32 `(batch,
        target_length, source_length)`: the layer's cross-attention, the
        mean of its heads, at the step that predicts each target token.
    """
    source_ids, target_ids = check_source_ids(source_ids), check_source_ids(target_ids)
    ensure_built(model)
    batch = ops.shape(target_ids)[0]
    # The decoder input: BOS, then each target but the last. (batch, T)
    inputs = ops.concatenate([ops.full((batch, 1), bos_id, dtype="int32"), target_ids[:, :-1]], axis=1)
    memory = model.encode(source_ids)  # (batch, source_length, d_model)
    source_mask = ops.not_equal(source_ids, PAD_ID)  # (batch, source_length)
    outputs = model.decode(inputs, memory, source_mask, return_attention_scores=attention_layer is not None)
    logits = outputs[0] if attention_layer is not None else outputs
    log_probs = log_softmax(logits, suppressed_mask(model))  # (batch, T, vocab): position t predicts target t
    chosen = ops.take_along_axis(log_probs, target_ids[:, :, None], axis=-1)[:, :, 0]  # (batch, T)
    chosen = ops.where(ops.not_equal(target_ids, PAD_ID), chosen, 0.0)
    if attention_layer is None:
        return chosen
    attention = outputs[1][attention_layer]  # (batch, heads, T, source_length)
    return chosen, ops.mean(ops.cast(attention, "float32"), axis=1)  # (batch, T, source_length)
