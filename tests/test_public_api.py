"""The downstream side from Python: polymask.finetune, polymask.benchmark and polymask.load_task do what the
command line does."""
import pytest

import polymask
from polymask.errors import ConfigError


def test_load_task_reads_a_built_in_task_with_its_own_modality():
    task = polymask.load_task("moleculenet/esol")
    assert task.spec.key == "moleculenet/esol"
    assert min(len(task.train), len(task.valid), len(task.test)) > 0
    assert len(task.train) + len(task.valid) + len(task.test) == 1128 - len(task.skipped) - task.duplicates_removed


def test_finetune_takes_a_task_or_a_table_not_both(tmp_path):
    with pytest.raises(ConfigError, match="not both"):
        polymask.finetune("smiles-mlm-1.7m", "moleculenet/esol", data=tmp_path / "my.csv", target="y")
    with pytest.raises(ConfigError, match="not both"):
        polymask.finetune("smiles-mlm-1.7m")
    with pytest.raises(ConfigError, match="needs --target"):
        polymask.finetune("smiles-mlm-1.7m", data=tmp_path / "my.csv")
    with pytest.raises(ConfigError, match="for your own table"):
        polymask.finetune("smiles-mlm-1.7m", "moleculenet/esol", target="y")
    with pytest.raises(ConfigError, match="save_model must stay true"):
        polymask.finetune("smiles-mlm-1.7m", "moleculenet/esol", save_model=False)


@pytest.mark.integration
def test_finetune_on_a_task_and_benchmark_from_python(tiny_smiles_run, tmp_path):
    quick = {"epochs": 1, "max_len": 64, "batch_size": 16, "max_train_examples": 40, "max_valid_examples": 20,
             "max_test_examples": 20}
    model = polymask.load_model(polymask.finetune(tiny_smiles_run, "moleculenet/esol", out=tmp_path / "ft", **quick))
    assert model.predict(["CCO", "c1ccccc1O"])["reason"].isna().all()
    table = polymask.benchmark("moleculenet", [tiny_smiles_run], tasks=["esol"], seeds=1, out=tmp_path / "bench",
                               save_model=False, **quick)
    systems = set(table["system"])
    assert "no pretraining" in systems and any(name.startswith("ECFP4") for name in systems) and len(systems) >= 3
    assert set(table["task"]) == {"moleculenet/esol"} and table["mean"].notna().all()


def test_seeds_are_a_count_or_the_seeds_and_never_none():
    from polymask.benchmarking.api import seed_list

    assert seed_list(3) == [0, 1, 2] and seed_list([4, 7]) == [4, 7]
    with pytest.raises(ConfigError, match="no fine-tuning seed"):
        seed_list([])
    with pytest.raises(ConfigError, match="no checkpoint to benchmark"):
        polymask.benchmark("moleculenet", [])


def test_finetune_refuses_a_hugging_face_folder_it_could_not_return(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ConfigError, match="keeps no fine-tuned model"):
        polymask.finetune(tmp_path, "moleculenet/esol")


def test_a_regression_column_with_NA_stays_regression():
    from polymask.tasks.data.own_table import target_kind

    for missing in ("NA", "N/A", "NaN", "null", "None", ""):
        assert target_kind({"logS": ["1.2", "3.4", missing, "5.1", "-0.3"]}) == ("regression", None)
