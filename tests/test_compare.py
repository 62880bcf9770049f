"""``polymask compare`` end to end at toy scale: two objectives, a step budget, one MoleculeNet task."""
import csv
import json
import re

import pytest

from polymask.cli import main
from polymask.compare.budget import Budget, parse_budget, steps_for
from polymask.compare.report import COLLAPSED_VERDICT, benchmark_rows
from polymask.errors import ConfigError

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


def test_budgets_parse_and_turn_into_steps():
    assert parse_budget("30m") == Budget("time", 1800) and parse_budget("90s") == Budget("time", 90)
    assert parse_budget("2000-steps") == Budget("steps", 2000)
    assert parse_budget("5M-tokens") == Budget("tokens", 5e6)
    assert steps_for(Budget("tokens", 1000), tokens_per_step=300, step_seconds=0) == 4
    assert steps_for(Budget("time", 60), tokens_per_step=0, step_seconds=0.25) == 240
    with pytest.raises(ConfigError, match="budget"):
        parse_budget("a while")
    for zero in ("0m", "0-steps", "0-tokens"):
        with pytest.raises(ConfigError, match=f"budget '{zero}' is zero"):
            parse_budget(zero)


def test_no_ordering_is_called_against_a_collapsed_pretraining_run():
    runs = [{"run_dir": "runs/mlm-seed0", "objective": "mlm", "collapsed": False},
            {"run_dir": "runs/exlm-seed0", "objective": "exlm", "collapsed": True},
            {"run_dir": "runs/maelm-seed0", "objective": "maelm", "collapsed": False}]
    scores = {"mlm": [0.60, 0.61, 0.60], "exlm": [0.80, 0.81, 0.80], "maelm": [0.80, 0.81, 0.80]}
    cells = [{"system": f"{name}-seed0 ({name})", "task": "moleculenet/bbbp", "metric": "roc_auc",
              "test": {"roc_auc": value}} for name, values in scores.items() for value in values]
    verdicts = {row["objective"]: row["vs_mlm"] for row in benchmark_rows("moleculenet", {"cells": cells}, runs, "mlm")
                if row["task"] == "moleculenet/bbbp"}
    assert verdicts == {"mlm": "baseline", "exlm": COLLAPSED_VERDICT, "maelm": "better"}


def test_variants_of_one_objective_are_rows_of_their_own():
    runs = [{"run_dir": "runs/mlm-seed0", "objective": "mlm", "variant": "mlm"},
            {"run_dir": "runs/mlm100-seed0", "objective": "mlm", "variant": "mlm100"}]
    cells = [{"system": f"{name}-seed0 (mlm)", "task": "moleculenet/bbbp", "metric": "roc_auc",
              "test": {"roc_auc": value}} for name, values in (("mlm", [0.6, 0.61, 0.6]), ("mlm100", [0.5, 0.51, 0.5]))
             for value in values]
    verdicts = {row["objective"]: row["vs_mlm"] for row in benchmark_rows("moleculenet", {"cells": cells}, runs, "mlm")
                if row["task"] == "moleculenet/bbbp"}
    assert verdicts == {"mlm": "baseline", "mlm100": "worse"}


