"""Data: a shared subword tokenizer, corpus readers and the tf.data pipeline.

Nothing here imports TensorFlow at import time: `SubwordTokenizer.encode`,
the readers, `numpy_batches` and `encoded_batches` work without it.

Example:

>>> from keras_transformer import datasets
>>> from keras_transformer.data import SubwordTokenizer, make_dataset
>>> pairs = datasets.load("tatoeba_en_fr", "train")          # [(english, french), ...]
>>> tokenizer = SubwordTokenizer.train([s for p in pairs for s in p], vocab_size=8000)
>>> dataset, report = make_dataset(pairs, tokenizer, tokens_per_batch=4096)
>>> model.fit(dataset)    # elements ((source_ids, target_input_ids), labels)
"""

from keras_transformer.data.corpora import ReadReport, read_aligned, read_tsv
from keras_transformer.data.pipeline import (
    LengthReport,
    batch_sizes,
    bucket_boundaries,
    encode_pairs,
    encoded_batches,
    make_dataset,
    numpy_batches,
)
from keras_transformer.data.wmt14 import load_wmt14, wmt14_files
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.translation.tokenizer import SubwordTokenizer
