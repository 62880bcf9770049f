"""Test the declared dependency floors: a virtual environment with the lowest declared versions, a smoke test.

    python benchmarks/dependency_floors.py [--pin transformers==4.48.0 ...] [--out FILE]    (make floors)

Every ``name>=X`` of pyproject.toml is installed as ``name==X`` (``--pin`` replaces one, to look for the
lowest version that passes) together with polymask, and ``floors_smoke.py`` runs there: pretraining,
fine-tuning, AutoTokenizer on the built-in tokenizers, export and loading with transformers alone (the
fill-mask pipeline as docs/export.md shows it, without tokenizer=, included). A second environment holds
only torch and that transformers (no polymask) and loads the exports too.
torch is the exception: it stays at 2.13.0, whose CPU build lies on disk here (any other version pulls
a multi-GB CUDA build), so its declared floor is reasoned, not tested. Writes a JSON report.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TORCH = "torch==2.13.0"
FLOOR = re.compile(r"^([A-Za-z0-9_.\-]+)>=([^,;\s]+)$")


def declared_floors() -> dict[str, str]:
    """``{name: lowest version}`` of pyproject.toml's dependencies."""
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for requirement in dependencies:
        match = FLOOR.match(requirement.replace(" ", ""))
        if not match:
            raise SystemExit(f"pyproject.toml: '{requirement}' is not of the form name>=version")
        floors[match.group(1).lower()] = match.group(2)
    return floors


def venv(path: Path, requirements: list[str], constraints: Path | None = None) -> Path:
    """A fresh virtual environment at ``path`` with torch 2.13.0 and ``requirements``; returns its python."""
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
    subprocess.run([*pip, "--quiet", TORCH], check=True)
    subprocess.run([*pip, *(["-c", str(constraints)] if constraints else []), *requirements], check=True)
    return python


def installed(python: Path) -> dict[str, str]:
    freeze = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    return {line.split("==")[0].lower(): line.split("==")[1] for line in freeze.splitlines() if "==" in line}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pin", action="append", default=[], metavar="NAME==VERSION",
                        help="install this version instead of the declared floor (repeatable)")
    parser.add_argument("--work", type=Path, default=REPO / "build" / "floors", help="scratch folder (replaced)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "dependency-floors.json",
                        help="JSON report")
    args = parser.parse_args()
    pins = declared_floors()
    pins.update(dict(pin.lower().split("==") for pin in args.pin))
    pins.pop("torch")
    args.work.mkdir(parents=True, exist_ok=True)
    constraints = args.work / "floors.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
    started = time.time()
    report = {"pins": pins, "torch": f"{TORCH} (not tested at its declared floor: see the script's docstring)"}
    try:
        floor_python = venv(args.work / "env", [f"{REPO}[dev]"], constraints)
        hf_python = venv(args.work / "hf-env", [f"transformers=={pins['transformers']}"])
    except subprocess.CalledProcessError as exc:
        report.update(passed=False, error=f"installation failed: {exc}")
    else:
        report["installed"] = {name: installed(floor_python).get(name) for name in [*pins, "torch"]}
        report["without_polymask_env"] = {name: version for name, version in installed(hf_python).items()
                                          if name in ("torch", "transformers", "tokenizers", "safetensors")}
        shutil.rmtree(args.work / "smoke", ignore_errors=True)  # a fresh scratch folder: the smoke runs start anew
        smoke = subprocess.run([str(floor_python), str(REPO / "benchmarks" / "floors_smoke.py"), str(args.work / "smoke"),
                                "--hf-python", str(hf_python)], capture_output=True, text=True,
                               env={"PATH": f"{floor_python.parent}:/usr/bin:/bin", "OMP_NUM_THREADS": "2",
                                    "POLYMASK_CACHE": str(args.work / "cache"), "HOME": str(args.work / "home")})
        lines = smoke.stdout.strip().splitlines()
        report["checks"] = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {
            "smoke": {"ok": False, "error": smoke.stderr[-3000:]}}
        report["passed"] = smoke.returncode == 0
    report["wall_time_s"] = round(time.time() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({"passed": report["passed"], "pins": pins, "out": str(args.out)}))
    for name, check in report.get("checks", {}).items():
        print(f"{name}: {'ok' if check['ok'] else 'FAILED: ' + check['error'].splitlines()[0][:300]}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
