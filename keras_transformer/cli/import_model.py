"""`keras-transformer import`: a Marian or OPUS-MT model as a preset folder.

    keras-transformer import hf://Helsinki-NLP/opus-mt-en-de --output opus_mt_en_de
    keras-transformer import downloads/opus-mt-en-de --output opus_mt_en_de   # a downloaded folder
    keras-transformer translate opus_mt_en_de "Where is the station?"

SOURCE is a Hugging Face `MarianMTModel` folder, a Marian folder as OPUS-MT
releases it (`decoder.yml`, the `.npz`, its vocabulary `.yml`,
`source.spm`, `target.spm`) or `hf://org/name` (downloaded by
`huggingface_hub`). The preset folder gets config.json, model.weights.h5,
tokenizer.model (and target_tokenizer.model), metadata.json, a model card
naming the source and its license, and the source's license files; every
command takes it as it is (`keras_transformer.translation.marian`).
"""

NAME = "import"
HELP = "Import a Marian or OPUS-MT model (a Hugging Face folder, a Marian folder or hf://org/name) as a preset."


def add_arguments(p):
    p.add_argument("source", help="a Hugging Face Marian folder, a Marian folder (decoder.yml) or hf://ORG/NAME")
    p.add_argument("--output", required=True, help="the preset folder to write (it must not exist, or be empty)")
    p.add_argument("--weights-dtype", default="float32", choices=["float32", "float16"],
                   help="float16 halves the bytes; the weights come back as float32 on loading")


def run(args):
    from keras_transformer.translation.marian.preset import import_preset

    path = import_preset(args.source, args.output, weights_dtype=args.weights_dtype)
    print(f"Imported {args.source} as the preset {path}")
    return 0
