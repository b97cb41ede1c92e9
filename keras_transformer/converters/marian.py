"""Marian and OPUS-MT models as this package's presets: the same function, in Keras.

`read(source)` reads a trained Marian model into a `Checkpoint`: its
config, vocabularies, weights and SentencePiece models, which `config`,
`assign` and `tokenizer_protos` make ours (with NumPy alone: no Keras
object is made here); `keras_transformer.converters.marian_preset` makes
the model and tokenizer, and the preset folder of `keras-transformer import`.
A source is
- a Hugging Face `MarianMTModel` folder: `config.json` (`"model_type":
  "marian"`), `model.safetensors` (read with NumPy) or `pytorch_model.bin`
  (read with PyTorch), `vocab.json` (and `target_vocab.json` for separate
  vocabularies), `source.spm` and `target.spm`;
- a Marian folder, as OPUS-MT releases it: `decoder.yml` naming the `.npz`
  and the vocabulary `.yml` files, `source.spm` and `target.spm`;
- `hf://org/name`, a Hugging Face Hub repository of the first kind,
  downloaded by `huggingface_hub`.

Each difference from the paper's Transformer is a config field of ours
(`TransformerConfig`), set here from the source's config:

- positions: HF's sinusoids in halves (`sinusoid_layout="halves"`); Marian's
  own in halves with frequencies 10000^(-i / (d/2 - 1)) (`"marian"`);
- the feed-forward activation (swish, relu, gelu and its approximations),
  the layer norm's epsilon (HF 1e-5, Marian 1e-9), pre- or post-norm, the
  encoder's and decoder's depths and widths, embedding scaling;
- embeddings: one matrix or a source and a target one, the output
  projection tied to the target embedding or its own, and the output bias
  (`final_logits_bias`, `decoder_ff_logit_out_b`).

Special ids. Ours are fixed (`keras_transformer.tokens`: PAD 0, UNK 1, BOS
2, EOS 3) and every rule of the package reads them there; Marian's
vocabulary has EOS at 0 and UNK at 1, HF's adds PAD last, and the decoder
starts from PAD's embedding (HF) or from zeros (Marian). So the import
permutes the vocabulary: ours is `<pad> <unk> <s> </s>`, then the source's
other pieces in their order. PAD's and BOS's rows are the source's PAD row
(zeros for Marian), so the decoder starts as the source's does, and both are
`suppressed_ids`: decoding never outputs them, as Marian's vocabulary has
no PAD and HF's generation config bans it (`bad_words_ids`).

Tokenizers. Sources are segmented with `source.spm`, targets with
`target.spm`, and the pieces looked up in the vocabulary (unknown ones are
UNK), as `MarianTokenizer` does. Each SentencePiece model is rewritten so
that its ids are ours: our special pieces first, then the vocabulary's
pieces in our order, each with its own score where the model has it and
marked unused otherwise (never produced: the other side's pieces; control
pieces in a BPE model, which would merge into unused ones), then the
model's pieces the vocabulary lacks, which segment text as before and are
UNK to the model (`SubwordTokenizer`'s `vocab_size`). An unknown piece
decodes to nothing, as `MarianTokenizer.decode(skip_special_tokens=True)`.

Refused, each with the field and value that say so: what the Transformer
here cannot compute exactly (Marian's RNN or average-attention decoders,
factored vocabularies, embedding layer norms, learned or no positions,
right-to-left models, tied layers, other activations, different encoder
and decoder heads, a decoder that does not start from PAD) and source
vocabularies with target-language tokens (`>>fra<<`), which the tokenizer
does not split off. A model trained with guided alignment translates as
any other (the alignment only trained one attention head).
"""

import json
import os
import re
from typing import NamedTuple

import numpy as np

from keras_transformer import sentencepiece_model as spm_model
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

HUB_PREFIX = "hf://"
# Our special pieces, by id (`keras_transformer.tokens`).
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")
# An OPUS-MT model's longest sequence, as its Hugging Face config gives it.
MARIAN_MAX_LENGTH = 512
LICENSE_FILES = re.compile(r"^(LICEN[SC]E|COPYING|NOTICE)(\..*)?$", re.IGNORECASE)
# HF's activation names, and ours (`layers.feed_forward`).
HF_ACTIVATIONS = {"relu": "relu", "swish": "silu", "silu": "silu", "gelu": "gelu", "gelu_new": "gelu_approximate",
                  "gelu_pytorch_tanh": "gelu_approximate", "gelu_fast": "gelu_approximate",
                  "quick_gelu": "gelu_sigmoid"}