def test_tiny_compare_run_writes_the_report_and_reuses_it(tmp_path, capsys):
    out = tmp_path / "compare"
    args = ["compare", "--modality", "smiles", "--objectives", "mlm,maelm", "--budget", "6-steps", "--out", str(out),
            "--set", "model.preset=tiny", "--set", "train.batch_size=8", "--set", "train.precision=fp32",
            "--set", "data.max_val_records=48", "--set", "train.eval_every=3",
            "--tasks", "moleculenet/esol", "--benchmark-seeds", "2", "--epochs", "2", "--max-train-examples", "120"]
    assert main(args) == 0
    for name in ("report.md", "compare.json", "summary.csv", "loss_curves.png", "rank/rank.png",
                 "semantics/semantics.json", "benchmark-moleculenet/results.md"):
        assert (out / name).is_file(), name
    report = (out / "report.md").read_text()
    assert "6 optimiser steps per run" in report and "| mlm-seed0 | mlm | 6 |" in report
    assert "**Verdicts**" in report and "Validation scores per objective" in report and "without test-time" in report
    assert "Representation rank" in report and "Semantic multimodality" in report
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {"mlm", "maelm", "no pretraining"} <= {row["objective"] for row in rows}  # plus the reference rows
    maelm = next(row for row in rows if row["objective"] == "maelm")
    runs = json.loads((out / "compare.json").read_text())["runs"]
    collapsed = any(run["collapsed"] for run in runs)  # 6 steps teach nothing: the alarm may well fire
    assert maelm["task"] == "moleculenet/esol"
    assert maelm["vs_mlm"] == COLLAPSED_VERDICT if collapsed else maelm["vs_mlm"] in {"within noise", "better", "worse"}
    assert ("Collapsed pretraining" in report) == collapsed and "| unigram accuracy |" in report
    stamp = (out / "pretrain" / "mlm-seed0" / "summary.json").stat().st_mtime
    rank_stamp = (out / "rank" / "rank.json").stat().st_mtime
    assert main(args) == 0  # the rerun reuses the finished pieces
    assert (out / "pretrain" / "mlm-seed0" / "summary.json").stat().st_mtime == stamp
    assert (out / "rank" / "rank.json").stat().st_mtime == rank_stamp
    assert json.loads((out / "compare.json").read_text())["runs"][0]["reused"] is True
    assert main([*args, "--no-references"]) == 0  # the objectives alone, from the same runs and cells
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {row["objective"] for row in rows} == {"mlm", "maelm"} and {row["split"] for row in rows} == {"valid", "test"}
    assert main([*args[:4], "mlm", *args[5:], "--no-references"]) == 0  # fewer runs: the analyses follow them
    for name in ("rank", "semantics"):
        measured = json.loads((out / name / f"{name}.json").read_text())["results"]
        assert [result["label"] for result in measured] == ["mlm-seed0 (mlm)"], name
    capsys.readouterr()
    assert main([*args, "--set", "model.d_ff=64"]) == 2  # other settings: not the runs this folder holds
    assert "holds a run pretrained with other settings" in capsys.readouterr().err


def test_objective_variants_parse_with_labels_and_options():
    from polymask.compare.variants import Variant, parse_variants

    variants = parse_variants(["mlm,maelm", "mlm100=mlm:mask_prob=1.0,random_prob=0", "maelm:decoder_layers=4"])
    assert variants == [Variant("mlm", "mlm"), Variant("maelm", "maelm"),
                        Variant("mlm100", "mlm", {"mask_prob": 1.0, "random_prob": 0}),
                        Variant("maelm-decoder_layers4", "maelm", {"decoder_layers": 4})]
    assert variants[2].describe() == "mlm (mask_prob=1.0, random_prob=0)"
    with pytest.raises(ConfigError, match="not a KEY=VALUE option"):
        parse_variants(["x=mlm:name=maelm"])  # the objective is named before the colon
    listed = parse_variants(["x=exlm:k=2,transitions=sparse,max_slots=64"])[0].options
    assert listed == {"k": 2, "transitions": "sparse", "max_slots": 64}
    assert parse_variants(["y=mlm:a=[1, 2],b=3"])[0].options == {"a": [1, 2], "b": 3}  # a comma inside a value


def test_a_variant_s_bad_option_is_one_line_naming_what_was_typed(tmp_path):
    from polymask.compare.run import variant_config
    from polymask.compare.variants import parse_variants

    base = {"modality": {"name": "smiles"}, "objective": {"name": "mlm"}}
    for typed, said in (("mlm:mask_prob=abc", "mlm-mask_probabc = mlm (mask_prob=abc)"),
                        ("kept=maelm:mask_prob=0.5,random_prob=0.6", "kept = maelm (mask_prob=0.5, random_prob=0.6)")):
        with pytest.raises(ConfigError, match=re.escape(f"--objectives {said}: ")):
            variant_config(base, parse_variants([typed])[0], 0, tmp_path)


def test_a_variant_s_options_go_over_the_base_recipe_s(tmp_path):
    from polymask.compare.pretrain import run_config
    from polymask.compare.variants import Variant

    base = {"modality": {"name": "smiles"}, "objective": {"name": "maelm", "decoder_layers": 2, "mask_ratio": 0.2}}
    plain = run_config(base, "maelm", 0, tmp_path / "a").objective
    variant = run_config(base, Variant("kept", "maelm", {"mask_prob": 0.8, "random_prob": 0.1}), 0, tmp_path / "b")
    assert (plain.mask_prob, plain.decoder_layers, plain.mask_ratio) == (1.0, 2, 0.2)
    assert (variant.objective.mask_prob, variant.objective.random_prob, variant.objective.decoder_layers) == \
        (0.8, 0.1, 2)
    exlm = run_config(base, Variant("x", "exlm", {"rope_2d": False}), 0, tmp_path / "c")
    assert exlm.model.rope_2d is False and exlm.objective.mask_ratio == 0.2


