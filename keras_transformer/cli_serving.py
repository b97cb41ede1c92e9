"""`keras-transformer` subcommands around a trained model: export, translate,
evaluate, serve.

    keras-transformer export runs/model.keras --tokenizer runs/tokenizer.model \
        --output-dir saved_models/tatoeba_en_fr
    keras-transformer translate saved_models/tatoeba_en_fr "How are you?"
    keras-transformer translate saved_models/tatoeba_en_fr --input en.txt --output fr.txt
    keras-transformer translate runs/model.keras "How are you?" \
        --tokenizer runs/tokenizer.model --plot-attention attention.png
    keras-transformer evaluate saved_models/tatoeba_en_fr --corpus tatoeba_en_fr --split test
    keras-transformer serve saved_models/tatoeba_en_fr --port 8501
"""

import argparse
import json
import os
import sys

from keras_transformer.cli import command


def _load_keras_model(path, weights=None):
    """A `.keras` file, or a training run folder (`run.json`) with `weights`
    (e.g. the output of `average-checkpoints`)."""
    import keras

    from keras_transformer import Transformer
    from keras_transformer.training.manifest import read_manifest

    if os.path.isdir(path):
        manifest = read_manifest(path)
        if manifest is None or not weights:
            raise SystemExit(
                f"{path!r} is a folder: expected a training run (run.json) and --weights "
                "(a .weights.h5 file, e.g. from average-checkpoints)"
            )
        model = Transformer(**manifest.get("identity", manifest)["model"])
        model.build(((None, None), (None, None)))
        model.load_weights(weights)
        return model
    if not os.path.isfile(path):
        raise SystemExit(f"No model file at {path!r} (expected a .keras file or a run folder)")
    return keras.saving.load_model(path, compile=False)


