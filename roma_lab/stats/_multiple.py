"""Multiple-comparison adjustment: Holm's step-down method."""

import numpy as np


def holm_adjust(p_values) -> np.ndarray:
    """Holm-adjusted p-values, in the input order (compare each with alpha).

    With the m finite p-values sorted ascending, the j-th (1-based) becomes
    ``max_{i <= j} min(1, (m - i + 1) p_(i))``. This controls the family-wise error rate at alpha
    under any dependence between the tests and rejects at least what Bonferroni rejects. NaN stays
    NaN and does not count towards m (a comparison that could not be made is not a test).
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p_values must be 1-D, got shape {p.shape}")
    finite = ~np.isnan(p)
    if np.any((p[finite] < 0) | (p[finite] > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    adjusted = np.full(p.shape, np.nan)
    idx = np.flatnonzero(finite)
    order = idx[np.argsort(p[idx], kind="stable")]
    m = order.size
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(scaled)
    return adjusted
