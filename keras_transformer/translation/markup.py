"""Documents as they come: markup and placeholders carried through a translation by word alignment.

A document is cut into runs of text to translate, and what is kept as it
is around them. Each run goes to the model as plain text, without its
markup and placeholders (so that it translates exactly as the same text
would alone); each tag and placeholder is then put back by the word
alignment (`keras_transformer.translation.alignment`, `Translator.hypotheses(...,
alignments=True)`):

- **A tag** wraps the target words aligned to the source words it wrapped:
  from the first of them to the last. Tags stay nested as they were: a tag
  is kept inside its parent, and a tag that would overlap the one before it
  starts where that one ends. Where none of its words has an aligned target
  word, it wraps those of the nearest source word that has (the next one
  first): the model translated them together. A tag that wrapped no word
  comes back empty where the alignment puts its place. An end before a
  word's trailing punctuation stays before the target word's, and a
  target word of punctuation alone is left outside (`<b>you</b>.` gives
  `<b>t'aime</b>.`).
- **A placeholder** (`PLACEHOLDER`: `{0}`, `{name}`, `%s`, `%(name)d`, a
  URL, an e-mail address) goes after the target word aligned to the source
  word before it (before the one aligned to the word after it, at a run's
  start), with the spaces it had; one before a word's trailing punctuation
  stays before the target word's (`Where is %s?` keeps `%s` before `?`). Each comes back exactly once, unchanged.
- **`format="text"`**: each line of a document is a run, and line breaks
  are kept as they are.
- **`format="html"`** (`html.parser`, the standard library's): text is
  decoded (`&amp;` is `&`), translated and escaped again (`&`, `<`, `>`).
  Block elements (`BLOCKS`) and `<br>` end a run; inline elements are the
  tags above. The content of `<code>`, `<pre>`, `<script>`, `<style>`, of
  `<textarea>` and of any element with `translate="no"` is kept verbatim
  (inside a run, as a placeholder), and so are start tags with their
  attributes, comments and declarations. Whitespace inside a run is read
  as HTML reads it, one space; its line breaks follow the run, so a page
  keeps its line count. HTML that can be repaired is: an element left open
  is closed at its parent's end, and a `<p>`, `<li>`, `<td>` ... that the
  next one of its kind implies closed is closed. An end tag that closes no
  open element cannot be: it raises `ValueError`, naming the text and the
  line and column.

Example:

>>> translate(["Hello <b>world</b>!"], "html", align, plain)
['Bonjour <b>le monde</b> !']
"""

import html
import html.parser
import re
from typing import NamedTuple

from keras_transformer.translation.sentences import normalize

FORMATS = ("text", "html")

