"""``polymask bench --objectives mlm,exlm``: the side-by-side comparison runs and reports ExLM's floor."""
import pytest

from polymask.bench.contenders import BenchSetup
from polymask.bench.objectives import compare_objectives, write_comparison


@pytest.mark.integration
def test_objectives_side_by_side(tmp_path):
    setup = BenchSetup("smiles", "tiny", 8, 64)
    comparison = compare_objectives(("mlm", "exlm"), setup, warmup=1, steps=2)
    mlm, exlm = comparison["rows"]
    assert mlm["relative_step_time"] == 1.0 and mlm["expansion_ratio"] is None
    # every row expands its [CLS] and [SEP] and at least one masked token into k = 4 states
    assert exlm["expansion_ratio"]["real"] > 1.3 and exlm["expansion_ratio"]["padded"] > 1.3
    assert exlm["step_ms"] > 0 and exlm["relative_step_time"] > 0
    table = write_comparison(comparison, setup, tmp_path, {"device": "test"}).read_text()
    assert "| exlm |" in table and (tmp_path / "smiles-tiny-b8-l64-mlm-exlm.json").is_file()
