"""Text as it comes, to the sentences a model translates: one rule, a Python and a graph face.

Our models, like most, learned to translate one sentence at a time, from
clean text. Every path that translates or trains reads these rules here:
the `Translator` (`keras_transformer.translation.preprocessor`), the SavedModel's graph,
the server, the command line and the training data.

- **Invisible characters.** Before a text is tokenized, a byte-order mark
  (U+FEFF), a word joiner (U+2060) and a soft hyphen (U+00AD) are removed,
  and a zero-width space (U+200B) and the no-break spaces (U+00A0, U+2007,
  U+202F) become a space (`normalize`). Files and web pages carry them; the
  tokenizers never saw them in training and translate them as unknown words.
- **Sentences.** A text is its leading whitespace, its sentences with the
  whitespace between them (its gaps), and its trailing whitespace, so that
  `lead + s1 + gap1 + s2 + ... + sn + trail == text` (`segment`). A gap is
  - each run of whitespace that holds a line break: a line is never part of
    another line's sentence, and blank lines are gaps too;
  - the run of whitespace after a sentence end, where the next character is
    not a lowercase letter. A sentence end is one or more of `. ! ? …`, then
    any closing quotes or brackets; the period of an abbreviation
    (`ABBREVIATIONS`: "Mr.", "e.g.", "z.B.", "M.", ...) or of an initial (a
    single capital letter, as in "J. K. Rowling") ends none.
  A text with no gap is one sentence; a blank text (empty or whitespace only)
  has none, and its whitespace is its lead.
- **A sentence over the length budget** (`keras_transformer.translation.preprocessor`,
  "Long input") is cut more finely before it is cut into windows: after
  every sentence end followed by whitespace, whatever comes next (the
  period of an abbreviation too), the whitespace dropped (`cut_long`).

The rule's regular expressions are written once and read by both faces:
Python's `re` (`segment`, `cut_long`, `normalize`) and TensorFlow's RE2
(`segment_graph`, `cut_long_graph`, `normalize_graph`, for the SavedModel
and tf.data). They
use no look-around and no class that the two engines read differently (the
lowercase letters are spelled out, from Python's Unicode tables), so both
faces cut every text at the same places; the tests check them against each
other. `benchmarks/sentence_splitting.py` measures the rule against
sentence-splitting packages on the shipped test splits (docs/decoding.md,
"Translate documents").

Example:

>>> segment("  Mr. Smith is here. Who?\\n\\nNobody.\\n")
('  ', ['Mr. Smith is here.', 'Who?', 'Nobody.'], [' ', '\\n\\n'], '\\n')
>>> normalize("I\\u00a0love\\u200byou.")
'I love you.'
"""

import functools
import re
import unicodedata

# ------------------------------------------------------------ normalizing
_REMOVED = "\ufeff\u2060\u00ad"
_SPACES = "\u200b\u00a0\u2007\u202f"
_NORMALIZE = str.maketrans({**dict.fromkeys(_REMOVED, None), **dict.fromkeys(_SPACES, " ")})


def normalize(text):
    """`text` with its invisible characters removed or made spaces (the rule above)."""
    return text.translate(_NORMALIZE)


def normalize_graph(strings):
    """`normalize` of each of `strings` (a string tensor), in TensorFlow ops."""
    import tensorflow as tf  # the graph face only: not the Python face's

    strings = tf.strings.regex_replace(strings, _char_class(_REMOVED), "")
    return tf.strings.regex_replace(strings, _char_class(_SPACES), " ")


