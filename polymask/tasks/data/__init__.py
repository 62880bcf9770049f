"""Task data: the YAML specs, finding and reading task files into examples, splits, and the inputs a benchmark
writes for pretraining (held-out records, a corpus of its training inputs)."""
