"""Data: a shared subword tokenizer, corpus readers and the tf.data pipeline.

Example:

>>> from keras_transformer import datasets
>>> from keras_transformer.data import SubwordTokenizer, make_dataset
>>> pairs = datasets.load("tatoeba_en_fr", "train")
>>> tokenizer = SubwordTokenizer.train([s for p in pairs for s in p], vocab_size=8000)
>>> dataset, report = make_dataset(pairs, tokenizer, tokens_per_batch=4096)
"""

from keras_transformer.data.corpora import ReadReport, load_wmt14, read_aligned, read_tsv
from keras_transformer.data.pipeline import LengthReport, encode_pairs, make_dataset, numpy_batches
from keras_transformer.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer
