"""Downstream tasks (specs in tasks/<benchmark>/*.yaml), by role: ``data`` (specs, loading, splits), ``finetune``
(the loops and task kinds), ``metrics`` (scores, significance). The benchmark application over them (runner, rows,
reports, families, the verbs) is ``polymask.benchmarking``.

The built-in task kinds are registered here, before any module of the package runs, so that a task spec naming one
validates wherever it is read (``tasks.data.task_kind`` holds the registry; the kinds import nothing heavy).
"""
from polymask.tasks.finetune import kinds  # noqa: F401  (registers the built-in task kinds)
