"""Marian models made here, without downloading anything: SentencePiece
models trained on the shipped English-French corpus, a vocabulary as
`marian-vocab` makes one (the pieces of the encoded corpus, most frequent
first), Hugging Face `MarianMTModel` folders built from `MarianConfig`
(`save_pretrained`, as OPUS-MT's are published), and Marian's own release
of the same weights: the `.npz` with the parameter names Marian writes and
CTranslate2's OPUS-MT converter reads, the vocabulary `.yml` and
`decoder.yml`.

    write_huggingface(folder, CONFIG)   # a random model
    write_marian(folder, marian_weights(hf_folder), OPTIONS, ...)
"""

import collections
import functools
import io
import json
import os

import numpy as np

from keras_transformer import datasets

CORPUS = "tatoeba_en_fr"
TRAIN_PAIRS = 20_000
# The test model's config: one that the package's own tests use nowhere else,
# with the encoder and decoder of different depths and widths.
CONFIG = dict(d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
              encoder_ffn_dim=64, decoder_ffn_dim=48, activation_function="swish", max_position_embeddings=128,
              scale_embedding=True, dropout=0.0)
# Marian's options of the same model (special:model.yml).
MARIAN_OPTIONS = {
    "type": "transformer", "transformer-ffn-depth": 2, "transformer-decoder-ffn-depth": 0,
    "transformer-preprocess": "", "transformer-postprocess": "dan", "transformer-postprocess-emb": "d",
    "transformer-postprocess-top": "", "transformer-decoder-autoreg": "self-attention",
    "transformer-no-projection": False, "transformer-guided-alignment-layer": "last", "guided-alignment": "none",
    "tied-embeddings-all": True, "version": "v1.11.0 f00d062 2022-02-08 08:39:24 -0800",
}


def pairs(split="train", count=None):
    return list(_split(split)[:count])


@functools.lru_cache(maxsize=None)
def _split(split):
    """The corpus's `split`, read once per process."""
    return tuple(datasets.load(CORPUS, split))


@functools.lru_cache(maxsize=None)
def side_sentencepiece_model(side, vocab_size, model_type="unigram"):
    """`sentencepiece_model` of side `side` (0: English, 1: French) of the
    first `TRAIN_PAIRS` training pairs: trained once per process, as the
    models of one type are the same bytes."""
    return sentencepiece_model([p[side] for p in pairs("train", TRAIN_PAIRS)], vocab_size, model_type)


def sentencepiece_model(texts, vocab_size, model_type="unigram"):
    """A SentencePiece model's bytes, trained with SentencePiece's defaults
    (ids unk 0, bos 1, eos 2), as OPUS-MT's `source.spm` and `target.spm`."""
    import sentencepiece as spm

    model = io.BytesIO()
    spm.set_random_generator_seed(0)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model, vocab_size=vocab_size,
                                   model_type=model_type, character_coverage=1.0, num_threads=1, minloglevel=2)
    return model.getvalue()


def vocabulary(*encoded):
    """`</s>`, `<unk>`, then the pieces of the `encoded` texts (lists of
    pieces), most frequent first: as `marian-vocab` counts them, so pieces
    of the SentencePiece models that the texts never use are left out."""
    counts = collections.Counter(piece for rows in encoded for row in rows for piece in row)
    return ["</s>", "<unk>"] + [piece for piece, _ in counts.most_common()]


