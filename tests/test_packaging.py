"""A built (non-editable) wheel carries the data folders and finds them after installation."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
import polymask, sys
from pathlib import Path

from polymask.config import build_run_config, load_yaml
from polymask.modalities import MODALITIES
from polymask.builtin_models import search_path
from polymask.resources import builtin_dir
target = Path(sys.argv[1]).resolve()
assert Path(polymask.__file__).resolve().is_relative_to(target), polymask.__file__
for kind in ("tokenizers", "configs", "tasks", "corpora"):
    assert builtin_dir(kind).resolve().is_relative_to(target), builtin_dir(kind)
assert (search_path()[-1] / "README.md").resolve().is_relative_to(target)  # where built-in models ship
for name in ("smiles", "dna", "text"):
    modality = MODALITIES.get(name)()
    modality.load_tokenizer()
    assert all(path.is_file() for path in modality.corpus_paths())
build_run_config(load_yaml("smiles-mlm-tiny"))
print("ok")
"""


def test_wheel_carries_builtin_data_and_works_when_installed(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist"), str(ROOT)], check=True, timeout=300)
    wheel = next((tmp_path / "dist").glob("polymask-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "polymask/_builtin/tokenizers/smiles/tokenizer.json" in names
    assert "polymask/_builtin/configs/smiles-mlm-tiny.yaml" in names
    assert "polymask/corpora/dna/16s_gold.fasta.gz" in names
    assert "polymask/pretrained/README.md" in names  # and every built-in model folder beside it
    assert not any(name.startswith(("tokenizers/", "configs/", "tasks/")) for name in names)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, "-c", CHECK, str(target)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
