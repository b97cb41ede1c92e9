"""The Translator: text round trip, batching, order, truncation, arguments."""

import numpy as np
import pytest

from keras_transformer.decoding import Translator
from tests.decoding.toy_models import CopyModel, WordTokenizer

WORDS = "the cat sat on a mat and dog ran far".split()


def copy_translator(**kwargs):
    model = CopyModel(vocab_size=4 + len(WORDS), max_length=16)
    return Translator(model, WordTokenizer(WORDS), **kwargs)


@pytest.mark.parametrize("beam_size, jit_compile", [(4, True), (1, False)])
def test_round_trip_keeps_order_and_empty_strings(beam_size, jit_compile):
    translator = copy_translator(beam_size=beam_size, batch_size=2, jit_compile=jit_compile)
    texts = ["the cat sat on a mat", "", "dog ran", "a dog and a cat ran far on the mat", "cat", "   "]
    assert translator.translate(texts) == [t if t.strip() else "" for t in texts]
    assert translator.translate([]) == []


def test_translate_ids_accepts_lists_and_padded_arrays():
    translator = copy_translator(beam_size=2, jit_compile=False)
    assert translator.translate_ids([[4, 5, 3], [6, 3], []]) == [[4, 5], [6], []]
    padded = np.array([[4, 5, 3], [6, 3, 0]], "int64")
    assert translator.translate_ids(padded) == [[4, 5], [6]]


def test_over_long_source_is_truncated_not_fatal():
    translator = copy_translator(beam_size=2, jit_compile=False)
    long = " ".join(WORDS * 2)  # 20 words: > max_length 16 with EOS
    with pytest.warns(UserWarning, match="truncated"):
        out = translator.translate([long, "the cat"])
    assert out == [" ".join((WORDS * 2)[:15]), "the cat"]


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(beam_size=0), "beam_size"), (dict(alpha=-1.0), "alpha"), (dict(batch_size=0), "batch_size"),
     (dict(max_extra_length=-5), "max_extra_length")],
)
def test_bad_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        copy_translator(**kwargs)


@pytest.mark.parametrize("ids", [[[4, 2.5]], [[4, True]], [["4"]], [[4, 99]], [[-1, 3]], "4 3", [4, 3]])
def test_bad_ids_raise(ids):
    translator = copy_translator(jit_compile=False)
    with pytest.raises(ValueError, match="source_ids"):
        translator.translate_ids(ids)


def test_translate_needs_a_tokenizer_and_strings():
    translator = Translator(CopyModel(), jit_compile=False)
    with pytest.raises(ValueError, match="tokenizer"):
        translator.translate(["a"])
    with pytest.raises(ValueError, match="sentences"):
        copy_translator(jit_compile=False).translate("the cat")
