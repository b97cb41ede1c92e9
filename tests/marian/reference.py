"""The Marian tests' models and `transformers`' own answers, made once per
test run: `python -m tests.marian.reference FOLDER` (KERAS_BACKEND=torch).

A process of its own: PyTorch's Triton, which `transformers` imports, and
TensorFlow do not load into one process (a segmentation fault), and the
tests compare with TensorFlow, JAX and PyTorch alike. It writes
- `hf/`: a Hugging Face Marian folder of `models.CONFIG`, random, with a
  model card and a license file as the Hub's have; `marian/`,
  Marian's release of its weights; `hf-ctranslate2/`, CTranslate2's model
  of `hf/` by its own converter of `transformers` models (what
  `ct2-transformers-converter` runs, here in the process that has
  `transformers` loaded already);
- `variants/NAME/`: random models of other configs (`VARIANTS`);
- `reference.json`: for each folder, `MarianTokenizer`'s ids of the test
  split's sources and targets and its decoding of the targets; for `hf/`,
  the ids `generate` outputs, greedily and with beam search, under each
  source's output limit; and `NAME.npz`, the encoder output and logits of
  a batch of teacher-forced pairs.
"""

import collections
import json
import os
import sys

import numpy as np

from tests.marian import models

# Output tokens beyond a source's own (ours with EOS) in the decoding comparisons.
MAX_EXTRA_LENGTH = 20
GREEDY_SOURCES, BEAM_SOURCES, FORCED_PAIRS, TOKENIZED_PAIRS = 100, 100, 48, 300
BEAM = dict(num_beams=4, length_penalty=1.0, early_stopping=False)
VARIANTS = {
    # Separate vocabularies and embedding matrices, an output projection of its
    # own, gelu, no embedding scaling, a deeper decoder than encoder, 3 heads.
    "separate-vocabularies-untied-gelu": dict(
        config=dict(activation_function="gelu", scale_embedding=False, tie_word_embeddings=False, encoder_layers=1,
                    decoder_layers=2, d_model=24, encoder_attention_heads=3, decoder_attention_heads=3),
        separate_vocabs=True),
    # SentencePiece BPE models, relu, one feed-forward width.
    "bpe-relu": dict(config=dict(activation_function="relu", encoder_ffn_dim=40, decoder_ffn_dim=40),
                     model_type="bpe"),
}


def output_limit(source_length, max_length):
    """Our output limit of a source of `source_length` ids (EOS included)."""
    return min(source_length + MAX_EXTRA_LENGTH, max_length)


def generate(model, tokenizer, sources, **options):
    """`generate`'s ids of `sources`, each under our output limit of its
    source (`max_length` counts the decoder's start token): without the
    start token, up to EOS (included), without PAD. Beam search runs once
    per limit, which decides its ending; a greedy output's tokens do not
    depend on the limit, so greedy decoding runs once, to the largest, and
    each output is cut at its own."""
    import torch

    lengths = [len(ids) for ids in tokenizer(sources)["input_ids"]]
    limits = [output_limit(length, model.config.max_position_embeddings) for length in lengths]
    groups = collections.defaultdict(list)
    for index, limit in enumerate(limits):
        groups[limit if options.get("num_beams", 1) > 1 else max(limits)].append(index)
    outputs = [None] * len(sources)
    pad, eos = model.config.pad_token_id, model.config.eos_token_id
    for limit, indices in groups.items():
        batch = tokenizer([sources[i] for i in indices], return_tensors="pt", padding=True)
        with torch.no_grad():
            ids = model.generate(**batch, max_length=limit + 1, do_sample=False, forced_eos_token_id=None,
                                 bad_words_ids=model.generation_config.bad_words_ids, **options)
        for index, row in zip(indices, ids.numpy().tolist()):
            row = row[1:limits[index] + 1]
            outputs[index] = row[: row.index(eos) + 1] if eos in row else [i for i in row if i != pad]
    return outputs


def answers(folder, decode):
    """`transformers`' answers for the model in `folder`: a JSON-able dict,
    and the arrays of its teacher-forced batch."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    model, tokenizer = MarianMTModel.from_pretrained(folder).eval(), MarianTokenizer.from_pretrained(folder)
    pairs = models.pairs("test", None if decode else TOKENIZED_PAIRS)
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    target_ids = tokenizer(text_target=targets)["input_ids"]
    result = {"source_ids": tokenizer(sources)["input_ids"], "target_ids": target_ids,
              "decoded_targets": tokenizer.batch_decode(target_ids, skip_special_tokens=True)}
    if decode:
        greedy = generate(model, tokenizer, sources[:GREEDY_SOURCES], num_beams=1)
        beam = generate(model, tokenizer, sources[:BEAM_SOURCES], **BEAM)
        result.update(greedy=greedy, greedy_texts=tokenizer.batch_decode(greedy, skip_special_tokens=True),
                      beam_texts=tokenizer.batch_decode(beam, skip_special_tokens=True))
    batch = tokenizer(sources[:FORCED_PAIRS], text_target=targets[:FORCED_PAIRS], return_tensors="pt", padding=True)
    labels = batch["labels"].numpy()
    start = np.full((len(labels), 1), model.config.decoder_start_token_id)
    decoder_input = np.concatenate([start, labels[:, :-1]], axis=1)
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    decoder_input_ids=torch.tensor(decoder_input))
    arrays = dict(source=batch["input_ids"].numpy(), source_mask=batch["attention_mask"].numpy(),
                  decoder_input=decoder_input, memory=out.encoder_last_hidden_state.numpy(), logits=out.logits.numpy())
    return result, arrays


def ctranslate2_model(hf_folder, output):
    """CTranslate2's model of a Hugging Face folder, by
    `ctranslate2.converters.TransformersConverter` (`ct2-transformers-converter`)."""
    from ctranslate2.converters import TransformersConverter

    return TransformersConverter(hf_folder).convert(output, force=True)


def write(folder):
    hf = models.write_huggingface(os.path.join(folder, "hf"))
    with open(os.path.join(hf, "README.md"), "w", encoding="utf-8") as f:
        f.write("---\nlicense: cc-by-4.0\n---\n# A test model\n")
    with open(os.path.join(hf, "LICENSE"), "w", encoding="utf-8") as f:
        f.write("Creative Commons Attribution 4.0 International\n")
    models.write_marian_of_huggingface(hf, os.path.join(folder, "marian"))
    ctranslate2_model(hf, os.path.join(folder, "hf-ctranslate2"))
    folders = {"hf": hf}
    for name, variant in VARIANTS.items():
        folders[name] = models.write_huggingface(os.path.join(folder, "variants", name), **variant)
    reference = {}
    for name, path in folders.items():
        reference[name], arrays = answers(path, decode=name == "hf")
        np.savez(os.path.join(folder, f"{name}.npz"), **arrays)
    with open(os.path.join(folder, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False)


if __name__ == "__main__":
    import torch

    # One thread: the test models are small, and PyTorch's second thread
    # mostly waits for the first, the more so on cores other processes share.
    torch.set_num_threads(1)
    write(sys.argv[1])
