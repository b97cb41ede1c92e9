"""A Hugging Face `MarianMTModel` folder, read into a `Checkpoint`:
`config.json` (`"model_type": "marian"`), `model.safetensors` or its shards
(read with NumPy) or `pytorch_model.bin` (read with PyTorch), `vocab.json`
(and `target_vocab.json` for separate vocabularies), `source.spm` and
`target.spm`, and the decoding settings of `generation_config.json`.

`transformers`' Marian is the post-norm Transformer with sinusoids in
halves (`sinusoid_layout="halves"`), torch's layer norm epsilon (1e-5), and
a decoder that starts from PAD, the vocabulary's last id."""

import json
import os

import numpy as np

from keras_transformer.translation.marian.checkpoint import Checkpoint, license_of, read_bytes, refuse, required_file

# HF's activation names, and ours (`layers.feed_forward`).
HF_ACTIVATIONS = {"relu": "relu", "swish": "silu", "silu": "silu", "gelu": "gelu", "gelu_new": "gelu_approximate",
                  "gelu_pytorch_tanh": "gelu_approximate", "gelu_fast": "gelu_approximate",
                  "quick_gelu": "gelu_sigmoid"}


def read(folder, weights=True):
    """The `Checkpoint` of a Hugging Face `MarianMTModel` folder (without
    its tables and layers unless `weights`)."""
    with open(required_file(folder, "config.json"), encoding="utf-8") as f:
        hf = json.load(f)
    where = os.path.join(folder, "config.json")
    for field in ("normalize_before", "normalize_embedding", "add_final_layer_norm", "add_bias_logits"):
        if hf.get(field):
            raise refuse(field, hf[field], "Hugging Face's Marian computes the post-norm Transformer without it, "
                         "so its function is not the model's", where)
    if hf.get("static_position_embeddings", True) is not True:
        raise refuse("static_position_embeddings", hf["static_position_embeddings"], "learned positions", where)
    activation = hf.get("activation_function", "gelu")
    if activation not in HF_ACTIVATIONS:
        raise refuse("activation_function", activation, f"the activations supported are {sorted(HF_ACTIVATIONS)}",
                     where)
    heads = hf.get("encoder_attention_heads", 16), hf.get("decoder_attention_heads", 16)
    if heads[0] != heads[1]:
        raise refuse("decoder_attention_heads", heads[1], f"the encoder has {heads[0]} heads; both stacks must have "
                     "as many", where)
    pad, start = hf.get("pad_token_id"), hf.get("decoder_start_token_id")
    if pad is None or start != pad:
        raise refuse("decoder_start_token_id", start, f"the decoder must start from the pad token ({pad})", where)
    shared = hf.get("share_encoder_decoder_embeddings", True)
    source_pieces = _vocabulary_json(required_file(folder, "vocab.json"))
    target_pieces = source_pieces if shared else _vocabulary_json(required_file(folder, "target_vocab.json"))
    eos = hf.get("eos_token_id", 0)
    for pieces in (source_pieces, target_pieces):
        if not (0 <= pad < len(pieces) and pieces[pad] == "<pad>" and 0 <= eos < len(pieces)):
            raise refuse("pad_token_id", pad, "the pad token must be <pad> in the vocabulary of each side, at the "
                         "same id (the decoder starts from it)", where)
    special = tuple(dict(eos=eos, pad=pad, unk=_unk_id(pieces, folder)) for pieces in (source_pieces, target_pieces))
    for name, pieces in (("vocab_size", source_pieces), ("decoder_vocab_size", target_pieces)):
        if hf.get(name, len(pieces)) != len(pieces) and not (name == "decoder_vocab_size" and shared):
            raise refuse(name, hf[name], f"the vocabulary file has {len(pieces)} pieces", where)
    tables = layers = None
    if weights:
        weights = read_weights(folder)
        tables = _hf_tables(weights, shared, hf.get("tie_word_embeddings", True), folder)
        layers = {
            "encoder": [_hf_layer(weights, f"model.encoder.layers.{i}.", False) for i in range(hf["encoder_layers"])],
            "decoder": [_hf_layer(weights, f"model.decoder.layers.{i}.", True) for i in range(hf["decoder_layers"])],
            "encoder_norm": None, "decoder_norm": None,
        }
    config = dict(
        num_layers=hf["encoder_layers"], num_decoder_layers=hf["decoder_layers"], d_model=hf["d_model"],
        num_heads=heads[0], d_ff=hf["encoder_ffn_dim"], decoder_d_ff=hf["decoder_ffn_dim"],
        dropout_rate=float(hf.get("dropout", 0.1)), attention_dropout_rate=float(hf.get("attention_dropout", 0.0)),
        max_length=int(hf.get("max_position_embeddings", 1024)), activation=HF_ACTIVATIONS[activation],
        layer_norm_epsilon=1e-5,  # torch.nn.LayerNorm's
        norm_first=False, sinusoid_layout="halves", scale_embeddings=bool(hf.get("scale_embedding", False)),
    )
    spm = (read_bytes(required_file(folder, "source.spm")), read_bytes(required_file(folder, "target.spm")))
    info = dict(format="Hugging Face MarianMTModel", generation=_generation_settings(folder, hf),
                license=license_of(folder))
    return Checkpoint(config, source_pieces, target_pieces, special, tables, layers, spm, info)


