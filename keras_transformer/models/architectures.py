"""The named architectures: hyper-parameters only, no weights.

Trained models with weights are presets (`keras_transformer.models.presets`);
`Transformer.from_architecture(name, vocab_size=...)` builds an untrained one.
"""

ARCHITECTURES = {
    # For tests and CPU demos: trains in seconds to minutes on a laptop.
    "tiny": dict(num_layers=2, d_model=128, num_heads=4, d_ff=512, dropout_rate=0.1),
    # For small corpora (Tatoeba) and quick GPU runs.
    "small": dict(num_layers=4, d_model=256, num_heads=4, d_ff=1024, dropout_rate=0.1),
    # Table 3, "base": about 63.1M parameters with a shared 37k vocabulary.
    "base": dict(num_layers=6, d_model=512, num_heads=8, d_ff=2048, dropout_rate=0.1),
    # Table 3, "big": about 213M parameters (P_drop 0.3 for En-De).
    "big": dict(num_layers=6, d_model=1024, num_heads=16, d_ff=4096, dropout_rate=0.3),
}
