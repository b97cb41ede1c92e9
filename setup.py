"""Installs keras-transformer: `pip install -e .[test]`."""

from setuptools import find_packages, setup

setup(
    name="keras-transformer",
    version="0.1.0",
    description='The Transformer of "Attention Is All You Need" for Keras 3.',
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["keras_transformer", "keras_transformer.*"]),
    py_modules=["keras_transformer_command"],  # the command's launcher, outside the package
    include_package_data=True,
    entry_points={"console_scripts": ["keras-transformer=keras_transformer_command:main"]},
    package_data={"keras_transformer": ["datasets/data/*/*", "zoo/*/*"]},
    install_requires=[
        "keras>=3.13,<4",
        "numpy",
    ],
    extras_require={
        "tensorflow": [
            "tensorflow>=2.20,<2.22",
            "tensorflow-text>=2.20,<2.22",  # built against one TensorFlow minor each: the same range
            # TF Serving's protos: the SavedModel's warm-up requests.
            "tensorflow-serving-api>=2.20,<2.22",
            "sentencepiece>=0.2,<1",
            "sacrebleu>=2.4,<3",
            "tensorboard>=2.20,<2.22",
        ],
        # A GPU machine with NVIDIA's CUDA 12 wheels: TensorFlow's own, with the rest of the extra above.
        "tensorflow-cuda": [
            "tensorflow[and-cuda]>=2.20,<2.22",
            "tensorflow-text>=2.20,<2.22",
            "tensorflow-serving-api>=2.20,<2.22",
            "sentencepiece>=0.2,<1",
            "sacrebleu>=2.4,<3",
            "tensorboard>=2.20,<2.22",
        ],
        "wmt14": ["tensorflow-datasets>=4.9,<5", "importlib_resources"],
        # A backend without TensorFlow: the tokenizer and BLEU come along, for
        # training, translating and evaluating there.
        "jax": ["jax>=0.6,<1", "jaxlib>=0.6,<1", "sentencepiece>=0.2,<1", "sacrebleu>=2.4,<3"],
        "jax-cuda": ["jax[cuda12]>=0.6,<1", "sentencepiece>=0.2,<1", "sacrebleu>=2.4,<3"],
        # The lowest is the release the PyTorch pass of tests/run.sh runs.
        "torch": ["torch>=2.13,<3", "sentencepiece>=0.2,<1", "sacrebleu>=2.4,<3"],
        "serve": ["fastapi>=0.110,<1", "uvicorn>=0.29,<1"],
        "plot": ["matplotlib>=3.7,<4"],
        # `keras-transformer export --format ctranslate2`'s model runs in CTranslate2.
        "ctranslate2": ["ctranslate2>=4.8,<5"],
        # benchmarks/translate_speed.py: CTranslate2 beside our engines.
        "bench": ["ctranslate2>=4.8,<5"],
        # `keras-transformer import`: hf:// names (the Hub) and Marian's own releases (YAML files).
        "marian": ["huggingface_hub>=0.23,<3", "pyyaml>=5.1,<7"],
        "test": [
            "tensorflow>=2.20,<2.22",
            "tensorflow-text>=2.20,<2.22",
            "tensorflow-serving-api>=2.20,<2.22",
            "tensorflow-datasets>=4.9,<5",
            "importlib_resources",  # TFDS's download path imports it
            "tensorboard>=2.20,<2.22",
            "sentencepiece>=0.2,<1",
            "sacrebleu>=2.4,<3",
            "jax>=0.6,<1",
            "jaxlib>=0.6,<1",
            # The lowest torch the `torch` extra allows: the PyTorch pass
            # tests the oldest release a user may have (tests/test_keras_version.py).
            "torch>=2.13,<2.14",
            "fastapi>=0.110,<1",
            "uvicorn>=0.29,<1",
            "httpx>=0.27,<1",
            "matplotlib>=3.7,<4",
            "build>=1",  # tests/test_wheel.py: python -m build --no-isolation
            "setuptools>=70.1",  # builds wheels itself (no `wheel` package)
            "pytest>=8",
            "pytest-xdist>=3.8",  # tests/run.sh: two workers, --no-loadscope-reorder
            "pytest-timeout>=2.3",  # tests/run.sh: a hung test fails instead of stalling the run
            "ctranslate2>=4.8,<5",  # tests/test_translate_speed.py: the converter and its export
            # tests/marian: Marian models built and run by transformers, read back with safetensors.
            "transformers>=5,<6",
            "safetensors>=0.4,<1",
            "huggingface_hub>=0.23,<3",
            "pyyaml>=5.1,<7",
        ],
    },
)
