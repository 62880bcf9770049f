"""Downstream tasks (specs in tasks/<benchmark>/*.yaml), by role: ``data`` (specs, loading, splits), ``finetune``
(the loops and task kinds), ``metrics`` (scores, significance), ``benchmark`` (runner, rows, reports, families)."""