def _vocabulary_json(path):
    """The pieces of a `vocab.json` (piece -> id), in id order."""
    with open(path, encoding="utf-8") as f:
        mapping = json.load(f)
    pieces = [None] * len(mapping)
    for piece, index in mapping.items():
        if not isinstance(index, int) or not 0 <= index < len(pieces) or pieces[index] is not None:
            raise ValueError(f"{path!r} must map each piece to a distinct id in [0, {len(pieces)}). "
                             f"Received: {piece!r}: {index!r}")
        pieces[index] = piece
    return pieces


def _unk_id(pieces, where):
    if "<unk>" not in pieces:
        raise ValueError(f"The vocabulary of {where!r} has no <unk> piece.")
    return pieces.index("<unk>")


def _generation_settings(folder, hf):
    """The source's own decoding settings (generation_config.json, else config.json)."""
    path = os.path.join(folder, "generation_config.json")
    settings = hf
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            settings = json.load(f)
    return {k: settings[k] for k in ("num_beams", "length_penalty", "max_length", "bad_words_ids") if k in settings}


def read_weights(folder):
    """A Hugging Face folder's tensors by name, as float32 NumPy arrays:
    `model.safetensors` (or its shards) with NumPy, else `pytorch_model.bin`
    with PyTorch."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        return {k: v for shard in shards for k, v in read_safetensors(required_file(folder, shard)).items()}
    if os.path.isfile(os.path.join(folder, "model.safetensors")):
        return read_safetensors(os.path.join(folder, "model.safetensors"))
    path = required_file(folder, "pytorch_model.bin")
    try:
        import torch
    except ImportError:
        raise ImportError(f"{path!r} is a PyTorch file: reading it needs PyTorch (pip install torch). A folder with "
                          "model.safetensors needs only NumPy.") from None
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {name: tensor.detach().float().numpy() for name, tensor in state.items()}


SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
                      "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """The tensors of a `.safetensors` file by name, floats as float32: an
    8-byte little-endian header length, a JSON header (each tensor's dtype,
    shape and byte offsets), then the tensors' bytes."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError(f"{path!r}: tensor {name!r} has the unsupported dtype {entry['dtype']!r}")
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=SAFETENSORS_DTYPES[entry["dtype"]]).reshape(entry["shape"])
        if entry["dtype"] == "BF16":  # bfloat16: the high half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.astype(np.float32) if array.dtype.kind == "f" else array
    return tensors


def _tensor(weights, *names):
    for name in names:
        if name in weights:
            return weights[name]
    raise KeyError(f"The checkpoint has none of the tensors {list(names)}")


def _hf_tables(weights, shared, tied, folder):
    """The embedding tables of a Hugging Face checkpoint, in its id order;
    a table shared by several is one object."""
    names = ["model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]
    try:
        if shared:
            embedding = target = _tensor(weights, *names, *(["lm_head.weight"] if tied else []))
        else:
            embedding = _tensor(weights, "model.encoder.embed_tokens.weight")
            target = _tensor(weights, "model.decoder.embed_tokens.weight", *(["lm_head.weight"] if tied else []))
        output = target if tied else _tensor(weights, "lm_head.weight")
    except KeyError as error:
        raise ValueError(f"The weights of {folder!r} lack an embedding: {error}") from None
    bias = weights.get("final_logits_bias")
    bias = None if bias is None or not np.any(bias) else bias.reshape(-1)
    return dict(embedding=embedding, target_embedding=target, output_embedding=output, output_bias=bias)


def _hf_layer(weights, prefix, decoder):
    """One layer's weights by our names: kernels `(in, out)` (PyTorch's
    `Linear` holds `(out, in)`)."""
    def linear(name):
        return weights[prefix + name + ".weight"].T, weights[prefix + name + ".bias"]

    def norm(name):
        return weights[prefix + name + ".weight"], weights[prefix + name + ".bias"]

    layer = {f"self_attention/{p}": linear(f"self_attn.{p}_proj") for p in "qkv"}
    layer.update({"self_attention/o": linear("self_attn.out_proj"), "self_attention_norm": norm("self_attn_layer_norm"),
                  "feed_forward/inner": linear("fc1"), "feed_forward/outer": linear("fc2"),
                  "feed_forward_norm": norm("final_layer_norm")})
    if decoder:
        layer.update({f"cross_attention/{p}": linear(f"encoder_attn.{p}_proj") for p in "qkv"})
        layer.update({"cross_attention/o": linear("encoder_attn.out_proj"),
                      "cross_attention_norm": norm("encoder_attn_layer_norm")})
    return layer
