"""Benchmarks: the rows (systems) x tasks x seeds runner, its cell cache and its report tables."""
