"""Benchmark families' reference baselines: ``families.<benchmark>`` (named after its folder of tasks/) registers
them in ``systems.REFERENCES`` when imported; a benchmark without a module has none."""
