"""Downstream tasks: specs (tasks/*.yaml), loading and splits, heads, fine-tuning, benchmarks."""
