"""polymask: masked pretraining (MLM, MAE-LM, ExLM) for text, SMILES and DNA on one encoder.

Public API::

    import polymask
    summary = polymask.train({"modality": "smiles", "objective": "mlm"})
    vectors = polymask.load_checkpoint("runs/smiles-mlm").embed(["CCO", "c1ccccc1"])
    model = polymask.load_model("runs/finetune-moleculenet-esol/cells/<system>/moleculenet-esol/seed-0")
    predictions = model.predict(["CCO", "c1ccccc1"])

    @polymask.register_modality("protein")
    class Protein(polymask.Modality): ...
"""
from polymask.config import DataConfig, RunConfig, TrainConfig, build_run_config
from polymask.errors import CheckpointError, ConfigError, DataError, InvalidRecord, PolymaskError
from polymask.inference.model import FinetunedModel, load_model
from polymask.model import Encoder, EncoderConfig
from polymask.modalities import MODALITIES, Modality, ModalityConfig, register_modality
from polymask.objectives import OBJECTIVES, Objective, ObjectiveConfig, register_objective
from polymask.registry import Registry
from polymask.training.checkpoint import load_checkpoint
from polymask.training.trainer import train

__version__ = "0.1.0"

__all__ = [
    "CheckpointError", "ConfigError", "DataConfig", "DataError", "Encoder", "EncoderConfig", "FinetunedModel",
    "InvalidRecord", "MODALITIES", "Modality", "ModalityConfig", "OBJECTIVES", "Objective", "ObjectiveConfig",
    "PolymaskError", "Registry", "RunConfig", "TrainConfig", "build_run_config", "load_checkpoint", "load_model",
    "register_modality", "register_objective", "train",
]
