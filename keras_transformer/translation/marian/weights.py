"""Our model's config and weights of a Marian model (`Checkpoint`), with NumPy.

Each difference from the paper's Transformer is a config field of ours
(`TransformerConfig`), which the readers set from the source's config:
the sinusoids' layout, the feed-forward activation, the layer norm's
epsilon, pre- or post-norm, the encoder's and decoder's depths and widths,
embedding scaling. Here: one embedding matrix or a source and a target
one, the output projection tied to the target embedding or its own, the
output bias (`final_logits_bias`, `decoder_ff_logit_out_b`), and the rows
of every table in our id order (`vocabulary.permutation`).
"""

import numpy as np

from keras_transformer.tokens import BOS_ID, PAD_ID
from keras_transformer.translation.marian.vocabulary import permutation


def _rows(table, order):
    """`table`'s rows in our `order`; -1: a row of zeros."""
    rows = table[np.maximum(order, 0)].astype(np.float32)
    rows[order < 0] = 0.0
    return rows


def config(checkpoint):
    """Our `TransformerConfig`'s fields of a `Checkpoint`, as a dict."""
    fields, tables = dict(checkpoint.config), checkpoint.tables
    if fields.get("num_decoder_layers") == fields["num_layers"]:
        fields["num_decoder_layers"] = None
    if fields.get("decoder_d_ff") == fields["d_ff"]:
        fields["decoder_d_ff"] = None
    separate = tables["target_embedding"] is not tables["embedding"]
    return dict(
        fields, vocab_size=len(permutation(checkpoint.source_pieces, checkpoint.special[0])),
        target_vocab_size=len(permutation(checkpoint.target_pieces, checkpoint.special[1])) if separate else None,
        tie_output_embeddings=tables["output_embedding"] is tables["target_embedding"],
        output_bias=tables["output_bias"] is not None, suppressed_ids=[PAD_ID, BOS_ID],
    )


def assign(model, checkpoint):
    """Sets the weights of `model`, a `Transformer` of `config(checkpoint)`,
    to the checkpoint's, in our id order."""
    source_order = permutation(checkpoint.source_pieces, checkpoint.special[0])
    target_order = permutation(checkpoint.target_pieces, checkpoint.special[1])
    for name, pieces in (("embedding", checkpoint.source_pieces), ("target_embedding", checkpoint.target_pieces),
                         ("output_embedding", checkpoint.target_pieces), ("output_bias", checkpoint.target_pieces)):
        table = checkpoint.tables[name]
        if table is not None and len(table) != len(pieces):
            raise ValueError(f"The source's {name.replace('_', ' ')} has {len(table)} rows and its vocabulary "
                             f"{len(pieces)} pieces.")
    _assign(model, checkpoint, source_order, target_order)


def _set(variable, value, name):
    if tuple(variable.shape) != tuple(value.shape):
        raise ValueError(f"The source's {name} has shape {tuple(value.shape)}; the model expects "
                         f"{tuple(variable.shape)}")
    variable.assign(np.asarray(value, dtype=np.float32))


def _assign(model, checkpoint, source_order, target_order):
    tables = checkpoint.tables
    _set(model.embedding.embeddings, _rows(tables["embedding"], source_order), "source embedding")
    if model.target_embedding is not None:
        _set(model.target_embedding.embeddings, _rows(tables["target_embedding"], target_order), "target embedding")
    if model.output_embedding is not None:
        _set(model.output_embedding.embeddings, _rows(tables["output_embedding"], target_order), "output projection")
    if model.output_bias is not None:
        _set(model.output_bias, _rows(tables["output_bias"][:, None], target_order)[:, 0], "output bias")
    for stack in ("encoder", "decoder"):
        ours = model.encoder_layers if stack == "encoder" else model.decoder_layers
        if len(ours) != len(checkpoint.layers[stack]):
            raise ValueError(f"The source has {len(checkpoint.layers[stack])} {stack} layers; the model "
                             f"{len(ours)}")
        for i, (layer, weights) in enumerate(zip(ours, checkpoint.layers[stack])):
            _assign_layer(layer, weights, f"{stack} layer {i}")
        norm = getattr(model, f"{stack}_norm")
        if norm is not None:
            _set(norm.gamma, checkpoint.layers[f"{stack}_norm"][0], f"{stack} norm")
            _set(norm.beta, checkpoint.layers[f"{stack}_norm"][1], f"{stack} norm")


def _dense(dense, parts, name):
    """Sets a Dense from `(kernel (in, out), bias)` parts side by side."""
    _set(dense.kernel, np.concatenate([w for w, _ in parts], axis=1), name + " kernel")
    _set(dense.bias, np.concatenate([b for _, b in parts]), name + " bias")


def _assign_layer(layer, weights, where):
    attentions = ["self_attention"] + (["cross_attention"] if "cross_attention/q" in weights else [])
    for name in attentions:
        attention = getattr(layer, name)
        q, k, v = (weights[f"{name}/{p}"] for p in "qkv")
        if attention.cross_attention:
            _dense(attention.query_dense, [q], f"{where} {name} query")
            _dense(attention.key_value_dense, [k, v], f"{where} {name} keys and values")
        else:
            _dense(attention.query_key_value_dense, [q, k, v], f"{where} {name} queries, keys and values")
        _dense(attention.output_dense, [weights[f"{name}/o"]], f"{where} {name} output")
    for name in attentions + ["feed_forward"]:
        norm = getattr(layer, f"{name}_norm")
        _set(norm.gamma, weights[f"{name}_norm"][0], f"{where} {name} norm")
        _set(norm.beta, weights[f"{name}_norm"][1], f"{where} {name} norm")
    _dense(layer.feed_forward.inner, [weights["feed_forward/inner"]], f"{where} feed-forward inner")
    _dense(layer.feed_forward.outer, [weights["feed_forward/outer"]], f"{where} feed-forward outer")


# ------------------------------------------------------------------ our tokenizer
