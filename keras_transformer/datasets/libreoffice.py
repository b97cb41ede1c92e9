"""The LibreOffice help English-German corpus shipped with the package, split by help module.

Source: LibreOffice 7.4 help pages (Debian packages `libreoffice-help-en-us`
and `libreoffice-help-de`), paragraphs aligned by their HTML `id`, MPL-2.0.
Each line is `English<TAB>German<TAB>attribution`, and the attribution names
the help module, e.g. `LibreOffice help 7.4 (scalc), MPL-2.0`.

Split rule: whole help modules are held out, so no page, and no paragraph
of a page, is in two splits. The test and validation texts are about
features (charts, drawing, databases) that training never describes:

- `test`: `sdatabase` (Base, 1,232 pairs);
- `validation`: `schart` and `sdraw` (1,264 pairs);
- `train`: `shared`, `scalc`, `sbasic`, `swriter`, `simpress` (29,922 pairs).

Example:

>>> module_of("LibreOffice help 7.4 (scalc), MPL-2.0")
'scalc'
>>> split_of_module("sdatabase")
'test'
"""

import os
import re

NAME = "libreoffice_en_de"
FOLDER = os.path.join(os.path.dirname(__file__), "data", NAME)
SPLITS = ("train", "validation", "test")
HELD_OUT = {"sdatabase": "test", "schart": "validation", "sdraw": "validation"}

_MODULE = re.compile(r"\(([a-z]+)\)")


def module_of(attribution):
    """The help module named in an attribution column."""
    match = _MODULE.search(attribution)
    if not match:
        raise ValueError(f"No help module in the attribution column. Received: {attribution!r}")
    return match.group(1)


def split_of_module(module):
    """`"test"`, `"validation"` or `"train"` for a help module."""
    return HELD_OUT.get(module, "train")