def _positive_int(text):
    """An argparse `type`: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1. Received: {text}")
    return value


def _load_tokenizer(path):
    import sentencepiece as spm

    if not path or not os.path.isfile(path):
        raise SystemExit(f"--tokenizer must name a SentencePiece .model file. Received: {path!r}")
    return spm.SentencePieceProcessor(model_file=path)


# ---------------------------------------------------------------- export


def _export_arguments(p):
    p.add_argument("model", help="the trained model: a .keras file, or a training run folder with --weights")
    p.add_argument("--weights", help="with a run folder: the .weights.h5 to export (e.g. averaged checkpoints)")
    p.add_argument("--tokenizer", required=True, help="its SentencePiece .model file")
    p.add_argument("--output-dir", required=True, help="saved_models/<name>; the version folder goes inside")
    p.add_argument("--version", type=int, default=None, help="default: one more than the highest there")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--alpha", type=float, default=0.6, help="length penalty exponent")
    p.add_argument("--max-extra-length", type=int, default=50, help="output length limit: input length + this")
    p.add_argument("--n-best", type=int, default=1)
    p.add_argument("--buckets", type=int, nargs="+", default=None,
                   help="source lengths the graph pads to, one graph branch each (default: 16 32 64 128 "
                        "and the longest input); fewer buckets, a smaller SavedModel")
    p.add_argument("--metadata", default=None,
                   help='a JSON object added to assets.extra/metadata.json, e.g. \'{"bleu": 50.1}\'')


@command("export", "Export a trained model as a SavedModel that translates strings (TF Serving layout).", _export_arguments)
def run_export(args):
    from keras_transformer.export import export

    from keras_transformer.export import DEFAULT_BUCKETS

    metadata = None
    if args.metadata is not None:
        try:
            metadata = json.loads(args.metadata)
        except ValueError as error:
            raise SystemExit(f"--metadata must be a JSON object ({error}). Received: {args.metadata!r}")
        if not isinstance(metadata, dict):
            raise SystemExit(f"--metadata must be a JSON object. Received: {args.metadata!r}")
    model = _load_keras_model(args.model, args.weights)
    path = export(
        model, args.tokenizer, args.output_dir, version=args.version, beam_size=args.beam_size,
        alpha=args.alpha, max_extra_length=args.max_extra_length, n_best=args.n_best,
        buckets=tuple(args.buckets or DEFAULT_BUCKETS), metadata=metadata,
    )
    print(f"Exported {path}")
    return 0


# ---------------------------------------------------------------- translate


def _translate_arguments(p):
    p.add_argument("model", help="a SavedModel folder (saved_models/<name>) or a .keras file")
    p.add_argument("text", nargs="*", help="sentences to translate; default: --input, else standard input")
    p.add_argument("--input", help="a text file, one sentence per line")
    p.add_argument("--output", help="write translations here, one per line (default: standard output)")
    p.add_argument("--tokenizer", help="the SentencePiece .model file (with a .keras model)")
    p.add_argument("--batch-size", type=_positive_int, default=32)
    p.add_argument("--beam-size", type=int, default=4, help="with a .keras model")
    p.add_argument("--alpha", type=float, default=0.6, help="with a .keras model")
    p.add_argument("--plot-attention", metavar="FILE.png",
                   help="draw the cross-attention of the first sentence (with a .keras model)")
    p.add_argument("--head", type=int, default=None, help="plot one head instead of the mean and all heads")


def _saved_model_translate(path):
    from keras_transformer.serving.server import load_saved_model_predictor

    predict, _ = load_saved_model_predictor(path)
    return lambda texts: [row["translations"] for row in predict(texts)]


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


@command("translate", "Translate sentences, a file or standard input with a SavedModel or a .keras model.", _translate_arguments)
def run_translate(args):
    import keras

    if args.text:
        sentences = args.text
    elif args.input:
        if not os.path.isfile(args.input):
            raise SystemExit(f"No input file at {args.input!r}")
        with open(args.input, encoding="utf-8") as f:
            sentences = [line.rstrip("\n") for line in f]
    else:
        sentences = [line.rstrip("\n") for line in sys.stdin]
    keras_model = args.model.endswith(".keras")
    if args.plot_attention and not keras_model:
        raise SystemExit("--plot-attention needs a .keras model and --tokenizer (a SavedModel returns no attention)")
    if keras_model:
        from keras_transformer.decoding import Translator

        model, tokenizer = _load_keras_model(args.model), _load_tokenizer(args.tokenizer)
        translate = Translator(model, tokenizer, beam_size=args.beam_size, alpha=args.alpha).translate
    else:
        translate = _saved_model_translate(args.model)
    progress = keras.utils.Progbar(len(sentences), unit_name="sentence") if args.input else None
    translations = []
    for start in range(0, len(sentences), args.batch_size):
        translations += translate(sentences[start : start + args.batch_size])
        if progress:
            progress.update(len(translations))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.writelines(t + "\n" for t in translations)
    else:
        for line in translations:
            print(line)
    if args.plot_attention and sentences:
        _plot(model, tokenizer, sentences[0], translations[0], args.plot_attention, args.head)
    return 0


# ---------------------------------------------------------------- evaluate


def _evaluate_arguments(p):
    p.add_argument("model", help="a SavedModel folder (saved_models/<name>) or a .keras file")
    p.add_argument("--corpus", default="tatoeba_en_fr", help="a shipped corpus (keras_transformer.datasets)")
    p.add_argument("--split", default="test", choices=["train", "validation", "test"])
    p.add_argument("--tsv", help="score a TSV file (source, reference) instead of --corpus")
    p.add_argument("--tokenizer", help="the SentencePiece .model file (with a .keras model)")
    p.add_argument("--limit", type=_positive_int, default=None, help="only the first N sources")
    p.add_argument("--batch-size", type=_positive_int, default=64)
    p.add_argument("--beam-size", type=int, default=4, help="with a .keras model")
    p.add_argument("--alpha", type=float, default=0.6, help="with a .keras model")


@command("evaluate", "Translate a test set and score it with sacreBLEU and chrF (every reference of a source).", _evaluate_arguments)
def run_evaluate(args):
    import keras

    from keras_transformer import datasets
    from keras_transformer.data import read_tsv
    from keras_transformer.evaluation import corpus_bleu

    pairs = list(read_tsv(args.tsv)) if args.tsv else datasets.load(args.corpus, args.split)
    sources, references = datasets.references(pairs)
    sources, references = sources[: args.limit], references[: args.limit]
    if args.model.endswith(".keras"):
        from keras_transformer.decoding import Translator

        model, tokenizer = _load_keras_model(args.model), _load_tokenizer(args.tokenizer)
        translate = Translator(model, tokenizer, beam_size=args.beam_size, alpha=args.alpha).translate
    else:
        translate = _saved_model_translate(args.model)
    progress = keras.utils.Progbar(len(sources), unit_name="sentence")
    hypotheses = []
    for start in range(0, len(sources), args.batch_size):
        hypotheses += translate(sources[start : start + args.batch_size])
        progress.update(len(hypotheses))
    bleu, bleu_signature, chrf, chrf_signature = corpus_bleu(hypotheses, references)
    print(f"{len(sources)} sources")
    print(f"{bleu}  ({bleu_signature})")
    print(f"{chrf}  ({chrf_signature})")
    return 0


# ---------------------------------------------------------------- serve


def _serve_arguments(p):
    p.add_argument("model_dir", help="saved_models/<name> (its highest version is served)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8501,
                   help='0 takes a free port; "Serving <name> at http://<host>:<port>" is printed once bound')
    p.add_argument("--name", default=None, help="model name in the URLs; default: the folder's name")
    p.add_argument("--max-instances", type=int, default=None,
                   help="inputs per request (default: 64, at most --max-batch-size)")
    p.add_argument("--max-characters", type=int, default=2000, help="characters per input")
    p.add_argument("--max-body-bytes", type=int, default=1 << 20)
    p.add_argument("--request-timeout", type=float, default=30.0, help="seconds")
    p.add_argument("--max-batch-size", type=int, default=64, help="inputs per model call, across requests")


@command("serve", "Serve a SavedModel over TF Serving's REST API (POST /v1/models/<name>:predict).", _serve_arguments)
def run_serve(args):
    """Serves until SIGINT or SIGTERM, then exits with status 0 once the
    requests in flight are answered."""
    from keras_transformer.serving import ServingLimits, serve

    limits = ServingLimits(
        max_instances=args.max_instances, max_characters=args.max_characters,
        max_body_bytes=args.max_body_bytes, request_timeout_s=args.request_timeout,
        max_batch_size=args.max_batch_size,
    )
    serve(args.model_dir, host=args.host, port=args.port, name=args.name, limits=limits)
    return 0