# ------------------------------------------------------------ sentences
# Titles and other words whose period ends no sentence, in English, French
# and German, each as it is written (case matters: "No. 5", but "I said no.").
ABBREVIATIONS = (
    # English
    "Mr", "Mrs", "Ms", "Mx", "Dr", "Prof", "Sr", "Jr", "St", "Mt", "Ft", "Gen", "Col", "Capt", "Lt", "Sgt", "Rev",
    "Hon", "Gov", "Sen", "Rep", "Pres", "Messrs", "No", "Nos", "Vol", "Vols", "Fig", "Figs", "Eq", "Ch", "Sec",
    "Art", "Inc", "Ltd", "Co", "Corp", "Bros", "approx", "max", "min", "vs", "cf", "ca", "al", "e.g", "i.e", "a.m",
    "p.m",
    # French
    "M", "MM", "Mme", "Mmes", "Mlle", "Mlles", "Me", "Pr", "Ste", "av", "bd", "env", "p", "pp", "vol", "chap",
    # German
    "Hr", "Hrn", "Fr", "Frl", "Nr", "Str", "bzw", "ggf", "evtl", "vgl", "inkl", "zzgl", "sog", "Abs", "Bd", "Jh",
    "Tel", "Mio", "Mrd", "z.B", "d.h", "u.a", "o.ä", "u.U", "z.T", "s.o", "s.u",
)
# Unicode noncharacters, for internal use: a period and an ellipsis that
# end no sentence stand for themselves while a text is cut, and the cuts
# are marked (an input's own are removed first).
_KEEP_PERIOD, _KEEP_ELLIPSIS, _CUT = "\ufdd0", "\ufdd2", "\ufdd1"
_ENDS = ".!?\u2026"
_CLOSERS = "\"')]}\u00bb\u201d\u2019\u201c\u2018"  # German closes with \u201c and \u2018
# Those of them that never open a sentence.
_ONLY_CLOSERS = ")]}\u00bb\u201d"
# French sets a closing guillemet off with a (no-break) space: "« Non. »".
_SPACED_CLOSERS = "\u00bb"
# What goes on a sentence and starts none: a dash or a comma, colon or semicolon.
_GOES_ON = "-\u2010\u2011\u2012\u2013\u2014\u2015,;:"
_OPENERS = "\"'([{\u00ab\u201c\u2018\u00bf\u00a1"
# str.splitlines' line breaks, all of them whitespace.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
# German writes a date's day as an ordinal: "am 3. Mai".
_MONTHS = ("Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober",
           "November", "Dezember")


def _char_class(chars, negated=False):
    """A character class of `chars` that Python's `re` and RE2 read alike
    (each as `\\x{...}` for RE2, `\\U...` for Python: `_python`)."""
    codes = sorted({ord(c) for c in chars})
    ranges, start = [], None
    for i, code in enumerate(codes):
        start = code if start is None else start
        if i + 1 == len(codes) or codes[i + 1] != code + 1:
            ranges.append(f"\\x{{{start:x}}}" + ("" if code == start else f"-\\x{{{code:x}}}"))
            start = None
    return "[" + ("^" if negated else "") + "".join(ranges) + "]"


def _python(pattern):
    """An RE2 pattern of this module as Python's `re` writes it: `\\x{h}` as `\\Uhhhhhhhh`."""
    return re.sub(r"\\x\{([0-9a-f]+)\}", lambda m: f"\\U{int(m.group(1), 16):08x}", pattern)


@functools.cache
def _rule():
    """`(space, steps)`: the class of whitespace, and the `(pattern,
    replacement)` steps that cut a text's core (its outer whitespace
    stripped): each protected period or ellipsis replaced by its
    stand-in, then each gap put between two `_CUT`s, so that the core
    reads sentence, gap, sentence, ... between them. RE2 patterns, made at
    first use (reading the Unicode tables takes a moment)."""
    def chars(test):  # every cased letter and space is below U+20000
        return "".join(chr(c) for c in range(0x20000) if test(chr(c)))

    spaces = chars(str.isspace)  # `str.isspace`, spelled out: RE2's `\\s` and Python's differ
    space = _char_class(spaces)
    upper = chars(lambda c: unicodedata.category(c) in ("Lu", "Lt"))
    # A character that may start a sentence: not whitespace, a lowercase
    # letter, a closing quote or bracket, or what goes on a sentence.
    starts = _char_class(spaces + chars(lambda c: unicodedata.category(c) == "Ll") + _ONLY_CLOSERS + _GOES_ON,
                         negated=True)
    # A word's start: the text's, or after whitespace or an opening quote or bracket.
    word_start = "(^|" + _char_class(spaces + _OPENERS) + ")"
    period = _char_class(".")
    abbreviations = "|".join(re.escape(a).replace("\\.", period) for a in ABBREVIATIONS)
    closers = "(?:" + _char_class(_CLOSERS) + "|" + space + "?" + _char_class(_SPACED_CLOSERS) + ")*"
    # An ellipsis goes on a sentence unless a capital letter comes after it.
    not_capital = _char_class(spaces + upper, negated=True)
    steps = [
        # The period of an abbreviation or an initial.
        (word_start + "(" + abbreviations + "|" + _char_class(upper) + ")" + period, "\\1\\2" + _KEEP_PERIOD),
        # A date's ordinal day.
        (word_start + "([0-9]{1,2})" + period + "(" + space + "+(?:" + "|".join(_MONTHS) + "))",
         "\\1\\2" + _KEEP_PERIOD + "\\3"),
        # An ellipsis that goes on its sentence.
        (_char_class("\u2026") + "(" + closers + space + "+" + not_capital + ")", _KEEP_ELLIPSIS + "\\1"),
        (period + "{3}(" + closers + space + "+" + not_capital + ")", _KEEP_PERIOD * 3 + "\\1"),
        # A gap: (end marks and closers)(whitespace)(the next sentence's
        # first character), or (whitespace holding a line break).
        ("(" + _char_class(_ENDS) + "+" + closers + ")(" + space + "+)(" + starts + ")|(" + space + "*"
         + _char_class(_LINE_BREAKS) + space + "*)", "\\1" + _CUT + "\\2\\4" + _CUT + "\\3"),
    ]
    return space, steps


