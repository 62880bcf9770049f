"""polymask: masked pretraining (MLM, MAE-LM, ExLM) for text, SMILES and DNA on one encoder.

Public API::

    import polymask
    summary = polymask.train({"modality": "smiles", "objective": "mlm"})

    @polymask.register_modality("protein")
    class Protein(polymask.Modality): ...
"""
from polymask.config import DataConfig, RunConfig, TrainConfig, build_run_config
from polymask.errors import CheckpointError, ConfigError, DataError, InvalidRecord, PolymaskError
from polymask.model import Encoder, EncoderConfig
from polymask.modalities import MODALITIES, Modality, ModalityConfig, register_modality
from polymask.objectives import OBJECTIVES, Objective, ObjectiveConfig, register_objective
from polymask.registry import Registry
from polymask.training.checkpoint import load_checkpoint
from polymask.training.trainer import train

__version__ = "0.1.0"

__all__ = [
    "CheckpointError", "ConfigError", "DataConfig", "DataError", "Encoder", "EncoderConfig", "InvalidRecord",
    "MODALITIES", "Modality", "ModalityConfig", "OBJECTIVES", "Objective", "ObjectiveConfig", "PolymaskError",
    "Registry", "RunConfig", "TrainConfig", "build_run_config", "load_checkpoint", "register_modality",
    "register_objective", "train",
]