def test_two_compares_on_one_folder_share_the_pretraining_runs(tmp_path, capsys):
    """A run another invocation is pretraining is passed over first (``wait=False`` raises), then waited for."""
    from polymask.compare.pretrain import pretrain
    from polymask.compare.run import pretrain_all
    from polymask.compare.variants import Variant
    from polymask.errors import RunBusy
    from polymask.locks import acquire

    budget, kept = parse_budget("2-steps"), Variant("kept", "mlm", {"mask_prob": 0.0, "random_prob": 0.0})
    folder = tmp_path / "pretrain" / "kept-seed0"
    folder.mkdir(parents=True)
    with acquire(folder / ".compare.lock", str):  # as another polymask compare holds it
        with pytest.raises(RunBusy, match="is pretraining .*kept-seed0"):
            pretrain(_base(), kept, 0, budget, tmp_path, wait=False)
    runs = pretrain_all(_base(), [(Variant("mlm", "mlm"), 0), (kept, 0)], budget, tmp_path)
    assert [run["variant"] for run in runs] == ["mlm", "kept"] and runs[1]["variant_options"] == kept.options
    assert (tmp_path / "pretrain" / "kept-seed0" / "summary.json").is_file()
    said = capsys.readouterr().err
    assert "polymask compare: pretraining" in said and "kept-seed0 (2 optimiser steps per run)" in said


def test_a_saved_exlm_run_config_is_a_base_for_every_objective(tmp_path):
    """A run's saved config repeats its objective's options and encoder decisions (ExLM: k, model.rope_2d); each
    compared objective gets its own, keeping only the mask ratio."""
    from polymask.compare.pretrain import run_config

    base = {"modality": {"name": "smiles"}, "objective": {"name": "exlm", "k": 4, "mask_ratio": 0.3},
            "model": {"preset": "tiny", "rope_2d": True}}
    configs = {name: run_config(base, name, 0, tmp_path / name) for name in ("mlm", "maelm", "exlm")}
    assert {name: config.model.rope_2d for name, config in configs.items()} == {"mlm": False, "maelm": False,
                                                                                 "exlm": True}
    assert all(config.objective.mask_ratio == 0.3 for config in configs.values())
    assert configs["exlm"].objective.k == 4


@pytest.mark.parametrize("setting", [{"extra_features": ["morgan"]}, {"test_time_average": True}])
def test_compare_refuses_settings_that_add_rows_before_pretraining(tmp_path, setting):
    from polymask.compare.run import run_compare

    with pytest.raises(ConfigError, match="compare ranks objectives by their encoders alone"):
        run_compare("smiles", ["mlm", "maelm"], parse_budget("10steps"), tmp_path / "out", {}, [0], 1, None, setting)
    assert not (tmp_path / "out").exists()


def test_compare_fine_tunes_with_each_benchmark_s_recipe_without_test_time_averaging():
    from polymask.compare.run import compare_settings
    from polymask.tasks.finetune.recipe import benchmark_recipe

    recipe = benchmark_recipe("dna")
    assert recipe["test_time_average"] and recipe["augment"]
    chosen = compare_settings("dna", {"epochs": 2})
    assert (chosen.lr, chosen.max_len, chosen.augment, chosen.epochs) == (recipe["lr"], recipe["max_len"], True, 2)
    assert not chosen.test_time_average


def test_compare_resolves_task_names_as_polymask_benchmark_does():
    from polymask.compare.run import compare_tasks

    assert compare_tasks("dna", ["tf_0", "dna/mouse_0"]) == {"dna": ["dna/tf_0", "dna/mouse_0"]}
    assert len(compare_tasks("dna", ["all"])["dna"]) > len(compare_tasks("dna", None)["dna"])
    with pytest.raises(ConfigError, match="'moleculenet/bbbp' is in none of the dna benchmarks"):
        compare_tasks("dna", ["moleculenet/bbbp"])
    with pytest.raises(ConfigError, match="unknown tasks"):
        compare_tasks("dna", ["dna/tf_9"])


