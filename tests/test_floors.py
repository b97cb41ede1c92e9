"""The package's floors: each imports only the floors below it (issue 78).

    0  the top-level modules (tokens, validation, version, files) and compat/
    1  layers/, models/, losses, metrics, schedules
    2  decoding/: the samplers on one loop
    3  translation/: the Translator, its tokenizer and preprocessor, the loader
    4  export/, converters/: the SavedModel format, CTranslate2's
    5  serving/: the REST server over a SavedModel
    6  cli/
    data/, datasets/ and training/ sit beside 4 and 5, under cli/: they use
    floors 0-3 and one another, and nothing below cli/ uses them.
"""

from tests.test_layering import PACKAGE, imported_modules, module_files

SIDE = 3.5
FLOORS = {"losses": 1, "metrics": 1, "schedules": 1, "layers": 1, "models": 1, "decoding": 2, "translation": 3,
          "data": SIDE, "datasets": SIDE, "training": SIDE, "export": 4, "converters": 4, "serving": 5, "cli": 6}


def floor(module):
    """A module's floor: its top-level package's, 0 for a top-level module."""
    return FLOORS.get(module.split(".")[1], 0)


def test_no_import_runs_up_a_floor():
    modules = module_files()
    upward = sorted(
        f"{name} -> {target}"
        for name, path in modules.items() if name != PACKAGE
        for target in imported_modules(path, name, modules) - {PACKAGE}
        if (floor(target) > floor(name) and not floor(name) == floor(target) == SIDE)
        or (floor(target) == SIDE and floor(name) not in (SIDE, 6)))
    assert upward == []


def test_the_floors_are_what_they_hold():
    assert floor("keras_transformer.tokens") == 0
    assert floor("keras_transformer.models.transformer") < floor("keras_transformer.decoding.loop")
    assert floor("keras_transformer.decoding.loop") < floor("keras_transformer.translation.translator")
    assert floor("keras_transformer.translation.translator") < floor("keras_transformer.training.train")
    assert floor("keras_transformer.training.train") < floor("keras_transformer.serving.server")
    assert floor("keras_transformer.serving.server") < floor("keras_transformer.cli.translate")
