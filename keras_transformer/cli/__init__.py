"""The `keras-transformer` command line, one module per command.

    keras-transformer train --train-file my_train.tsv --valid-file my_valid.tsv --architecture small \
        --output-dir runs/small          # the run ends as a preset: translate, evaluate and export take it
    keras-transformer translate runs/small --input my_test.en --output my_test.fr
    keras-transformer average-checkpoints runs/small/checkpoints --last 5 \
        --output runs/small/average.weights.h5
    keras-transformer preset runs/small --average 5 --weights-dtype float16 --output my_preset
    keras-transformer export my_preset --output-dir saved_models/mine
    keras-transformer export tatoeba_en_fr --output-dir saved_models/tatoeba_en_fr   # with its tokenizer
    keras-transformer translate saved_models/tatoeba_en_fr "Where is the station?"
    keras-transformer translate tatoeba_en_fr "Where is the station?"       # a preset: name or directory
    keras-transformer evaluate saved_models/tatoeba_en_fr --corpus tatoeba_en_fr --split test
    keras-transformer serve saved_models/tatoeba_en_fr --port 8501   # pip install -e ".[serve]" first
    keras-transformer import hf://Helsinki-NLP/opus-mt-en-de --output opus_mt_en_de   # an OPUS-MT model

The `keras-transformer` command hides TensorFlow's start-up lines (CUDA
drivers, cuInit, oneDNN, CPU features) unless `--verbose` is given, before
or after the command (`keras_transformer_command`, the launcher pip
installs). `python -m keras_transformer.cli` is the same command line
without that.

A command is a module with `NAME`, `HELP`, `add_arguments(parser)` and
`run(args)`, listed in `COMMANDS`. Command modules import nothing from this
one, and Keras and TensorFlow only inside `run`.

Example:

>>> from keras_transformer.cli import main
>>> main(["translate", "tatoeba_en_fr", "I love you."])
Je t'aime.
0
"""

import argparse
import re
import sys

from keras_transformer.cli import (
    average_checkpoints,
    evaluate,
    export,
    import_model,
    preset,
    score,
    serve,
    train,
    translate,
)

COMMANDS = (train, average_checkpoints, preset, import_model, export, translate, score, evaluate, serve)

VERBOSE_HELP = "show TensorFlow's start-up lines (CUDA drivers, cuInit, oneDNN), which the command hides otherwise"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """`--help` that gives every option's default: "(default: X)" after its
    help, unless the help already says it or there is none to give (an
    option off or unset: `None`, `False`, an empty list)."""

    def _get_help_string(self, action):
        help = action.help or ""
        default = action.default
        unset = default is None or default is False or default == [] or default is argparse.SUPPRESS
        if unset or not action.option_strings or "default" in help:
            return help
        return help + " (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """A command's parser, which keeps the options added to it in
    `options` (argparse lists them only in a private attribute)."""

    def __init__(self, *args, **kwargs):
        self.options = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.options.append(action)
        return action

    def add_argument_group(self, *args, **kwargs):
        group = super().add_argument_group(*args, **kwargs)
        add_argument = group.add_argument

        def add_and_keep(*args, **kwargs):
            action = add_argument(*args, **kwargs)
            self.options.append(action)
            return action

        group.add_argument = add_and_keep
        return group


def build_parser():
    """The `argparse` parser: one sub-parser per command, in `parser.commands`."""
    parser = argparse.ArgumentParser(
        prog="keras-transformer",
        description='The Transformer of "Attention Is All You Need" in Keras 3.',
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                       parser_class=CommandParser)
    parser.commands = {}
    for command in COMMANDS:
        sub = subparsers.add_parser(command.NAME, help=command.HELP, description=command.HELP,
                                    formatter_class=HelpFormatter)
        command.add_arguments(sub)
        # Also after the command; absent, it leaves the global flag's value alone.
        sub.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
        sub.set_defaults(run=command.run, command=command.NAME)
        parser.commands[command.NAME] = sub
    return parser


def parse_arguments(argv=None):
    """The parsed command line; a command's words may come after its options.

    `translate MODEL --batch-size 8 "Hi."` is refused by a plain
    `parse_args` (a `nargs="*"` positional is consumed, empty, before the
    options), so the command's own parser reads its part intermixed.

    >>> parse_arguments(["translate", "model", "--batch-size", "8", "Hi.", "--verbose"]).verbose
    True
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    before = parser.parse_known_args(argv)[0]
    name = before.command
    args = parser.commands[name].parse_intermixed_args(argv[argv.index(name) + 1 :])
    args.verbose = before.verbose or getattr(args, "verbose", False)
    args.flags = flags_of(parser.commands[name])
    return args


def flags_of(parser):
    """`{argument: (flag, is_switch)}` of a command's options: the Python
    argument each sets, its flag, and whether it takes no value.

    >>> flags_of(build_parser().commands["translate"])["batch_size"]
    ('--batch-size', False)
    """
    return {action.dest: (max(action.option_strings, key=len), action.nargs == 0)
            for action in parser.options if action.option_strings and action.dest not in ("help", "verbose")}


def in_flag_terms(message, flags):
    """`message` with the Python arguments it names (`` `beam_size` ``,
    `beam_size=2`) named as the command's flags; the arguments the command
    has no flag for stay as they are.

    >>> in_flag_terms("`beam_size` applies to a preset. Received: beam_size=2, narrow_batches=True",
    ...               {"beam_size": ("--beam-size", False), "narrow_batches": ("--narrow-batches", True)})
    '`--beam-size` applies to a preset. Received: --beam-size=2, --narrow-batches'
    """
    for name, (flag, switch) in flags.items():
        message = message.replace(f"`{name}`", f"`{flag}`")
        if switch:
            message = re.sub(rf"(?<![-\w]){name}=True\b", flag, message)
        message = re.sub(rf"(?<![-\w]){name}=", f"{flag}=", message)
    return message


def main(argv=None):
    """Runs the command line `argv` (default `sys.argv[1:]`); returns 0 on success.

    A bad argument or a missing, existing or unreadable file (`ValueError`,
    `OSError`) is reported with the command's flags where the library's
    message names the Python arguments they set (`in_flag_terms`). As the
    process's command line, it ends the process with that one-line message
    on stderr and status 1, not a traceback; called with `argv`, as from
    Python, the exception is raised, with that message.
    """
    args = parse_arguments(argv)
    try:
        return args.run(args) or 0
    except (ValueError, OSError) as error:
        if len(error.args) == 1 and isinstance(error.args[0], str):
            error.args = (in_flag_terms(error.args[0], args.flags),)
        if argv is not None:
            raise
        raise SystemExit(f"keras-transformer {args.command}: error: {error}") from error
