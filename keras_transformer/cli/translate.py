"""`keras-transformer translate`: translate sentences, a file or standard input.

    keras-transformer translate saved_models/tatoeba_en_fr "How are you?"
    keras-transformer translate saved_models/tatoeba_en_fr --input en.txt --output fr.txt
    keras-transformer translate tatoeba_en_fr "How are you?" --beam-size 1    # a preset, name or directory
    keras-transformer translate runs/mine "How are you?" --plot-attention attention.png  # a training run
    keras-transformer translate my_model.keras "How are you?" --tokenizer my_tokenizer.model
    keras-transformer translate tatoeba_en_fr "How are you?" --n-best 2 --alignments  # JSON lines
    keras-transformer translate tatoeba_en_fr "How are you?" --sampling-topp 0.9 --seed 1
    keras-transformer translate tatoeba_en_fr "How are you?" --target-prefix "Comment vas"
    keras-transformer translate tatoeba_en_fr "Where is the station?" --constraint gare
    keras-transformer translate tatoeba_en_fr --format html --input page.html --output page.fr.html

MODEL is a preset (a shipped name or a preset directory; its own
tokenizer), a SavedModel folder (the translator it was exported from, its
own tokenizer and decoding settings: `Translator.from_saved_model`), or a
`.keras` file with `--tokenizer`.
With `--format text` (the default) each line of the input is a text,
translated sentence by sentence, its placeholders kept; with `--format
html`, each text on the command line, or the whole `--input` file or
standard input, is one HTML document, its markup carried through
(`Translator.translate(format=...)`, `keras_transformer.translation.markup`). Either
way the output has the input's line count.
Each line of output is a translation; with `--scores`, `--n-best` or
`--alignments`, a JSON object of outputs named as the REST API's
(`keras_transformer.translation.translator.prediction`).
Needs no server package (fastapi, uvicorn).
"""

import contextlib
import json
import os
import sys

from keras_transformer.cli.common import (
    add_decoding_arguments,
    add_model_argument,
    add_output_arguments,
    decoding_options,
    output_options,
    progress_bar,
    translate_chunks,
    translate_function,
)
from keras_transformer.translation.markup import FORMATS

NAME = "translate"
HELP = "Translate sentences, a file or standard input with a preset, a SavedModel or a .keras model."


def add_arguments(p):
    add_model_argument(p)
    p.add_argument("text", nargs="*", help="sentences to translate; default: --input, else standard input")
    p.add_argument("--input", help="a text file, one sentence per line")
    p.add_argument("--output", help="write translations here, one per line (default: standard output)")
    p.add_argument("--tokenizer", help="the SentencePiece .model file (with a .keras model)")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text: each line translated sentence by sentence; html: the input is one "
                        "HTML document, its tags put back around the words they wrapped")
    add_decoding_arguments(p)
    add_output_arguments(p)
    p.add_argument("--plot-attention", metavar="FILE.png", help="draw the cross-attention of the first sentence")
    p.add_argument("--head", type=int, default=None, help="plot one head instead of the mean and all heads")


def run(args):
    if args.input and not os.path.isfile(args.input):
        raise SystemExit(f"No input file at {args.input!r}")
    if args.input and args.output and os.path.exists(args.output) and os.path.samefile(args.input, args.output):
        raise SystemExit(  # opening the output empties it before its lines are read
            f"--output names the --input file, whose lines it would overwrite. Received: --input {args.input!r}, "
            f"--output {args.output!r}"
        )
    outputs, sampler = output_options(args)
    if args.head is not None and not args.plot_attention:
        raise ValueError(f"--head applies to --plot-attention. Received: --head {args.head} without it")
    translate, model, tokenizer = translate_function(
        args.model, args.tokenizer, batch_size=args.batch_size, quantize=args.quantize, outputs=outputs,
        sampler=sampler, target_prefix=args.target_prefix, constraints=args.constraints, format=args.format,
        **decoding_options(args)
    )
    if args.plot_attention:  # before the translations, which it draws
        from keras_transformer.translation.attention_plot import check_head

        check_head(args.head, model.transformer_config.num_heads)
    if args.format != "text" and not args.text:
        return _translate_document(translate, args)
    progress = None
    if args.input and args.output:  # on standard error: standard output may carry the translations
        progress = progress_bar(_count_lines(args.input))
    first = None
    with _output(args.output) as out:
        for sentences, translations in translate_chunks(translate, _sentences(args), args.batch_size, progress):
            lines = translations if outputs is None else [json.dumps(t, ensure_ascii=False) for t in translations]
            out.writelines(line + "\n" for line in lines)
            out.flush()  # each chunk as soon as it is translated
            first = first or (sentences[0], translations[0] if outputs is None else translations[0]["translations"])
    if args.plot_attention and first:
        _plot(model, tokenizer, *first, args.plot_attention, args.head)
    return 0


def _translate_document(translate, args):
    """`--input` or standard input as one document of `--format`, written
    as its translation comes: its line ends are the document's."""
    if args.input:
        with open(args.input, "rb") as f:
            document = _decoded(f.read(), f"--input {args.input!r}")
    else:
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        document = _decoded(stream.read(), "standard input")
    with _output(args.output) as out:
        out.write(translate([document])[0])
    return 0


@contextlib.contextmanager
def _output(path):
    if path is None:
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8") as f:
        yield f


def _count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def _sentences(args):
    """The words on the command line, else the lines of `--input`, else of
    standard input: an iterator, read as it is consumed."""
    if args.text:
        return iter(args.text)
    if args.input:
        return _decoded_lines(open(args.input, "rb"), f"--input {args.input!r}", close=True)
    return _decoded_lines(getattr(sys.stdin, "buffer", sys.stdin), "standard input")


def _decoded(data, where):
    """`data`, bytes (or text, as a replaced `sys.stdin` gives), as text
    without a byte-order mark; text that is not UTF-8 ends the command,
    naming `where` and the line."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise SystemExit(
            f"{where} is not UTF-8 text at line {line} "
            f"({error.reason}: {error.object[error.start:error.end]!r})"
        ) from None
    return text.removeprefix("\ufeff")


def _decoded_lines(stream, where, close=False):
    """The lines of `stream` (bytes, or text as a replaced `sys.stdin` is)
    without their line ends; a line that is not UTF-8 ends the command,
    naming `where` and the line. With `close`, `stream` is closed at the end."""
    done = 0
    try:
        for line in stream:
            line = (line.decode("utf-8") if isinstance(line, bytes) else line).rstrip("\r\n")
            yield line.removeprefix("\ufeff") if done == 0 else line
            done += 1
    except UnicodeDecodeError as error:
        raise SystemExit(
            f"{where} is not UTF-8 text at line {done + 1} "
            f"({error.reason}: {error.object[error.start:error.end]!r})"
        ) from None
    finally:
        if close:
            stream.close()


def _plot(model, tokenizer, sentence, translation, path, head):
    from keras_transformer.tokens import pack_source, pack_target, split_target
    from keras_transformer.translation.attention_plot import cross_attention_weights, plot_attention

    source = pack_source(tokenizer.encode(sentence))
    target, _ = split_target(pack_target(tokenizer.encode_target(translation)))
    weights = cross_attention_weights(model, source, target)
    plot_attention(
        weights, tokenizer.source_id_to_piece(source[:-1]) + ["</s>"], ["<s>"] + tokenizer.id_to_piece(target[1:]),
        path, head=head, title=f"{sentence} → {translation}",
    )
    print(f"Attention plot written to {path}", file=sys.stderr)
