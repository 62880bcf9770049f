"""Training: the loop, checkpoints, run summaries."""
