"""A `base`-size Hugging Face Marian folder with random weights, for
`benchmarks/translate_speed.py --marian` (no OPUS-MT model can be
downloaded here).

    python benchmarks/marian_base.py --output runs/marian_base

The shape of an OPUS-MT `transformer-base` model (6 + 6 layers, d_model 512,
8 heads, feed-forward 2048, swish, scaled embeddings, one shared
vocabulary), with SentencePiece unigram models of 8,000 pieces learned on
the shipped English-French training split and the vocabulary of their
pieces as `marian-vocab` counts them (about 12,000). The weights are
`MarianMTModel`'s random initialisation; the logit bias of EOS is -10,000,
so no output ends before its length limit, and `max_position_embeddings` is
64: every output of both engines runs to 64 tokens
(`translate_speed.py --marian` gives our `Translator` the limit 64 and
CTranslate2 `max_decoding_length` 64), the same work for each.

Needs `transformers` and PyTorch (the `test` extra); imports no Keras.
"""

import argparse
import collections
import gzip
import io
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "keras_transformer", "datasets", "data", "tatoeba_en_fr", "train.tsv.gz")
MAX_LENGTH = 64
BASE = dict(d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8,
            encoder_ffn_dim=2048, decoder_ffn_dim=2048, activation_function="swish", scale_embedding=True,
            max_position_embeddings=MAX_LENGTH)


def make(output, pieces=8000, seed=0):
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split("\t")[:2] for line in f]
    os.makedirs(output, exist_ok=True)
    processors = []
    for side, name in enumerate(("source.spm", "target.spm")):
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(p[side] for p in pairs), model_writer=model,
                                       vocab_size=pieces, character_coverage=1.0, minloglevel=2)
        with open(os.path.join(output, name), "wb") as f:
            f.write(model.getvalue())
        processors.append(spm.SentencePieceProcessor(model_proto=model.getvalue()))
    counts = collections.Counter(piece for side, processor in enumerate(processors) for p in pairs
                                 for piece in processor.encode(p[side], out_type=str))
    vocabulary = ["</s>", "<unk>"] + [piece for piece, _ in counts.most_common()] + ["<pad>"]
    with open(os.path.join(output, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({p: i for i, p in enumerate(vocabulary)}, f, ensure_ascii=False)
    pad = len(vocabulary) - 1
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(vocab_size=len(vocabulary), decoder_vocab_size=len(vocabulary),
                                       pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, **BASE)).eval()
    with torch.no_grad():
        model.model.shared.weight[pad] = 0.0
        model.final_logits_bias[0, 0] = -1e4  # EOS: every output runs to its limit
    model.save_pretrained(output)
    MarianTokenizer(*(os.path.join(output, n) for n in ("source.spm", "target.spm", "vocab.json"))).save_pretrained(
        output)
    model.generation_config.bad_words_ids = [[pad]]
    model.generation_config.save_pretrained(output)
    return output


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, help="the Hugging Face Marian folder to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(make(args.output, seed=args.seed))


if __name__ == "__main__":
    main()