# Placeholders: format fields ({0}, {name}, {{ name }}), printf conversions
# (%s, %(name)d, %-5.2f, %%), URLs and e-mail addresses. A URL's trailing
# punctuation is the sentence's, not the URL's.
PLACEHOLDER = re.compile(
    r"\{\{[^{}]*\}\}|\{[^{}\s]*\}"
    r"|%(?:\([A-Za-z_][A-Za-z0-9_]*\))?[-#0+]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[diouxXeEfFgGcrsa%]"
    r"|\b(?:https?|ftp)://[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"
    r"|\bwww\.[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"
    r"|\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
# Elements whose content is kept verbatim, and elements that end a run.
VERBATIM = {"code", "pre", "script", "style", "textarea"}
BLOCKS = {
    "address", "article", "aside", "blockquote", "body", "br", "caption", "col", "colgroup", "dd", "details",
    "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
    "h6", "head", "header", "hgroup", "hr", "html", "li", "link", "main", "menu", "meta", "nav", "ol", "optgroup",
    "option", "p", "section", "select", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title", "tr",
    "ul",
}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# An open element that a start tag of one of these closes (HTML's optional end tags).
IMPLIED_ENDS = {"p": {"p"}, "li": {"li"}, "dt": {"dt", "dd"}, "dd": {"dt", "dd"}, "tr": {"tr", "td", "th"},
                "td": {"td", "th"}, "th": {"td", "th"}, "option": {"option"}}
_TRAILING = re.compile(r"[\W_]*$")  # a word's trailing punctuation
_LEADING = re.compile(r"^[\W_]*")


def check_format(format):
    if format not in FORMATS:
        raise ValueError(f"Argument `format` must be one of {FORMATS}. Received: format={format!r}")


def has_placeholders(text):
    return PLACEHOLDER.search(text) is not None


class Element(NamedTuple):
    """A tag around part of a run: `start` and `end` offsets in the run's
    text, its raw start tag and its end tag, and the tags inside it."""

    start: int
    end: int
    open: str
    close: str
    children: list


class Atom(NamedTuple):
    """Something kept as it is at `offset` in a run's text: a placeholder or
    a verbatim element; `before` and `after`: whether whitespace was there."""

    offset: int
    raw: str
    before: bool
    after: bool


class Run:
    """Text to translate, with its tags (a tree of `Element`s) and atoms.

    `text` is what the model translates; `escape` is applied to the
    translated text when the document is written (HTML's escaping, or none).
    """

    def __init__(self, escape):
        self.parts, self.root, self.escape = [], Element(0, 0, "", "", []), escape
        self.stack = [self.root]

    @property
    def text(self):
        return "".join(self.parts)

    def add_text(self, text):
        self.parts.append(text)

    def length(self):
        return sum(map(len, self.parts))

    def add_atom(self, raw):
        self.stack[-1].children.append(Atom(self.length(), raw, False, False))

    def open(self, raw, tag):
        element = Element(self.length(), None, raw, f"</{tag}>", [])
        self.stack[-1].children.append(element)
        self.stack.append(element)

    def close(self):
        element = self.stack.pop()
        parent = self.stack[-1]
        parent.children[parent.children.index(element)] = element._replace(end=self.length())

    def empty(self):
        return not self.text.strip() and not self.root.children


# ------------------------------------------------------------ runs from documents
def text_runs(document):
    """`format="text"`: each line a run, its line break kept as it is."""
    return [part if i % 2 else _run_of_text(part, lambda text: text)
            for i, part in enumerate(re.split(f"({_LINE_BREAK})", document))]


_LINE_BREAK = r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]"


def _run_of_text(text, escape):
    run = Run(escape)
    run.add_text(text)
    return run


class _Node:
    """An HTML element: its tag, raw start tag, children (nodes, `_Text`s and
    raw strings), and whether it is closed by an end tag of its own."""

    def __init__(self, tag, raw, attrs, closes):
        self.tag, self.raw, self.attrs, self.closes, self.children = tag, raw, dict(attrs), closes, []

    @property
    def kept(self):
        """Whether its content is kept verbatim."""
        return self.tag in VERBATIM or self.attrs.get("translate") == "no"

    @property
    def block(self):
        return self.tag in BLOCKS or self.tag in ("pre", "script", "style") or any(
            isinstance(c, _Node) and c.block for c in self.children)

    def source(self):
        """The element as markup: its start tag, content and end tag."""
        inner = "".join(c.source() if isinstance(c, (_Node, _Text)) else c for c in self.children)
        return self.raw + inner + (f"</{self.tag}>" if self.closes else "")


class _Text(NamedTuple):
    raw: str  # as written, entities and all
    text: str  # as read

    def source(self):
        return self.raw