def write_huggingface(folder, config=None, separate_vocabs=False, model_type="unigram", seed=0):
    """A Hugging Face Marian folder: SentencePiece models of the corpus's
    sides, `vocab.json` (and `target_vocab.json` for `separate_vocabs`),
    a `MarianMTModel` of `config` (`CONFIG` by default) with random weights
    (each moved off `MarianMTModel`'s initial value, whose biases are zeros
    and layer norms ones, which would hide a misplaced weight), its PAD row
    zero and a random `final_logits_bias` (as OPUS-MT's conversions have
    them; PAD's the highest), `save_pretrained`, its tokenizer's files and a
    generation config that bans PAD. Returns the folder."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    os.makedirs(folder, exist_ok=True)
    train = pairs("train", TRAIN_PAIRS)
    protos = [side_sentencepiece_model(side, size, model_type) for side, size in ((0, 600), (1, 700))]
    processors = [spm.SentencePieceProcessor(model_proto=p) for p in protos]
    # The vocabulary of a part of the pairs: pieces of the SentencePiece models that it lacks are UNK.
    sample = [[processor.encode(p[side], out_type=str) for p in train[:5000]] for side, processor in
              enumerate(processors)]
    vocabularies = [vocabulary(*sample)] * 2 if not separate_vocabs else [vocabulary(sample[0]), vocabulary(sample[1])]
    # HF's converter adds PAD last, which starts the decoder: at one id on both sides.
    size = min(map(len, vocabularies))
    vocabularies = [v[:size] + ["<pad>"] for v in vocabularies]
    for name, proto in zip(("source.spm", "target.spm"), protos):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(proto)
    names = ["vocab.json"] + (["target_vocab.json"] if separate_vocabs else [])
    for name, pieces in zip(names, vocabularies):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            json.dump({p: i for i, p in enumerate(pieces)}, f, ensure_ascii=False)
    source_size, target_size = len(vocabularies[0]), len(vocabularies[1])
    options = dict(CONFIG, **(config or {}))
    pad = source_size - 1
    marian_config = MarianConfig(vocab_size=source_size, decoder_vocab_size=target_size, pad_token_id=pad,
                                 decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
                                 share_encoder_decoder_embeddings=not separate_vocabs, **options)
    torch.manual_seed(seed)
    model = MarianMTModel(marian_config)
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
        for embedding in {id(e): e for e in (model.model.encoder.embed_tokens, model.model.decoder.embed_tokens)}.values():
            embedding.weight[-1] = 0.0  # PAD's row: the decoder's start, zeros as in an OPUS-MT conversion
        model.final_logits_bias.normal_(0.0, 0.5, generator=generator)
        # PAD the likeliest token at many steps, which only the ban of PAD (ours, HF's) keeps out.
        model.final_logits_bias[0, -1] = model.final_logits_bias.max() + 0.5
    model.save_pretrained(folder)
    tokenizer = MarianTokenizer(os.path.join(folder, "source.spm"), os.path.join(folder, "target.spm"),
                                *[os.path.join(folder, n) for n in names], separate_vocabs=separate_vocabs)
    tokenizer.save_pretrained(folder)
    model.generation_config.bad_words_ids = [[target_size - 1]]  # as OPUS-MT's: PAD is never generated
    model.generation_config.save_pretrained(folder)
    return folder


def marian_weights(hf_folder):
    """The weights of a Hugging Face Marian folder by Marian's parameter
    names (`W` kernels `(in, out)`, biases and layer norms `(1, d)`), and
    Marian's vocabulary size (HF's less its added PAD). Post-norm."""
    from safetensors.numpy import load_file

    with open(os.path.join(hf_folder, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    hf = load_file(os.path.join(hf_folder, "model.safetensors"))
    weights = {}
    if config["share_encoder_decoder_embeddings"]:
        weights["Wemb"] = hf["model.shared.weight"][:-1]
    else:
        weights["encoder_Wemb"] = hf["model.encoder.embed_tokens.weight"][:-1]
        weights["decoder_Wemb"] = hf["model.decoder.embed_tokens.weight"][:-1]
    if "lm_head.weight" in hf and not config.get("tie_word_embeddings", True):
        weights["decoder_ff_logit_out_W"] = hf["lm_head.weight"][:-1].T
    weights["decoder_ff_logit_out_b"] = hf["final_logits_bias"][:, :-1]

    def linear(marian, name):
        weights[marian[0]], weights[marian[1]] = hf[name + ".weight"].T, hf[name + ".bias"][None]

    def norm(marian, name):
        weights[marian + "_ln_scale"], weights[marian + "_ln_bias"] = hf[name + ".weight"][None], hf[name + ".bias"][None]

    for stack in ("encoder", "decoder"):
        for i in range(config[f"{stack}_layers"]):
            theirs, ours = f"model.{stack}.layers.{i}.", f"{stack}_l{i + 1}_"
            scopes = [("self", "self_attn")] + ([("context", "encoder_attn")] if stack == "decoder" else [])
            for scope, name in scopes:
                for p in "qkv":
                    linear((f"{ours}{scope}_W{p}", f"{ours}{scope}_b{p}"), f"{theirs}{name}.{p}_proj")
                linear((f"{ours}{scope}_Wo", f"{ours}{scope}_bo"), f"{theirs}{name}.out_proj")
                norm(f"{ours}{scope}_Wo", f"{theirs}{name}_layer_norm")
            linear((f"{ours}ffn_W1", f"{ours}ffn_b1"), theirs + "fc1")
            linear((f"{ours}ffn_W2", f"{ours}ffn_b2"), theirs + "fc2")
            norm(f"{ours}ffn_ffn", theirs + "final_layer_norm")
    return weights, config


def marian_options(hf_config, **overrides):
    """Marian's options (special:model.yml) of a Hugging Face Marian config."""
    return dict(MARIAN_OPTIONS, **{
        "dim-emb": hf_config["d_model"], "enc-depth": hf_config["encoder_layers"],
        "dec-depth": hf_config["decoder_layers"], "transformer-heads": hf_config["encoder_attention_heads"],
        "transformer-dim-ffn": hf_config["encoder_ffn_dim"], "transformer-decoder-dim-ffn": hf_config["decoder_ffn_dim"],
        "transformer-ffn-activation": {"silu": "swish"}.get(hf_config["activation_function"],
                                                             hf_config["activation_function"]),
        "tied-embeddings-all": hf_config["share_encoder_decoder_embeddings"],
    }, **overrides)


