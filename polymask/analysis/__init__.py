"""Analyses of pretrained checkpoints, each a ``polymask analyze <name>`` sub-command (``registry``):
effective rank of the hidden states (``rank``), ExLM's multimodality (``semantics``)."""