class _Tree(html.parser.HTMLParser):
    """An HTML document as a tree of `_Node`s, repaired where it can be."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.root = _Node(None, "", (), False)
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        if self.stack[-1].tag in IMPLIED_ENDS.get(tag, ()):
            self.stack.pop()
        node = _Node(tag, self.get_starttag_text(), attrs, tag not in VOID)
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(_Node(tag, self.get_starttag_text(), attrs, False))

    def handle_endtag(self, tag):
        open_tags = [node.tag for node in self.stack[1:]]
        if tag not in open_tags:
            line, column = self.getpos()
            raise _Broken(f"the end tag </{tag}> at line {line}, column {column + 1} closes no open element")
        while self.stack.pop().tag != tag:  # elements left open inside it close with it
            pass

    def handle_data(self, data):
        self.stack[-1].children.append(_Text(data, data))

    def handle_entityref(self, name):
        self.stack[-1].children.append(_Text(f"&{name};", html.unescape(f"&{name};")))

    def handle_charref(self, name):
        self.stack[-1].children.append(_Text(f"&#{name};", html.unescape(f"&#{name};")))

    def handle_comment(self, data):
        self.stack[-1].children.append(f"<!--{data}-->")

    def handle_decl(self, decl):
        self.stack[-1].children.append(f"<!{decl}>")

    def handle_pi(self, data):
        self.stack[-1].children.append(f"<?{data}>")

    def unknown_decl(self, data):
        self.stack[-1].children.append(f"<![{data}]>")

    def finish(self):
        rest = self.rawdata[self.rawdata.find("<"):] if "<" in self.rawdata else ""
        if rest.strip():
            line, column = self.getpos()
            raise _Broken(f"the markup at line {line}, column {column + 1} is not complete: {rest[:40]!r}")
        self.close()
        return self.root


class _Broken(ValueError):
    pass


def _html_escape(text):
    return html.escape(text, quote=False)


def html_runs(document, where):
    """`format="html"`: the document's verbatim markup and `Run`s, in order;
    `where` names the document in an error (`texts[0]`)."""
    parser = _Tree()
    try:
        parser.feed(document)
        root = parser.finish()
    except _Broken as error:
        raise ValueError(f"Argument `{where}` is HTML that cannot be repaired: {error}. "
                         f"Received: {document[:80]!r}") from None
    items = []
    _flatten(root.children, items)
    return items


def _flatten(children, items):
    """Block structure as raw strings, inline content as runs, into `items`."""
    run = None
    for child in children:
        if isinstance(child, _Node) and (child.block and not (child.kept and child.tag not in BLOCKS) or
                                         child.tag in BLOCKS):
            run = None
            if child.kept or child.tag in ("pre", "script", "style"):
                items.append(child.source())
            else:
                items.append(child.raw)
                _flatten(child.children, items)
                items.append(f"</{child.tag}>" if child.closes else "")
            continue
        if run is None:
            run = Run(_html_escape)
            items.append(run)
        _add_inline(run, child)


def _add_inline(run, child):
    if isinstance(child, _Text):
        run.add_text(child.text)
    elif isinstance(child, str) or child.kept or child.tag in VOID or not child.closes:
        run.add_atom(child if isinstance(child, str) else child.source())
    else:
        run.open(child.raw, child.tag)
        for grandchild in child.children:
            _add_inline(run, grandchild)
        run.close()


# ------------------------------------------------------------ putting them back
class _Words:
    """The whitespace words of a text: each one's start, core start, core end and end."""

    def __init__(self, text):
        self.text = text
        self.spans = []
        for match in re.finditer(r"\S+", text):
            word = match.group()
            lead = len(_LEADING.match(word).group())
            trail = len(_TRAILING.search(word).group()) if lead < len(word) else 0
            self.spans.append((match.start(), match.start() + lead, match.end() - trail, match.end()))

    def __len__(self):
        return len(self.spans)

    def word_at(self, offset):
        """The index of the last word that starts before `offset` (-1: none)."""
        found = -1
        for i, (start, *_) in enumerate(self.spans):
            if start < offset:
                found = i
        return found


def _links(alignment, source_words):
    """`{source word: [target words]}` of a Pharaoh alignment."""
    linked = {}
    for pair in (alignment or "").split():
        s, t = map(int, pair.split("-"))
        if s < source_words:
            linked.setdefault(s, []).append(t)
    return linked


def _target_of(linked, source, count, after=True, keep=None):
    """The target word aligned to `source` (its last, `after`; else its
    first), or of the nearest source word before it that has one (after
    it, for `after=False`); None where none has. With `keep`, a test of a
    target word, the last (first) of those that pass it, if any does."""
    order = range(source, -1, -1) if after else range(source, count)
    for s in order:
        if s in linked:
            targets = [t for t in linked[s] if keep(t)] if keep else []
            targets = targets or linked[s]
            return max(targets) if after else min(targets)
    return None


def _aligned(words, linked, count):
    """The source `words` (indices, in order) that have aligned target
    words; where none has, the nearest source word that has, the next one
    first on a tie (a word the model translated together with its
    neighbour, as "love" in "I love you" → "Je t'aime")."""
    found = [w for w in words if w in linked]
    if found or not words:
        return found
    for distance in range(1, count):
        for w in (words[-1] + distance, words[0] - distance):
            if 0 <= w < count and w in linked:
                return [w]
    return []