@pytest.mark.parametrize("extra, message", [
    (["--objectives", ","], "--objectives names no objective"),
    (["--objectives", "mlm,mlm"], "--objectives repeats mlm"),
    (["--objectives", "mlm", "mlm=maelm:mask_prob=0.8"], "--objectives repeats mlm"),
    (["--objectives", "maelm=mlm:mask_prob=1.0"], "the label 'maelm' names the objective maelm with its defaults"),
    (["--objectives", "mlm,maelm:mask_prob=0.8"], "one variant per argument"),
    (["--objectives", "mlm", "x=mlm:mask_prob=[1"], "the value of mask_prob: not valid YAML"),
    (["--objectives", "mlm", "x=maelm:decoder_positions=absolute,decoder_max_positions=16"],
     "--objectives x = maelm (decoder_positions=absolute, decoder_max_positions=16): sequence of 128 positions "
     "exceeds the decoder's position table (16)"),
    (["--objectives", "mlm", "x=maelm:decoder_heads=3"], "--objectives x = maelm (decoder_heads=3): decoder width"),
    (["--objectives", "mlm", "m=mlm:mask_prob"], "'mask_prob' is not a KEY=VALUE option of mlm"),
    (["--objectives", "mlm", "a/b=mlm:mask_prob=1"], "label 'a/b' must be letters"),
    (["--objectives", "mlm", "mlm:mask_prop=1"], "mask_prop"),
    (["--objectives", "mlm", "x=mlm:mask_prob=0.9,random_prob=0.2"], "objective.mask_prob + objective.random_prob"),
    (["--benchmark-seeds", "0"], "--benchmark-seeds must be at least 1"),
    (["--set", "objective=null"], "objective: expected a mapping of settings or a name, got None"),
    (["--set", "data=null", "--data", "x.smi"], "data: expected a mapping of settings, got None"),
    (["--tasks", "glue/sst2"], "is in none of the smiles benchmarks"),
    (["--set", "data.val_fraction=0"], "compare needs a validation split"),
])
def test_compare_refuses_what_leaves_nothing_to_compare_in_one_line(tmp_path, capsys, extra, message):
    from tests.conftest import one_line_error

    args = ["compare", "--modality", "smiles", "--budget", "2-steps", "--out", str(tmp_path / "out"), *extra]
    assert message in one_line_error(capsys, main(args))
    assert not (tmp_path / "out" / "pretrain").exists()


def _finished_run(out, objective="mlm", status="completed", step=8, pointer_step=8, **plan):
    """A pretraining folder as compare leaves it (or as a results folder keeps it), without training one."""
    run_dir = out / "pretrain" / f"{objective}-seed0"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "plan.json").write_text(json.dumps({"budget": "steps", "amount": 8, **plan}))
    (run_dir / "summary.json").write_text(json.dumps({"status": status, "objective": objective, "steps": step,
                                                       "checkpoint_step": step, "run_dir": "elsewhere/typed"}))
    (run_dir / "checkpoints" / "latest.json").write_text(json.dumps({"checkpoint": f"step-{pointer_step:06d}",
                                                                     "step": pointer_step}))
    return run_dir


def _base():
    return {"modality": {"name": "smiles"}, "model": {"preset": "tiny"}}


def test_a_kept_run_is_reused_from_where_it_is_and_its_plan_is_checked(tmp_path):
    from polymask.compare.pretrain import pretrain, run_config, settings_digest
    from polymask.errors import OutputError

    out = tmp_path / "moved"
    run_dir = _finished_run(out)
    config = run_config(_base(), "mlm", 0, run_dir)
    plan = json.loads((run_dir / "plan.json").read_text())
    (run_dir / "plan.json").write_text(json.dumps({**plan, "settings": settings_digest(config)}))  # hash-only plan
    reused = pretrain(_base(), "mlm", 0, parse_budget("8-steps"), out)
    assert reused["reused"] and reused["run_dir"] == str(run_dir) and not reused["diverged"]
    kept = config.model_dump(mode="json", exclude={"out"})
    kept["train"].pop("progress")
    kept["model"].pop("rope_2d")  # a field added since the run: its default is what the run had
    (run_dir / "plan.json").write_text(json.dumps({**plan, "settings_fields": kept}))
    assert pretrain(_base(), "mlm", 0, parse_budget("8-steps"), out)["reused"]
    with pytest.raises(OutputError, match=r"other settings \(model.d_ff: then 256, now 64\)"):
        pretrain({**_base(), "model": {"preset": "tiny", "d_ff": 64}}, "mlm", 0, parse_budget("8-steps"), out)
    (run_dir / "plan.json").write_text("{not json")
    with pytest.raises(OutputError, match="plan.json: unreadable"):
        pretrain(_base(), "mlm", 0, parse_budget("8-steps"), out)
    (run_dir / "plan.json").unlink()  # without its plan, the run is not overwritten
    with pytest.raises(OutputError, match="no plan.json, so its budget and settings are unknown"):
        pretrain(_base(), "mlm", 0, parse_budget("8-steps"), out)
    assert (run_dir / "summary.json").is_file()