# Marian's; its "gelu" was x * sigmoid(1.702 x) before release 1.12.3, erf's since.
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


class Checkpoint(NamedTuple):
    """A source model as read: its config fields, vocabularies, weights in
    the source's id order, and what the model card says about it."""

    config: dict  # `TransformerConfig` fields, but the vocabulary sizes and suppressed ids
    source_pieces: list  # the source vocabulary, in the source's id order
    target_pieces: list  # the target's (the same list for one shared vocabulary)
    special: tuple  # per side, source and target: the ids of "eos", "unk" and "pad" (None: Marian's, none)
    tables: dict  # "embedding", "target_embedding", "output_embedding" (V, d) and "output_bias" (V,) or None
    layers: dict  # "encoder", "decoder": lists of {name: array}, and "encoder_norm", "decoder_norm" or None
    spm: tuple  # the source and target SentencePiece models' bytes
    info: dict  # for the model card and the preset's metadata


# ------------------------------------------------------------------ sources


def is_source(path_or_name):
    """Whether `path_or_name` names a Marian model this module reads: an
    `hf://` name, or a folder of a Hugging Face Marian model or of Marian's own."""
    if not isinstance(path_or_name, (str, os.PathLike)):
        return False
    path = os.fspath(path_or_name)
    return path.startswith(HUB_PREFIX) or _folder_format(path) is not None


def _folder_format(folder):
    """`"huggingface"`, `"marian"` or None: what kind of folder `folder` is."""
    if not os.path.isdir(folder):
        return None
    config = os.path.join(folder, "config.json")
    if os.path.isfile(config):
        try:
            with open(config, encoding="utf-8") as f:
                return "huggingface" if json.load(f).get("model_type") == "marian" else None
        except (ValueError, AttributeError, OSError):
            return None
    return "marian" if os.path.isfile(os.path.join(folder, "decoder.yml")) else None


HUB_FILES = ["config.json", "generation_config.json", "*.safetensors", "*.safetensors.index.json", "source.spm",
             "target.spm", "vocab.json", "target_vocab.json", "tokenizer_config.json", "README.md", "LICENSE*",
             "COPYING*", "NOTICE*"]


def download(name):
    """The local folder of `hf://org/name`, downloaded by `huggingface_hub`
    (its cache, or the Hub when a network exists)."""
    repo = name[len(HUB_PREFIX):].strip("/")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ValueError(f"A Hub model is named hf://ORGANIZATION/NAME. Received: {name!r}")
    try:
        import huggingface_hub
    except ImportError:
        raise ImportError(f"Downloading {name} needs huggingface_hub: pip install \"keras-transformer[marian]\" (or "
                          "download the folder elsewhere and give its path)") from None
    try:
        folder = huggingface_hub.snapshot_download(repo, allow_patterns=HUB_FILES)
        if not any(f.endswith(".safetensors") or f.endswith(".safetensors.index.json") for f in os.listdir(folder)):
            folder = huggingface_hub.snapshot_download(repo, allow_patterns=HUB_FILES + ["pytorch_model.bin"])
    except Exception as error:  # no network, no such repository, a gated one: the Hub's own errors
        raise OSError(f"Cannot download {name} from the Hugging Face Hub ({type(error).__name__}: {error}). "
                      "Without a network, download its folder on another machine and give its path. "
                      f"Received: {name!r}") from None
    return folder


def read(source, weights=True):
    """The `Checkpoint` of `source` (the module docstring); without its
    `weights` (tables and layers None), for its tokenizer alone."""
    path = os.fspath(source)
    folder = download(path) if path.startswith(HUB_PREFIX) else path
    kind = _folder_format(folder)
    if kind is None:
        raise FileNotFoundError(
            f"No Marian model at {path!r}: expected a Hugging Face Marian folder (config.json with \"model_type\": "
            "\"marian\"), a Marian folder (decoder.yml) or hf://ORGANIZATION/NAME. Received: source={path!r}")
    checkpoint = (read_huggingface if kind == "huggingface" else read_marian)(folder, weights)
    checkpoint.info.update(source=path, folder=os.path.abspath(folder))
    return checkpoint


def _file(folder, name):
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"The Marian model at {folder!r} has no {name}. Received: source={folder!r}")
    return path


