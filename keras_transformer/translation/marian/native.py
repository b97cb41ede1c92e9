"""A Marian folder, as OPUS-MT releases it, read into a `Checkpoint`:
`decoder.yml` naming the `.npz` (its options in `special:model.yml`) and
the vocabulary `.yml` files, `source.spm` and `target.spm`.

Marian's sinusoids are in halves with the frequencies 10000^(-i / (d/2 - 1))
(`sinusoid_layout="marian"`), its layer norm's epsilon 1e-9, its decoder
starts from zeros, and its vocabulary has no PAD (EOS 0, UNK 1). Its
options that change the Transformer are refused unless they keep the
paper's (`MARIAN_REQUIRED`, `MARIAN_NORMS`)."""

import json
import re

import numpy as np

from keras_transformer.translation.marian.checkpoint import Checkpoint, license_of, read_bytes, refuse, required_file

# An OPUS-MT model's longest sequence, as its Hugging Face config gives it.
MARIAN_MAX_LENGTH = 512
# Marian's; its "gelu" was x * sigmoid(1.702 * x) before release 1.12.3, erf's since.
MARIAN_ACTIVATIONS = {"relu": "relu", "swish": "silu"}
MARIAN_EXACT_GELU = (1, 12, 3)
# Marian's options that keep the paper's Transformer, and the values it must have.
MARIAN_REQUIRED = {
    "type": ("transformer",),
    "transformer-decoder-autoreg": ("self-attention",),
    "transformer-no-projection": (False,),
    "transformer-pool": (False,),
    "transformer-train-position-embeddings": (False,),
    "transformer-disable-position-embeddings": (False,),
    "transformer-postprocess-emb": ("d", ""),
    "transformer-ffn-depth": (2,),
    "transformer-decoder-ffn-depth": (0, 2),
    "transformer-tied-layers": ([],),
    "right-left": (False,),
    "ulr": (False,),
    "lemma-dim-emb": (0,),
    "factors-dim-emb": (0,),
}
# Marian's residual blocks: post-norm, or pre-norm with a final norm.
MARIAN_NORMS = {("", "dan", ""): False, ("n", "da", "n"): True}


def read(folder, weights=True):
    """The `Checkpoint` of a Marian folder: `decoder.yml`, its `.npz` and
    vocabularies (its options only, without its tables and layers, unless
    `weights`)."""
    decoder_yml = required_file(folder, "decoder.yml")
    decoder = _yaml(decoder_yml)
    models, vocabs = decoder.get("models") or [], decoder.get("vocabs") or []
    if len(models) != 1:
        raise refuse("models", models, "one model is imported, not an ensemble", decoder_yml)
    if len(vocabs) != 2:
        raise refuse("vocabs", vocabs, "a source and a target vocabulary are expected", decoder_yml)
    for path in vocabs:
        if not path.endswith(".yml"):
            raise refuse("vocabs", vocabs, "the vocabularies must be Marian's .yml files (a .spm vocabulary or a "
                         "factored one is not supported)", decoder_yml)
    npz = required_file(folder, models[0])
    with np.load(npz) as archive:
        if "special:model.yml" not in archive.files:
            raise ValueError(f"{npz!r} has no special:model.yml: not a Marian model. Received: source={folder!r}")
        options = _yaml_text(archive["special:model.yml"].tobytes().rstrip(b"\0").decode("utf-8"))
        weights = {name: archive[name] for name in archive.files if weights and name != "special:model.yml"}
    where = f"{models[0]} (special:model.yml)"
    for field, allowed in MARIAN_REQUIRED.items():
        if field in options and options[field] not in allowed:
            raise refuse(field, options[field], f"only {allowed} is supported", where)
    norms = tuple(options.get(f"transformer-{k}", "") or "" for k in ("preprocess", "postprocess", "postprocess-top"))
    if norms not in MARIAN_NORMS:
        raise refuse("transformer-preprocess, -postprocess, -postprocess-top", list(norms),
                     "the residual blocks must be post-norm ('', 'dan', '') or pre-norm ('n', 'da', 'n')", where)
    activation = _marian_activation(options, where)
    heads = options.get("transformer-heads", 8)
    source_pieces = _vocabulary_yml(required_file(folder, vocabs[0]))
    target_pieces = source_pieces if vocabs[0] == vocabs[1] else _vocabulary_yml(required_file(folder, vocabs[1]))
    for pieces, path in ((source_pieces, vocabs[0]), (target_pieces, vocabs[1])):
        if pieces[:2] != ["</s>", "<unk>"]:
            raise refuse(path, pieces[:2], "a Marian vocabulary starts with </s> (0) and <unk> (1)", path)
    tables = layers = None
    if weights:
        tables = _marian_tables(weights, npz)
        layers = {
            "encoder": [_marian_layer(weights, f"encoder_l{i + 1}_", False) for i in range(options["enc-depth"])],
            "decoder": [_marian_layer(weights, f"decoder_l{i + 1}_", True) for i in range(options["dec-depth"])],
            "encoder_norm": _marian_norm(weights, "encoder_top") if norms[0] else None,
            "decoder_norm": _marian_norm(weights, "decoder_top") if norms[0] else None,
        }
    d_ff = options.get("transformer-dim-ffn", 2048)
    config = dict(
        num_layers=options["enc-depth"], num_decoder_layers=options["dec-depth"], d_model=options["dim-emb"],
        num_heads=heads, d_ff=d_ff, decoder_d_ff=options.get("transformer-decoder-dim-ffn") or d_ff,
        dropout_rate=float(options.get("transformer-dropout", 0.1)),
        attention_dropout_rate=float(options.get("transformer-dropout-attention", 0.0)),
        max_length=MARIAN_MAX_LENGTH, activation=activation, layer_norm_epsilon=1e-9,  # Marian's layerNorm
        norm_first=MARIAN_NORMS[norms], sinusoid_layout="marian", scale_embeddings=True,
    )
    spm = (read_bytes(required_file(folder, "source.spm")), read_bytes(required_file(folder, "target.spm")))
    info = dict(format="Marian", license=license_of(folder), marian_version=options.get("version"),
                generation={k: decoder[k] for k in ("beam-size", "normalize", "word-penalty") if k in decoder})
    if options.get("guided-alignment", "none") != "none":
        info["guided_alignment"] = options.get("transformer-guided-alignment-layer", "last")
    return Checkpoint(config, source_pieces, target_pieces, (dict(eos=0, unk=1, pad=None),) * 2,
                      tables, layers, spm, info)


