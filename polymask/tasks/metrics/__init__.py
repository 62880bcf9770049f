"""Scoring predictions: each metric as its field reports it, SQuAD exact match and F1, and Welch's t-test."""
