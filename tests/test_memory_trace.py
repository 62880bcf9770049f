"""Host memory and step time recorded over a run (metrics lines and the summary)."""
import json

from polymask import train
from polymask.jsonio import read_jsonl
from polymask.training.memory import ResourceTrace, rss_mb
from tests.conftest import tiny_config


def test_every_metrics_line_records_rss_and_the_summary_its_peak_and_growth(tmp_path, capsys):
    run = tmp_path / "run"
    train(tiny_config("smiles", run, max_steps=12, eval_every=4, log_every=2))
    lines = [line for line in read_jsonl(run / "metrics.jsonl") if "loss" in line]
    assert [line["step"] for line in lines] == [2, 4, 6, 8, 10, 12]
    assert all(line["rss_mb"] > 10 for line in lines)
    assert all(line["step_s"] > 0 for line in lines)
    memory = json.loads((run / "summary.json").read_text())["memory"]
    assert memory["peak_rss_mb"] >= max(line["rss_mb"] for line in lines)
    assert memory["settled_from_step"] == 6  # after the warm-up and the first evaluation (step 4)
    assert memory["rss_growth_mb"] == round(memory["rss_mb_last"] - memory["rss_mb_settled"], 1)
    assert "memory: peak RSS" in capsys.readouterr().out


def test_growth_is_measured_between_settled_samples_only():
    trace = ResourceTrace(settled_step=3)
    trace.samples = [(0, 100.0, None), (2, 400.0, 0.5), (4, 410.0, 0.2), (6, 430.0, 0.25)]
    assert trace.report() == {"peak_rss_mb": 430.0, "rss_growth_mb": 20.0, "settled_from_step": 4, "rss_mb_settled": 410.0,
                              "rss_mb_last": 430.0, "step_s_settled": 0.2, "step_s_last": 0.25}
    assert ResourceTrace(settled_step=100, samples=[(2, 50.0, 0.1)]).report() == {
        "peak_rss_mb": 50.0, "rss_growth_mb": None, "settled_from_step": None}
    assert rss_mb() > 10