@functools.cache
def _python_steps():
    return [(re.compile(_python(pattern)), replacement) for pattern, replacement in _rule()[1]]


_STAND_INS = _KEEP_PERIOD + _KEEP_ELLIPSIS + _CUT


def _restore(sentence):
    return sentence.replace(_KEEP_PERIOD, ".").replace(_KEEP_ELLIPSIS, "\u2026")


def segment(text):
    """`(lead, sentences, gaps, trail)` of `text` by the rule above: `lead
    + s1 + gaps[0] + s2 + ... + sn + trail == text`, and `gaps` has one
    fewer entry than `sentences`."""
    core = text.strip()
    start = len(text) - len(text.lstrip())
    lead, trail = text[:start], text[start + len(core):]
    if not core:
        return text, [], [], ""
    core = core.translate(dict.fromkeys(map(ord, _STAND_INS)))
    for pattern, replacement in _python_steps():
        core = pattern.sub(replacement, core)
    parts = core.split(_CUT)
    return lead, [_restore(p) for p in parts[::2]], parts[1::2], trail


def segment_graph(strings):
    """`segment` of each of `strings` `(n,)`, in TensorFlow ops.

    Returns `(lead, sentences, gaps, trail)`: `lead` and `trail` `(n,)`,
    `sentences` ragged `(n, None)` and `gaps` ragged `(n, None)`, one fewer
    in each row than its sentences (none for a blank text).
    """
    import tensorflow as tf  # the graph face only: not the Python face's

    space, steps = _rule()
    stripped = tf.strings.regex_replace(strings, "^" + space + "+", "")
    core = tf.strings.regex_replace(stripped, space + "+$", "")
    length, kept = tf.strings.length(strings), tf.strings.length(core)
    lead = tf.strings.substr(strings, tf.zeros_like(length), length - tf.strings.length(stripped))
    trail = tf.strings.substr(stripped, kept, tf.strings.length(stripped) - kept)
    marked = tf.strings.regex_replace(core, _char_class(_STAND_INS), "")
    for pattern, replacement in steps:
        marked = tf.strings.regex_replace(marked, pattern, replacement)
    parts = tf.strings.split(marked, _CUT)  # (n, None): sentence, gap, sentence, ...
    blank = tf.strings.length(core) == 0
    rows = parts.value_rowids()  # (parts,)
    position = tf.range(tf.size(rows, out_type=tf.int64)) - tf.gather(parts.row_starts(), rows)
    kept = ~tf.gather(blank, rows)  # a blank text's one empty part is no sentence
    count = tf.size(strings, out_type=tf.int64)

    def pick(mask):
        return tf.RaggedTensor.from_value_rowids(tf.boolean_mask(parts.flat_values, mask), tf.boolean_mask(rows, mask),
                                                 nrows=count, validate=False)

    sentences = pick(kept & (position % 2 == 0))
    sentences = sentences.with_flat_values(_restore_graph(sentences.flat_values))
    gaps = pick(kept & (position % 2 == 1))
    lead = tf.where(blank, strings, lead)
    trail = tf.where(blank, "", trail)
    return lead, sentences, gaps, trail


def _restore_graph(sentences):
    import tensorflow as tf  # the graph face only: not the Python face's

    return tf.strings.regex_replace(tf.strings.regex_replace(sentences, _KEEP_PERIOD, "."), _KEEP_ELLIPSIS, "\u2026")


# ------------------------------------------------------------ long sentences
@functools.cache
def _long_rule():
    """The RE2 pattern of a sentence end where `cut_long` cuts: `(end marks
    and closers)(whitespace)`."""
    return "(" + _char_class(_ENDS) + "+" + _char_class(_CLOSERS) + "*)" + _rule()[0] + "+"


def cut_long(text):
    """The parts of a text over the length budget (the rule above), in order."""
    text = text.translate(dict.fromkeys(map(ord, _STAND_INS)))
    return re.sub(_python(_long_rule()), "\\1" + _CUT, text).split(_CUT)


def cut_long_graph(strings):
    """`cut_long` of each of `strings` `(n,)`, in TensorFlow ops: ragged `(n, None)`."""
    import tensorflow as tf  # the graph face only: not the Python face's

    strings = tf.strings.regex_replace(strings, _char_class(_STAND_INS), "")
    return tf.strings.split(tf.strings.regex_replace(strings, _long_rule(), "\\1" + _CUT), _CUT)