def place(run_text, elements, translation, alignment, escape):
    """The translation of a run with its tags and atoms put back (the rules above).

    Args:
        run_text: the text the model translated.
        elements: the root `Element`, its tree's offsets in `run_text`.
        translation, alignment: the model's output and its Pharaoh links.
        escape: applied to the translated text.
    """
    source, target = _Words(run_text), _Words(translation)
    linked = _links(alignment, len(source))

    def is_word(t):
        """Whether target word `t` has a core: is not punctuation alone."""
        return target.spans[t][1] < target.spans[t][2]

    def span(element):
        """`(start, end)` offsets in `translation` of an element's target words."""
        words = [i for i, (start, _, _, end) in enumerate(source.spans) if start < element.end and end > element.start]
        aligned = _aligned(words, linked, len(source))
        targets = sorted(t for w in aligned for t in linked[w] if t < len(target))
        if not targets:
            return (point(element.start, True),) * 2
        borrowed = aligned[0] not in words  # a neighbour's words: their cores only
        first_source, last_source = source.spans[words[0]], source.spans[words[-1]]
        core_only = borrowed or element.end <= last_source[2] < last_source[3]  # not its trailing punctuation
        if core_only:
            targets = [t for t in targets if is_word(t)] or targets
        first, last = target.spans[targets[0]], target.spans[targets[-1]]
        begin = first[1] if borrowed or element.start >= first_source[1] > first_source[0] else first[0]
        end = last[2] if core_only else last[3]
        return begin, max(begin, end)

    def point(offset, before_core):
        """Where something at `offset` of the source goes in the translation."""
        word = source.word_at(offset)
        if word < 0:  # before the first word: before the target word of the first
            t = _target_of(linked, 0, len(source), after=False)
            return 0 if t is None else target.spans[t][0]
        _, _, core_end, end = source.spans[word]
        before_punctuation = offset <= core_end < end  # between a word and its trailing punctuation
        t = _target_of(linked, word, len(source), keep=is_word if before_punctuation else None)
        if t is None or t >= len(target):
            return len(translation)
        return target.spans[t][2] if before_punctuation else target.spans[t][3]

    def layout(element, begin, end):
        """`element`'s children placed inside `[begin, end]`, nested and in order."""
        placed = []
        for child in element.children:
            if isinstance(child, Atom):
                at = point(child.offset, True)
                placed.append((at, at, child))
            else:
                placed.append((*span(child), child))
        placed.sort(key=lambda item: (item[0], item[1]))
        out, cursor = [], begin
        for start, stop, child in placed:
            start = min(max(start, cursor), end)
            stop = min(max(stop, start), end)
            out.append((start, stop, child))
            cursor = stop
        return out

    def write(element, begin, end):
        parts, cursor = [], begin
        for start, stop, child in layout(element, begin, end):
            parts.append(escape(translation[cursor:start]))
            if isinstance(child, Atom):
                parts.append(_spaced(child, translation, start))
            else:
                parts.append(child.open + write(child, start, stop) + child.close)
            cursor = stop
        parts.append(escape(translation[cursor:end]))
        return "".join(parts)

    return write(elements, 0, len(translation))


def _spaced(atom, translation, at):
    """An atom's raw text with the spaces it had, where the translation lacks them."""
    before = atom.before and at > 0 and not translation[at - 1].isspace()
    after = atom.after and at < len(translation) and translation[at].isalnum()
    return (" " if before else "") + atom.raw + (" " if after else "")


# ------------------------------------------------------------ a run, end to end
def prepare(run, collapse):
    """`(text, root)` of a run: the text the model translates (the run's
    without its placeholders and a space beside each, normalized, and with
    `collapse` its whitespace read as one space), and the run's tree with
    offsets in it, each placeholder an atom in its innermost element."""
    raw = run.text
    found = [(m.start(), m.end()) for m in PLACEHOLDER.finditer(raw)]
    skip = set()
    for start, end in found:
        skip.update(range(start, end))
        if start > 0 and raw[start - 1] == " " and start - 1 not in skip:
            skip.add(start - 1)  # the space before it goes with it
        elif end < len(raw) and raw[end] == " ":
            skip.add(end)
    out, mapping = [], []
    for i, char in enumerate(normalize(c) for c in raw):
        mapping.append(len(out))
        if i in skip or not char or (collapse and char.isspace() and (not out or out[-1] == " ")):
            continue
        out.append(" " if collapse and char.isspace() else char)
    mapping.append(len(out))
    text = "".join(out).rstrip() if collapse else "".join(out)

    def at(offset):
        return min(mapping[offset], len(text))

    def moved(element):
        return [child._replace(offset=at(child.offset), before=_space_at(raw, child.offset - 1),
                               after=_space_at(raw, child.offset)) if isinstance(child, Atom) else
                child._replace(start=at(child.start), end=at(child.end), children=moved(child))
                for child in element.children]

    root = run.root._replace(end=len(text), children=moved(run.root))
    for start, end in found:
        parent = _parent_of(root, run.root, start)
        parent.children.append(Atom(at(start), raw[start:end], _space_at(raw, start - 1), _space_at(raw, end)))
    return text, root


