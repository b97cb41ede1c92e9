"""The residual connection around every sub-layer (section 5.4)."""


def residual(x, sublayer, norm, dropout, norm_first, training=None):
    """Wraps `sublayer` in dropout, a residual connection and LayerNorm.

    Post-norm, as in the paper: `norm(x + dropout(sublayer(x)))`.
    Pre-norm (`norm_first=True`): `x + dropout(sublayer(norm(x)))`.
    """
    if norm_first:
        return x + dropout(sublayer(norm(x)), training=training)
    return norm(x + dropout(sublayer(x), training=training))
