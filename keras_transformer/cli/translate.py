"""`keras-transformer translate`: translate sentences, a file or standard input.

    keras-transformer translate saved_models/tatoeba_en_fr "How are you?"
    keras-transformer translate saved_models/tatoeba_en_fr --input en.txt --output fr.txt
    keras-transformer translate tatoeba_en_fr "How are you?" --beam-size 1    # a preset, name or directory
    keras-transformer translate runs/model.keras "How are you?" \
        --tokenizer runs/tokenizer.model --plot-attention attention.png

MODEL is a preset (a shipped name or a preset directory; its own
tokenizer), a SavedModel folder, or a `.keras` file with `--tokenizer`.
Needs no server package (fastapi, uvicorn): only TensorFlow, and
tensorflow-text for a SavedModel.
"""

import os
import sys

from keras_transformer.cli.common import (
    add_decoding_arguments,
    decoding_options,
    preset_path,
    translate_function,
    translate_sorted,
)

NAME = "translate"
HELP = "Translate sentences, a file or standard input with a preset, a SavedModel or a .keras model."


def add_arguments(p):
    p.add_argument("model", help="a preset (a shipped name such as tatoeba_en_fr, or a preset directory), "
                                 "a SavedModel folder (saved_models/<name>) or a .keras file")
    p.add_argument("text", nargs="*", help="sentences to translate; default: --input, else standard input")
    p.add_argument("--input", help="a text file, one sentence per line")
    p.add_argument("--output", help="write translations here, one per line (default: standard output)")
    p.add_argument("--tokenizer", help="the SentencePiece .model file (with a .keras model)")
    add_decoding_arguments(p)
    p.add_argument("--plot-attention", metavar="FILE.png",
                   help="draw the cross-attention of the first sentence (with a preset or a .keras model)")
    p.add_argument("--head", type=int, default=None, help="plot one head instead of the mean and all heads")


def run(args):
    sentences = _sentences(args)
    if args.plot_attention and not args.model.endswith(".keras") and preset_path(args.model) is None:
        raise SystemExit(
            "--plot-attention needs a preset, or a .keras model and --tokenizer (a SavedModel returns no "
            f"attention). Received: model={args.model!r}"
        )
    translate, model, tokenizer = translate_function(
        args.model, args.tokenizer, batch_size=args.batch_size, quantize=args.quantize, **decoding_options(args)
    )
    progress = None
    if args.input:
        import keras

        progress = keras.utils.Progbar(len(sentences), unit_name="sentence")
    translations = translate_sorted(translate, sentences, args.batch_size, progress)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in translations)
    else:
        for line in translations:
            print(line)
    if args.plot_attention and sentences:
        _plot(model, tokenizer, sentences[0], translations[0], args.plot_attention, args.head)
    return 0


def _sentences(args):
    """The words on the command line, else the lines of `--input`, else of standard input."""
    if args.text:
        return args.text
    if args.input and not os.path.isfile(args.input):
        raise SystemExit(f"No input file at {args.input!r}")
    try:
        if args.input:
            with open(args.input, encoding="utf-8") as f:
                return [line.rstrip("\r\n") for line in f]
        return [line.rstrip("\r\n") for line in sys.stdin]  # standard input may keep a CRLF's "\r"
    except UnicodeDecodeError as error:
        where = f"--input {args.input!r}" if args.input else "standard input"
        raise SystemExit(f"{where} is not UTF-8 text ({error.reason}: {error.object[error.start:error.end]!r})") from None


def _plot(model, tokenizer, sentence, translation, path, head):
    from keras_transformer.attention_plot import cross_attention_weights, plot_attention
    from keras_transformer.tokens import pack_source, pack_target, split_target

    source = pack_source(tokenizer.encode(sentence))
    target, _ = split_target(pack_target(tokenizer.encode(translation)))
    weights = cross_attention_weights(model, source, target)
    plot_attention(
        weights, tokenizer.id_to_piece(source[:-1]) + ["</s>"], ["<s>"] + tokenizer.id_to_piece(target[1:]),
        path, head=head, title=f"{sentence} → {translation}",
    )
    print(f"Attention plot written to {path}", file=sys.stderr)
