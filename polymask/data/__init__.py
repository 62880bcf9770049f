"""Data pipeline: reading records, tokenising and caching, batching, masking."""