def _read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def refuse(field, value, why, where):
    """The error for a source the Transformer here cannot reproduce."""
    return ValueError(f"Cannot import this Marian model: {why}. Received: {field}={value!r} in {where}")


# ------------------------------------------------------------------ Hugging Face


def read_huggingface(folder, weights=True):
    """The `Checkpoint` of a Hugging Face `MarianMTModel` folder (without
    its tables and layers unless `weights`)."""
    with open(_file(folder, "config.json"), encoding="utf-8") as f:
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
    source_pieces = _vocabulary_json(_file(folder, "vocab.json"))
    target_pieces = source_pieces if shared else _vocabulary_json(_file(folder, "target_vocab.json"))
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
    spm = (_read_bytes(_file(folder, "source.spm")), _read_bytes(_file(folder, "target.spm")))
    info = dict(format="Hugging Face MarianMTModel", generation=_generation_settings(folder, hf),
                license=_license(folder))
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
        return {k: v for shard in shards for k, v in read_safetensors(_file(folder, shard)).items()}
    if os.path.isfile(os.path.join(folder, "model.safetensors")):
        return read_safetensors(os.path.join(folder, "model.safetensors"))
    path = _file(folder, "pytorch_model.bin")
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


# ------------------------------------------------------------------ Marian


def read_marian(folder, weights=True):
    """The `Checkpoint` of a Marian folder: `decoder.yml`, its `.npz` and
    vocabularies (its options only, without its tables and layers, unless
    `weights`)."""
    decoder_yml = _file(folder, "decoder.yml")
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
    npz = _file(folder, models[0])
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
    source_pieces = _vocabulary_yml(_file(folder, vocabs[0]))
    target_pieces = source_pieces if vocabs[0] == vocabs[1] else _vocabulary_yml(_file(folder, vocabs[1]))
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
    spm = (_read_bytes(_file(folder, "source.spm")), _read_bytes(_file(folder, "target.spm")))
    info = dict(format="Marian", license=_license(folder), marian_version=options.get("version"),
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
    if name == "gelu":  # x * sigmoid(1.702 x) before Marian 1.12.3
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


def _license(folder):
    """`{"name": license named by the model card or None, "files": license files}`."""
    files = sorted(f for f in os.listdir(folder) if LICENSE_FILES.match(f))
    name = None
    card = os.path.join(folder, "README.md")
    if os.path.isfile(card):
        with open(card, encoding="utf-8", errors="replace") as f:
            text = f.read()
        front = re.match(r"---\n(.*?)\n---", text, re.S)
        found = re.search(r"^license:\s*(\S.*)$", front.group(1) if front else text, re.M | re.I)
        name = found.group(1).strip().strip("'\"") if found else None
    return {"name": name, "files": files}


# ------------------------------------------------------------------ our model


def permutation(pieces, special):
    """The source's id of each of our ids: `<pad> <unk> <s> </s>` (PAD's and
    BOS's rows are `special`'s "pad" row, or none: -1), then the source's
    other ids in order."""
    taken = {special["eos"], special["unk"], special["pad"]}
    pad = -1 if special["pad"] is None else special["pad"]
    return np.array([pad, special["unk"], pad, special["eos"]] + [i for i in range(len(pieces)) if i not in taken])


def our_pieces(pieces, order):
    """Our vocabulary's pieces: our special ones, then the source's in `order`."""
    ours = list(SPECIAL_PIECES) + [pieces[i] for i in order[len(SPECIAL_PIECES):]]
    seen = set()
    repeated = [p for p in ours if p in seen or seen.add(p)]
    if repeated:
        raise ValueError(f"The vocabulary holds pieces that are special here ({SPECIAL_PIECES}) or repeated: "
                         f"{repeated[:5]}")
    codes = [p for p in ours if re.fullmatch(r">>.+<<", p)]
    if codes:
        raise refuse("vocabulary", codes[:5] + (["..."] if len(codes) > 5 else []),
                     f"its {len(codes)} target-language tokens are not split off a source by the tokenizer here",
                     "the model's vocabulary")
    return ours


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


def rewrite_sentencepiece(proto, pieces):
    """`proto` (a SentencePiece model) with our ids: `pieces` (our
    vocabulary) first, each with the model's own score and type where it
    has the piece, else unused (never produced), then the model's pieces
    that `pieces` lacks (they segment text as before; the tokenizer maps
    them to UNK). Our special pieces are the model's special ones; an
    unknown piece decodes to nothing."""
    own = {p.piece: p for p in spm_model.read_pieces(proto)
           if p.type in (spm_model.NORMAL, spm_model.USER_DEFINED, spm_model.BYTE)}
    # A BPE model merges into unused pieces (and splits them again), which
    # would change its segmentation; it never uses control pieces.
    absent = spm_model.CONTROL if spm_model.model_type(proto) == spm_model.BPE else spm_model.UNUSED
    special = [spm_model.Piece(p, 0.0, spm_model.UNKNOWN if i == UNK_ID else spm_model.CONTROL)
               for i, p in enumerate(SPECIAL_PIECES)]
    vocabulary = special + [own.get(p, spm_model.Piece(p, 0.0, absent)) for p in pieces[len(SPECIAL_PIECES):]]
    inside = set(pieces)
    extra = [p for p in own.values() if p.piece not in inside]
    names = dict(zip(("pad", "unk", "bos", "eos"), SPECIAL_PIECES))
    return spm_model.rewrite(proto, vocabulary + extra, vocab_size=len(pieces), special={
        "pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID, "unk_surface": "",
        **{f"{side}_piece": piece for side, piece in names.items()}})


def tokenizer_protos(checkpoint):
    """The SentencePiece models of our tokenizer of a `Checkpoint`, the
    source's and the target's rewritten with our ids: `(source, target)`,
    `target` None when one model serves both sides."""
    source_pieces = our_pieces(checkpoint.source_pieces, permutation(checkpoint.source_pieces, checkpoint.special[0]))
    target_pieces = our_pieces(checkpoint.target_pieces, permutation(checkpoint.target_pieces, checkpoint.special[1]))
    source_spm, target_spm = checkpoint.spm
    source = rewrite_sentencepiece(source_spm, source_pieces)
    if source_spm == target_spm and source_pieces == target_pieces:
        return source, None
    return source, rewrite_sentencepiece(target_spm, target_pieces)


def metadata(checkpoint):
    """The preset's record of where the model came from."""
    info = checkpoint.info
    return {"source": info["source"], "source_format": info["format"],
            **{k: info[k] for k in ("generation", "marian_version", "guided_alignment") if info.get(k) is not None},
            "license": info["license"]}


def model_card(checkpoint, config):
    """The preset's README.md: where the model comes from, its license, how
    it was converted; `config`: the model's `TransformerConfig`."""
    info = checkpoint.info
    license_ = info["license"]
    if license_["files"]:
        terms = f"{license_['name'] or 'see'} {', '.join(f'`{f}`' for f in license_['files'])} (copied here)"
    elif license_["name"]:
        terms = f"`{license_['name']}`, as the source's model card states"
    else:
        terms = "not stated by the source: check its terms before you redistribute this folder"
    decoding = ", ".join(f"{k} {v}" for k, v in info.get("generation", {}).items()) or "none given"
    alignment = ""
    if info.get("guided_alignment"):
        alignment = (f"\nThe source was trained with guided alignment (layer {info['guided_alignment']}); its "
                     "translations are unchanged by it, and `alignments=True` reads the cross-attention as for any "
                     "model here.\n")
    return f"""# {os.path.basename(info['source'].rstrip('/')) or info['source']}

Imported by `keras-transformer import` from **{info['source']}** ({info['format']} format).
License: {terms}.

The model computes the source's function (docs/zoo.md, "Marian and OPUS-MT
models"): {config.num_layers} encoder and {config.num_decoder_layers or config.num_layers} decoder layers, d_model
{config.d_model}, {config.num_heads} heads, feed-forward {config.d_ff} ({config.activation}), sinusoids in
{config.sinusoid_layout} layout, layer norm epsilon {config.layer_norm_epsilon:g}, a vocabulary of
{config.vocab_size} ids (`<pad> <unk> <s> </s>` first: the source's ids permuted),
{'one tokenizer' if checkpoint.spm[0] == checkpoint.spm[1] else 'a source and a target SentencePiece model'}
(`tokenizer.model`{'' if checkpoint.spm[0] == checkpoint.spm[1] else ', `target_tokenizer.model`'}).
{alignment}
The source's own decoding settings: {decoding}. `Translator.from_preset(folder,
length_penalty="huggingface", alpha=1.0)` decodes as Hugging Face's
`generate` does; the defaults here are the paper's (beam 4, GNMT penalty 0.6).
"""
