"""Task kinds, one file each: binary, multiclass, regression (table kinds, ``table.py``) and span.

A new kind is one module that registers a ``TaskKind`` subclass (a table kind: ``TableTaskKind``)::

    from polymask.tasks.finetune.kinds import TableTaskKind, register_task_kind

    @register_task_kind("count")
    class Count(TableTaskKind):
        problem_type = "count"
        ...

``tests/test_task_kinds.py`` writes one in the test file alone and takes it from a task spec through fine-tuning,
a saved model and ``predict``. The registry and the base class live in ``polymask.tasks.data.task_kind``, where
task specs find them; ``polymask.tasks`` imports this package, so the built-in kinds are registered before any spec
is read.
"""
from polymask.tasks.data.task_kind import TASK_KINDS, TaskKind, register_task_kind, table_kinds
from polymask.tasks.finetune.kinds.table import TableTaskKind
from polymask.tasks.finetune.kinds import binary, multiclass, regression, span  # noqa: F401  (registers the built-ins)

__all__ = ["TASK_KINDS", "TableTaskKind", "TaskKind", "register_task_kind", "table_kinds"]
