"""Every on-disk format of polymask: pretraining checkpoints (``pretrained``), saved fine-tuned models
(``finetuned``), their manifests, and the one atomic folder writer (``atomic``)."""
