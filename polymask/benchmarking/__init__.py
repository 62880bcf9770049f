"""The benchmark application, over ``tasks`` (task specs, data, fine-tuning, metrics): ``polymask finetune`` and
``polymask benchmark`` with their Python twins (``cli``, ``api``), the rows (``systems``, ``families``) x tasks x seeds
runner, its cell cache and its report tables (``runner``, ``report``). Named ``benchmarking``, not ``benchmark``: a
``polymask.benchmark`` package would shadow the public function ``polymask.benchmark`` once imported."""
