"""Where the package reaches past the public APIs of Keras, TensorFlow and
TensorFlow Datasets, or writes its own gradient, and why: here, and nowhere
else (tests/test_compat.py). One module for each part of the package that
needs one, each workaround naming its upstream issue, or saying that none
is filed:

- `layers`: shape inference, readable values, nested layers, garbage
  collections while quantizing, the int8 output projection's gradient;
- `decoding`: a loop whose variables change shape, gathers without
  negative indices;
- `training`: `fit` under a multi-worker strategy, one trace of its first step;
- `saved_model`: signature protos, conditionals kept functional;
- `tfds`: the WMT14 downloader's retries and checksum file names.
"""
