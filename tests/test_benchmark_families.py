"""A benchmark family's reference baselines are found by the benchmark's name: the module
``polymask.benchmarking.families.<benchmark>``, if there is one; no table names the families."""
import pkgutil

from polymask.benchmarking import families
from polymask.benchmarking.systems import REFERENCES, reference_systems
from polymask.finetune_config import FinetuneConfig
from polymask.modalities import MODALITIES
from polymask.tasks.data.spec import task_names

BENCHMARKS = sorted({key.split("/")[0] for key in task_names()})
FAMILY_MODULES = sorted(module.name for module in pkgutil.iter_modules(families.__path__))


def test_each_benchmark_with_a_family_module_gets_its_references_and_the_others_none():
    assert FAMILY_MODULES and set(FAMILY_MODULES) <= set(BENCHMARKS)  # every module is named after a folder of tasks/
    modality = MODALITIES.get("smiles")()
    for benchmark in BENCHMARKS:
        rows = [row.name for row in reference_systems(benchmark, modality, FinetuneConfig(max_train_examples=10))]
        expected = [ref.name for ref in REFERENCES.get(benchmark)] if benchmark in FAMILY_MODULES else []
        assert rows == expected and bool(rows) == (benchmark in FAMILY_MODULES), benchmark


def test_a_benchmark_without_a_family_module_has_no_references():
    modality = MODALITIES.get("smiles")()
    assert reference_systems("no_such_family", modality, FinetuneConfig()) == []
    assert reference_systems("no-such.family", modality, FinetuneConfig()) == []
