"""``polymask compare``: pretrain one model per objective under the same budget, then benchmark and
analyse every checkpoint and write one report."""