def _yaml(path):
    with open(path, encoding="utf-8") as f:
        return _yaml_text(f.read())


def _yaml_text(text):
    try:
        import yaml
    except ImportError:
        raise ImportError("Reading a Marian model's .yml files needs PyYAML: pip install "
                          "\"keras-transformer[marian]\"") from None
    return yaml.safe_load(text) or {}


def _marian_activation(options, where):
    name = options.get("transformer-ffn-activation", "swish")
    if name == "gelu":  # x * sigmoid(1.702 * x) before Marian 1.12.3
        version = re.match(r"v?(\d+)\.(\d+)\.(\d+)", str(options.get("version", "")))
        if version is None:
            raise refuse("version", options.get("version"), "Marian's gelu depends on the release that trained the "
                         "model, and this model names none", where)
        return "gelu" if tuple(map(int, version.groups())) >= MARIAN_EXACT_GELU else "gelu_sigmoid"
    if name not in MARIAN_ACTIVATIONS:
        raise refuse("transformer-ffn-activation", name, "the activations supported are swish, relu and gelu", where)
    return MARIAN_ACTIVATIONS[name]


def _vocabulary_yml(path):
    """The pieces of a Marian vocabulary `.yml` (`piece: id` lines), in id
    order. Parsed by hand: YAML would read pieces such as `yes` or `1` as
    other types, and Marian writes some keys in YAML's complex-key form."""
    entries, key = {}, None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            if line.startswith("? "):  # a complex key, its value on the next line
                key = line[2:]
                continue
            if key is not None:
                piece, index = key, line[2:]
                key = None
            else:
                piece, _, index = line.rpartition(":")
            piece = _yaml_scalar(piece.strip() if piece.strip().startswith(("'", '"')) else piece)
            try:
                entries[int(index.strip())] = piece
            except ValueError:
                raise ValueError(f"{path!r} line {number} is not `piece: id`. Received: {line!r}") from None
    if sorted(entries) != list(range(len(entries))):
        raise ValueError(f"The ids of {path!r} must be 0 to {len(entries) - 1}, each once.")
    return [entries[i] for i in range(len(entries))]


def _yaml_scalar(text):
    """A quoted YAML scalar unquoted: `"..."` with its escapes, `'...'` with `''`."""
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return json.loads(text) if "\\x" not in text else text[1:-1].encode("latin-1").decode("unicode_escape")
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text


def _marian_tables(weights, where):
    """The embedding tables of a Marian model, in its id order; PAD has no row."""
    if "Wemb" in weights:
        embedding = target = weights["Wemb"]
    elif "encoder_Wemb" in weights and "decoder_Wemb" in weights:
        embedding, target = weights["encoder_Wemb"], weights["decoder_Wemb"]
    else:
        raise ValueError(f"{where!r} has no Wemb, nor encoder_Wemb and decoder_Wemb")
    if "decoder_ff_logit_out_W" in weights:
        output = weights["decoder_ff_logit_out_W"].T  # (d, V) -> (V, d)
    elif "decoder_ff_logit_out_Wt" in weights:
        output = weights["decoder_ff_logit_out_Wt"]
    else:
        output = target
    bias = weights.get("decoder_ff_logit_out_b")
    return dict(embedding=embedding, target_embedding=target, output_embedding=output,
                output_bias=None if bias is None else bias.reshape(-1))


def _marian_norm(weights, prefix):
    for suffix in ("_pre", ""):
        if prefix + "_ln_scale" + suffix in weights:
            return weights[prefix + "_ln_scale" + suffix].reshape(-1), weights[prefix + "_ln_bias" + suffix].reshape(-1)
    raise ValueError(f"The Marian model has no layer norm {prefix}_ln_scale")


def _marian_layer(weights, prefix, decoder):
    """One layer's weights by our names; Marian's kernels are `(in, out)` already."""
    def linear(scope, suffix):
        return weights[f"{prefix}{scope}_W{suffix}"], weights[f"{prefix}{scope}_b{suffix}"].reshape(-1)

    layer = {f"self_attention/{p}": linear("self", p) for p in "qkvo"}
    layer.update({"self_attention_norm": _marian_norm(weights, prefix + "self_Wo"),
                  "feed_forward/inner": linear("ffn", "1"), "feed_forward/outer": linear("ffn", "2"),
                  "feed_forward_norm": _marian_norm(weights, prefix + "ffn_ffn")})
    if decoder:
        layer.update({f"cross_attention/{p}": linear("context", p) for p in "qkvo"})
        layer["cross_attention_norm"] = _marian_norm(weights, prefix + "context_Wo")
    return layer