def test_a_step_budget_runs_every_step_though_the_recipe_has_a_clock(tmp_path, capsys):
    from polymask.compare.pretrain import pretrain

    recipe = {**_base(), "train": {"max_time": 0.001, "eval_every": 100, "save_every": 100}}
    run = pretrain(recipe, "mlm", 0, parse_budget("6-steps"), tmp_path)
    assert run["steps"] == 6 and run["status"] == "completed"
    assert "train.max_time (0.001 s) is dropped: the budget (6 optimiser steps per run)" in capsys.readouterr().err


def test_a_kept_run_must_point_at_its_last_checkpoint_and_a_diverged_one_is_final(tmp_path):
    from polymask.compare.pretrain import pretrain
    from polymask.compare.report import DIVERGED_VERDICT, NO_BASELINE_VERDICT
    from polymask.errors import OutputError

    _finished_run(tmp_path / "a", pointer_step=4)
    with pytest.raises(OutputError, match="ends at the checkpoint of step 8, but checkpoints/latest.json points at step 4"):
        pretrain(_base(), "mlm", 0, parse_budget("8-steps"), tmp_path / "a")
    _finished_run(tmp_path / "b", "maelm", status="diverged", step=5, pointer_step=5)
    diverged = pretrain(_base(), "maelm", 0, parse_budget("8-steps"), tmp_path / "b")
    assert diverged["diverged"] and diverged["reused"]
    runs = [{"run_dir": "r/mlm-seed0", "objective": "mlm"}, {**diverged, "run_dir": "r/maelm-seed0"},
            {"run_dir": "r/exlm-seed0", "objective": "exlm"}]
    cells = [{"system": f"{name}-seed0 ({name})", "task": task, "metric": "roc_auc", "test": {"roc_auc": value}}
             for name, task in (("mlm", "moleculenet/bbbp"), ("maelm", "moleculenet/bbbp"), ("exlm", "moleculenet/bbbp"),
                                ("exlm", "moleculenet/bace")) for value in (0.7, 0.71)]
    verdicts = {(row["objective"], row["task"]): row["vs_mlm"]
                for row in benchmark_rows("moleculenet", {"cells": cells}, runs, "mlm")}
    assert verdicts[("maelm", "moleculenet/bbbp")] == DIVERGED_VERDICT
    assert verdicts[("exlm", "moleculenet/bace")] == NO_BASELINE_VERDICT


def test_a_second_compare_on_the_same_out_waits_for_a_run_being_pretrained_then_reuses_it(tmp_path, capsys):
    """Two invocations may share an --out (to use two cores on the benchmark cells); one pretrains a run while the
    other waits, instead of probing beside it and rewriting its plan."""
    import threading

    from polymask.compare.pretrain import pretrain
    from polymask.locks import acquire

    run_dir = _finished_run(tmp_path)
    held = acquire(run_dir / ".compare.lock", str)
    threading.Timer(0.5, held.release).start()
    assert pretrain(_base(), "mlm", 0, parse_budget("8-steps"), tmp_path)["reused"]
    assert "polymask compare: waiting for process" in capsys.readouterr().err


def test_compare_tasks_are_named_once_and_only_for_a_modality_with_a_benchmark():
    from polymask.compare.run import compare_tasks

    assert compare_tasks("dna", ["tf_0", "dna/tf_0"]) == {"dna": ["dna/tf_0"]}  # one cell per seed, not two
    with pytest.raises(ConfigError, match="--tasks: no built-in benchmark takes protein records"):
        compare_tasks("protein", ["tf_0"])


def test_a_run_that_diverged_before_its_first_checkpoint_says_so(tmp_path):
    from polymask.compare.pretrain import pretrain
    from polymask.errors import OutputError

    run_dir = _finished_run(tmp_path, status="diverged", step=3)
    (run_dir / "checkpoints" / "latest.json").unlink()
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "checkpoint_step": None}))
    with pytest.raises(OutputError, match="diverged before its first checkpoint: nothing to benchmark"):
        pretrain(_base(), "mlm", 0, parse_budget("8-steps"), tmp_path)


def test_an_interrupted_time_budget_resumes_only_on_the_device_it_started_on(tmp_path):
    from polymask.compare.pretrain import pretrain
    from polymask.errors import OutputError

    run_dir = _finished_run(tmp_path, status="interrupted", step=4, pointer_step=4)
    (run_dir / "plan.json").write_text(json.dumps({"budget": "time", "amount": 8.0, "max_steps": 40,
                                                   "device": "NVIDIA H200"}))
    with pytest.raises(OutputError, match="started its time budget on NVIDIA H200; finishing it on "):
        pretrain(_base(), "mlm", 0, parse_budget("8s"), tmp_path)
