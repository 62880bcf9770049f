"""Config validation: clear messages naming the field; every built-in recipe validates."""
import subprocess
import sys

import pytest

from polymask.cli import main
from polymask.config import apply_override, build_run_config, load_yaml
from polymask.errors import ConfigError
from polymask.resources import builtin_dir

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end


def test_unknown_key_is_named_with_the_closest_fields():
    with pytest.raises(ConfigError, match=r"train\.lrr: Extra inputs are not permitted \(got 1\); did you mean 'lr'\?"):
        build_run_config({"modality": "smiles", "objective": "mlm", "train": {"lrr": 1}})
    with pytest.raises(ConfigError, match=r"trian: .*did you mean 'train'\?"):
        build_run_config({"modality": "smiles", "objective": "mlm", "trian": {"lr": 1}})
    with pytest.raises(ConfigError, match=r"modality\.canonicall: .*did you mean 'canonical'\?"):
        build_run_config({"modality": {"name": "smiles", "canonicall": True}, "objective": "mlm"})


def test_wrong_type_is_named_with_the_value():
    with pytest.raises(ConfigError, match=r"train\.batch_size: .*integer.*got 'many'"):
        build_run_config({"modality": "smiles", "objective": "mlm", "train": {"batch_size": "many"}})


def test_component_options_are_validated_by_their_own_model():
    with pytest.raises(ConfigError, match=r"modality\.k: .*less than or equal to 8"):
        build_run_config({"modality": {"name": "dna", "k": 12}, "objective": "mlm"})
    with pytest.raises(ConfigError, match=r"objective\.mask_ratio"):
        build_run_config({"modality": "dna", "objective": {"name": "mlm", "mask_ratio": 1.5}})


def test_unregistered_names_list_the_choices():
    with pytest.raises(ConfigError, match=r"modality\.name: unknown modality 'rna'; did you mean 'dna'\? "
                                          r"choose one of: dna, smiles, text"):
        build_run_config({"modality": "rna", "objective": "mlm"})
    with pytest.raises(ConfigError, match=r"objective\.name: unknown objective 'exml'; did you mean 'exlm'\?"):
        build_run_config({"modality": "dna", "objective": "exml"})
    with pytest.raises(ConfigError, match=r"objective\.name: unknown objective 'gpt'; choose one of: .*mlm"):
        build_run_config({"modality": "dna", "objective": "gpt"})


def test_overrides_parse_yaml_values():
    raw = {"modality": "smiles"}
    apply_override(raw, "train.lr=3e-4")
    apply_override(raw, "modality.canonical=false")
    assert raw == {"modality": {"name": "smiles", "canonical": False}, "train": {"lr": 3e-4}}
    config = build_run_config({**raw, "objective": "mlm"})
    assert config.train.lr == 3e-4 and config.modality.canonical is False


@pytest.mark.parametrize("recipe", sorted(p.stem for p in builtin_dir("configs").glob("*.yaml")))
def test_every_builtin_recipe_validates(recipe):
    build_run_config(load_yaml(recipe))


def test_a_mistyped_recipe_name_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"config 'smiles-mlm-tiyn' is neither a file nor a built-in recipe; "
                                          r"did you mean 'smiles-mlm-tiny'"):
        load_yaml("smiles-mlm-tiyn")


def test_config_errors_come_before_torch_is_imported(tmp_path):
    """A wrong value, key or recipe name (train and compare) fails in one line before torch is imported, so at
    once rather than after the seconds torch takes to load."""
    script = (
        "import sys\n"
        "from polymask.cli import main\n"
        "train = ['train', '--modality', 'smiles', '--objective', 'mlm']\n"
        f"compare = ['compare', '--modality', 'smiles', '--budget', '10-steps', '--out', {str(tmp_path)!r}]\n"
        "for argv in ([*train, '--set', 'train.lr=abc'], [*train, '--set', 'train.lrr=1'],\n"
        "             [*train, '--config', 'smiles-mlm-tiyn'], [*compare, '--set', 'data.max_len=2']):\n"
        "    assert main(argv) == 2, argv\n"
        "print('torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert "train.lr: Input should be a valid number" in result.stderr
    assert "train.lrr: Extra inputs are not permitted (got 1); did you mean 'lr'?" in result.stderr
    assert "did you mean 'smiles-mlm-tiny'" in result.stderr
    assert "data.max_len: Input should be greater than or equal to 8" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_reports_config_errors_before_any_work(capsys):
    assert main(["train", "--modality", "smiles", "--objective", "mlm", "--set", "train.warmup=5"]) == 2
    assert "train.warmup: Extra inputs are not permitted" in capsys.readouterr().err


def test_cli_entry_point_runs():
    result = subprocess.run([sys.executable, "-m", "polymask", "train", "--modality", "protein-x", "--objective", "mlm"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "unknown modality 'protein-x'" in result.stderr


def test_the_objective_owns_the_encoders_rope_2d():
    exlm = build_run_config({"modality": "smiles", "objective": "exlm", "model": {"preset": "tiny"}})
    assert exlm.model.rope_2d  # taken from objective.rope_2d, validated with the rest of the encoder
    assert build_run_config(exlm.model_dump(mode="json")) == exlm  # a saved config reads back the same
    flat = build_run_config({"modality": "smiles", "objective": {"name": "exlm", "rope_2d": False}})
    assert not flat.model.rope_2d
    assert not build_run_config({"modality": "smiles", "objective": "mlm"}).model.rope_2d
    with pytest.raises(ConfigError, match=r"model\.rope_2d: decided by the objective \(mlm needs False\)"):
        build_run_config({"modality": "smiles", "objective": "mlm", "model": {"rope_2d": True}})
    # a head of 6 dimensions holds one rotary coordinate, not two: refused at load time, not in the encoder
    build_run_config({"modality": "smiles", "objective": "mlm", "model": {"d_model": 48, "n_heads": 8}})
    with pytest.raises(ConfigError, match=r"model: with rope_2d=True \(objective exlm\): .*divisible by 4"):
        build_run_config({"modality": "smiles", "objective": "exlm", "model": {"d_model": 48, "n_heads": 8}})
