"""Files copied verbatim into every exported Hugging Face folder (``trust_remote_code=True``).

They import only ``torch`` and ``transformers``: the exported folder must load where polymask is
not installed. ``polymask.export.hf`` writes the weights in their layout.
"""
