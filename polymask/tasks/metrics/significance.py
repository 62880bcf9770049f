"""Whether one system's per-seed scores differ from another's beyond seed noise: Welch's t-test for independent
systems, a paired t-test for two readings of the same models (a row and its test-time-averaged twin)."""
from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np
from scipy import stats

NOISE_P = 0.05


def welch_verdict(values: Sequence[float], baseline: Sequence[float], higher_is_better: bool,
                  paired: bool = False) -> tuple[str, float]:
    """Better / worse than the baseline, or within seed noise (Welch's t-test, p >= 0.05); and the p-value. ``paired``:
    the i-th values of both come from the same model (seed i read two ways), so a paired t-test."""
    if np.isnan(values).any() or np.isnan(baseline).any():
        return "n/a (undefined score)", float("nan")
    if len(values) < 2 or len(baseline) < 2:
        return "n/a (one seed)", float("nan")
    if np.ptp(values) == 0 and np.ptp(baseline) == 0:
        return ("within noise" if values[0] == baseline[0] else "n/a (no seed variance)"), float("nan")
    with warnings.catch_warnings():  # near-identical scores: scipy warns and returns nan, handled below
        warnings.simplefilter("ignore", RuntimeWarning)
        p_value = float(stats.ttest_rel(values, baseline).pvalue if paired else
                        stats.ttest_ind(values, baseline, equal_var=False).pvalue)
    if math.isnan(p_value) or p_value >= NOISE_P:
        return "within noise", p_value
    better = np.mean(values) > np.mean(baseline) if higher_is_better else np.mean(values) < np.mean(baseline)
    return ("better" if better else "worse"), p_value
