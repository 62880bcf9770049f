"""Applying what was trained: saved fine-tuned models, predictions and embeddings.

``polymask.load_model(folder)`` opens a fine-tuned model (``predict``, ``embed``);
``polymask.load_checkpoint(folder).embed(...)`` embeds with a pretrained encoder. The command-line
verbs are ``polymask predict`` and ``polymask embed``. This ``__init__`` stays empty of imports so
that building the CLI parser does not load torch.
"""
