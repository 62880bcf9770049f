"""``polymask bench``: training throughput of polymask objectives and HF BERT, and corpus preparation speed."""
