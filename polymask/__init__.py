"""polymask: masked pretraining (MLM, MAE-LM, ExLM) for text, SMILES and DNA on one encoder.

Public API::

    import polymask
    summary = polymask.train({"modality": "smiles", "objective": "mlm"})
    vectors = polymask.load_checkpoint("runs/smiles-mlm").embed(["CCO", "c1ccccc1"])
    model = polymask.load_model("runs/finetune-moleculenet-esol/cells/<system>/moleculenet-esol/seed-0")
    predictions = model.predict(["CCO", "c1ccccc1"])
    model = polymask.load_model(polymask.finetune("smiles-mlm-1.7m", data="my.csv", target="logS"))
    model = polymask.load_model(polymask.finetune("smiles-mlm-1.7m", task="moleculenet/bbbp"))
    table = polymask.benchmark("moleculenet", ["smiles-mlm-1.7m"], tasks=["esol", "bbbp"])
    task = polymask.load_task("glue/rte")    # examples read and split as fine-tuning reads them

    @polymask.register_modality("protein")
    class Protein(polymask.Modality): ...

    @polymask.register_task_kind("count")      # a task spec may then say `kind: count`
    class Count(polymask.TableTaskKind): ...

The names below are imported on first use (PEP 562), so ``import polymask`` (and ``polymask --help``)
does not load torch, datasets or RDKit.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "polymask.benchmarking.api": ("benchmark", "finetune", "load_task"),
    "polymask.config": ("DataConfig", "RunConfig", "TrainConfig", "build_run_config"),
    "polymask.errors": ("CheckpointError", "ConfigError", "DataError", "InvalidRecord", "PolymaskError"),
    "polymask.inference.model": ("FinetunedModel", "load_checkpoint", "load_model"),
    "polymask.model": ("Encoder", "EncoderConfig"),
    "polymask.modalities": ("MODALITIES", "Modality", "ModalityConfig", "register_modality"),
    "polymask.objectives": ("OBJECTIVES", "Objective", "ObjectiveConfig", "register_objective"),
    "polymask.registry": ("Registry",),
    "polymask.tasks.finetune.kinds": ("TASK_KINDS", "TableTaskKind", "TaskKind", "register_task_kind"),
    "polymask.training.trainer": ("train",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'polymask' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from polymask.benchmarking.api import benchmark, finetune, load_task
    from polymask.config import DataConfig, RunConfig, TrainConfig, build_run_config
    from polymask.errors import CheckpointError, ConfigError, DataError, InvalidRecord, PolymaskError
    from polymask.inference.model import FinetunedModel, load_checkpoint, load_model
    from polymask.modalities import MODALITIES, Modality, ModalityConfig, register_modality
    from polymask.model import Encoder, EncoderConfig
    from polymask.objectives import OBJECTIVES, Objective, ObjectiveConfig, register_objective
    from polymask.registry import Registry
    from polymask.tasks.finetune.kinds import TASK_KINDS, TableTaskKind, TaskKind, register_task_kind
    from polymask.training.trainer import train