def write_marian(folder, weights, options, vocabularies, spm_folder):
    """Marian's release of `weights` (by Marian's names): `model.npz` with
    its `special:model.yml`, a vocabulary `.yml` per distinct vocabulary,
    `decoder.yml`, and the SentencePiece models of `spm_folder`."""
    import yaml

    os.makedirs(folder, exist_ok=True)
    options = dict(options, **{"dim-vocabs": [len(v) for v in vocabularies]})
    text = yaml.safe_dump(options, sort_keys=False).encode("utf-8") + b"\0"
    np.savez(os.path.join(folder, "model.npz"), **weights, **{"special:model.yml": np.frombuffer(text, np.int8)})
    names = ["vocab.yml"] * 2 if vocabularies[0] == vocabularies[1] else ["source.vocab.yml", "target.vocab.yml"]
    for name, pieces in zip(names, vocabularies):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.writelines(f"{json.dumps(piece, ensure_ascii=False)}: {i}\n" for i, piece in enumerate(pieces))
    with open(os.path.join(folder, "decoder.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump({"models": ["model.npz"], "vocabs": names, "beam-size": 6, "normalize": 1.0,
                        "word-penalty": 0, "relative-paths": True}, f, sort_keys=False)
    for name in ("source.spm", "target.spm"):
        with open(os.path.join(spm_folder, name), "rb") as source, open(os.path.join(folder, name), "wb") as f:
            f.write(source.read())
    return folder


def hf_vocabularies(hf_folder):
    """The folder's vocabularies, in id order, without HF's PAD: Marian's."""
    result = []
    for name in ("vocab.json", "target_vocab.json"):
        path = os.path.join(hf_folder, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                mapping = json.load(f)
            result.append(sorted(mapping, key=mapping.get)[:-1])
    return result * 2 if len(result) == 1 else result


def write_marian_of_huggingface(hf_folder, folder, **overrides):
    """`write_marian` of a Hugging Face Marian folder's weights."""
    weights, config = marian_weights(hf_folder)
    return write_marian(folder, weights, marian_options(config, **overrides), hf_vocabularies(hf_folder), hf_folder)


def random_marian_weights(options, source_size, target_size, seed=0):
    """Random weights of a Marian model of `options` (special:model.yml) by
    Marian's names: its embeddings as the `tied-embeddings*` options say,
    an output matrix of its own unless tied, layer norms as the
    `transformer-preprocess` option places them (pre-norm: `_pre` names and
    a final norm on each stack)."""
    rng = np.random.default_rng(seed)
    d, pre = options["dim-emb"], options["transformer-preprocess"] == "n"
    d_ff = options["transformer-dim-ffn"]
    decoder_ff = options.get("transformer-decoder-dim-ffn") or d_ff
    weights = {}

    def normal(*shape, scale=0.3):
        return rng.normal(0.0, scale, shape).astype("float32")

    if options.get("tied-embeddings-all"):
        weights["Wemb"] = normal(source_size, d)
    else:
        weights["encoder_Wemb"], weights["decoder_Wemb"] = normal(source_size, d), normal(target_size, d)
    if not options.get("tied-embeddings", True) and not options.get("tied-embeddings-all"):
        weights["decoder_ff_logit_out_W"] = normal(d, target_size)
    weights["decoder_ff_logit_out_b"] = normal(1, target_size)

    def norm(name):
        suffix = "_pre" if pre else ""
        weights[f"{name}_ln_scale{suffix}"] = 1.0 + normal(1, d, scale=0.1)
        weights[f"{name}_ln_bias{suffix}"] = normal(1, d, scale=0.1)

    for stack in ("encoder", "decoder"):
        for i in range(options["enc-depth" if stack == "encoder" else "dec-depth"]):
            prefix = f"{stack}_l{i + 1}_"
            for scope in ["self"] + (["context"] if stack == "decoder" else []):
                for p in "qkvo":
                    weights[f"{prefix}{scope}_W{p}"], weights[f"{prefix}{scope}_b{p}"] = normal(d, d), normal(1, d)
                norm(f"{prefix}{scope}_Wo")
            width = d_ff if stack == "encoder" else decoder_ff
            weights[f"{prefix}ffn_W1"], weights[f"{prefix}ffn_b1"] = normal(d, width), normal(1, width)
            weights[f"{prefix}ffn_W2"], weights[f"{prefix}ffn_b2"] = normal(width, d), normal(1, d)
            norm(f"{prefix}ffn_ffn")
        if pre:
            weights[f"{stack}_top_ln_scale"], weights[f"{stack}_top_ln_bias"] = 1.0 + normal(1, d, scale=0.1), normal(1, d)
    return weights
