"""The documented custom-modality example (docs/examples/protein.py) trains via train() and the CLI."""
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import polymask
from polymask.modalities import MODALITIES

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "protein.py"
PROTEINS = ROOT / "tests" / "data" / "proteins.fasta"


@pytest.fixture
def protein_modality():
    spec = importlib.util.spec_from_file_location("protein_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module.Protein
    MODALITIES.unregister("protein")


def test_custom_modality_registers_and_tokenizes(protein_modality):
    assert MODALITIES.get("protein") is protein_modality
    modality = protein_modality()
    tokenizer = modality.load_tokenizer()
    sequence = modality.normalize("mkv lla*")
    assert sequence == "MKVLLA"
    assert modality.decode(tokenizer, tokenizer.encode(sequence).ids) == sequence
    with pytest.raises(polymask.InvalidRecord, match="not an amino-acid"):
        modality.normalize("MK1")


def test_custom_modality_trains_through_the_python_api(protein_modality, tmp_path, make_config):
    config = make_config("protein", tmp_path / "run", max_steps=60, eval_batches=2)
    config["data"].update(paths=[str(PROTEINS)], val_fraction=0.15)
    summary = polymask.train(config)
    assert summary["modality"] == "protein" and summary["steps"] == 60
    assert summary["records"] == 20 and summary["skipped_records"] == 0
    assert summary["final_val_loss"] < math.log(25) - 0.15  # below a uniform guess over 25 residues


def test_custom_modality_trains_through_the_cli(tmp_path):
    run = tmp_path / "cli-run"
    result = subprocess.run(
        [sys.executable, "-m", "polymask", "train", "--plugin", str(EXAMPLE), "--modality", "protein",
         "--objective", "mlm", "--data", str(PROTEINS), "--out", str(run), "--set", "model.preset=tiny",
         "--set", "train.max_steps=5", "--set", "train.progress=false", "--set", "data.max_len=64"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads((run / "summary.json").read_text())["steps"] == 5


class _Variant:
    """A subclass of the example registered as ``name`` for one test (unregistered afterwards)."""

    def __init__(self, base: type, name: str, **methods) -> None:
        self.cls = type(name.title(), (base,), {"name": name, **methods})
        self.name = name

    def __enter__(self) -> str:
        MODALITIES.register(self.name)(self.cls)
        return self.name

    def __exit__(self, *exc) -> None:
        MODALITIES.unregister(self.name)


def _lookup_bug(self, text: str) -> str:
    return {"MKV": "MKV"}[text[:3]]


@pytest.mark.parametrize("name, methods, error", [
    ("buggy", {"normalize": _lookup_bug},
     r"proteins.fasta:\d+: modality 'buggy' failed on the record '\w+' \(.*test_custom_modality.py, line \d+\): "
     r"KeyError: '\w+'; a record it cannot use should raise polymask.InvalidRecord$"),
    ("counting", {"normalize": lambda self, text: len(text)},
     r"proteins.fasta:\d+: modality 'counting': normalize returned int, not a string, for the record '\w+'$"),
    ("silent", {"tokenizer_input": lambda self, text: ""},
     r"the corpus yields no training sequences \(20 records read, 20 skipped, 0 held out for validation\); "
     r"first skipped: .*proteins.fasta:\d+: no tokens after tokenisation$"),
])
def test_a_faulty_custom_modality_stops_training_in_one_line(protein_modality, tmp_path, make_config, name, methods,
                                                            error):
    with _Variant(protein_modality, name, **methods):
        config = make_config(name, tmp_path / "run", max_steps=1)
        config["data"].update(paths=[str(PROTEINS)])
        with pytest.raises(polymask.PolymaskError, match=error):
            polymask.train(config)


def test_a_registered_modality_is_named_by_its_registration(protein_modality):
    @polymask.register_modality("unnamed-protein")
    class Unnamed(protein_modality):
        Config = protein_modality.Config

    try:
        assert Unnamed.name == "unnamed-protein" and Unnamed().config.name == "unnamed-protein"
    finally:
        MODALITIES.unregister("unnamed-protein")


def test_a_build_tokenizer_that_returns_no_tokenizer_is_one_error(protein_modality):
    with _Variant(protein_modality, "tokenless", build_tokenizer=lambda self, texts=(), vocab_size=None: None):
        with pytest.raises(polymask.DataError, match=r"^modality 'tokenless': build_tokenizer returned NoneType, not a "
                                                     r"tokenizers.Tokenizer$"):
            MODALITIES.get("tokenless")().load_tokenizer()
