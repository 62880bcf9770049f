"""Export checkpoints to other ecosystems: ``polymask.export.hf`` writes a Hugging Face folder."""