def _space_at(text, offset):
    return 0 <= offset < len(text) and text[offset].isspace()


def _parent_of(element, raw_element, raw_offset):
    """The innermost element of `element`'s tree (`raw_element`'s, with raw
    offsets) that holds `raw_offset`."""
    for child, raw_child in zip(element.children, raw_element.children):
        if isinstance(raw_child, Element) and raw_child.start <= raw_offset < raw_child.end:
            return _parent_of(child, raw_child, raw_offset)
    return element


def _outer_whitespace(text):
    """`(lead, core, trail)` of `text`."""
    core = text.strip()
    if not core:
        return text, "", ""
    start = len(text) - len(text.lstrip())
    return text[:start], core, text[start + len(core):]


def translate(documents, format, align, plain):
    """Translates `documents` of `format` (the rules above).

    Args:
        documents: a list of strings.
        format: one of `FORMATS`.
        align: `texts -> [(translation, alignment)]`, a Pharaoh alignment
            of each translation's whitespace words to its text's.
        plain: `texts -> [translation]`, for runs without tags or atoms.

    Returns:
        A list of strings, one per document.
    """
    check_format(format)
    collapse = format == "html"
    parsed = [text_runs(d) if format == "text" else html_runs(d, f"texts[{i}]") for i, d in enumerate(documents)]
    jobs = []  # (document, item, text, root, lead, trail, escape)
    for d, items in enumerate(parsed):
        for i, item in enumerate(items):
            if isinstance(item, Run) and not item.empty():
                lead, core, trail = _outer_whitespace(item.text) if collapse else ("", item.text, "")
                breaks = "\n" * core.count("\n") if collapse else ""  # a page keeps its line count
                text, root = prepare(_shifted(item, len(lead), len(core)), collapse)
                jobs.append((d, i, text, root, lead, breaks + trail, item.escape))
    outputs = [None] * len(jobs)
    simple = [j for j, job in enumerate(jobs) if not job[3].children]
    aligned = [j for j, job in enumerate(jobs) if job[3].children]
    for j, translation in zip(simple, plain([jobs[j][2] for j in simple]) if simple else []):
        outputs[j] = jobs[j][6](translation)
    for j, (translation, alignment) in zip(aligned, align([jobs[j][2] for j in aligned]) if aligned else []):
        outputs[j] = place(jobs[j][2], jobs[j][3], translation, alignment, jobs[j][6])
    results = [[item if isinstance(item, str) else _whole(item) for item in items] for items in parsed]
    for (d, i, _, _, lead, trail, _), output in zip(jobs, outputs):
        results[d][i] = lead + output + trail
    return ["".join(parts) for parts in results]


def _whole(run):
    """A run with nothing to translate, written as it came."""
    text = run.text

    def write(element, begin, end):
        out, cursor = [], begin
        for child in element.children:
            start = child.offset if isinstance(child, Atom) else child.start
            out.append(run.escape(text[cursor:start]))
            if isinstance(child, Atom):
                out.append(child.raw)
                cursor = start
            else:
                out.append(child.open + write(child, child.start, child.end) + child.close)
                cursor = child.end
        out.append(run.escape(text[cursor:end]))
        return "".join(out)

    return write(run.root, 0, len(text))


def _shifted(run, lead, length):
    """`run` without its first `lead` characters and those after `length` more."""
    shifted = Run(run.escape)
    shifted.parts = [run.text[lead:lead + length]]

    def clip(offset):
        return min(max(offset - lead, 0), length)

    def move(element):
        return [child._replace(offset=clip(child.offset)) if isinstance(child, Atom) else
                child._replace(start=clip(child.start), end=clip(child.end), children=move(child))
                for child in element.children]

    shifted.root = run.root._replace(end=length, children=move(run.root))
    return shifted
