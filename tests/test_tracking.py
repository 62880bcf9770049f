"""Experiment tracking: TensorBoard and (offline) W&B get exactly the numbers of metrics.jsonl, at the same
steps, and the run's config; fine-tuning cells report each epoch; a missing package is one line naming the extra."""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from polymask.cli import main
from polymask.errors import ConfigError
from polymask.jsonio import read_jsonl
from polymask.training.run_folder import claim_run_folder, held_run
from polymask.training.trainer import train
from tests.conftest import tiny_config

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

for extra in ("tensorboard", "wandb"):
    pytest.importorskip(extra, reason=f"the {extra} extra is not installed (pip install 'polymask[{extra}]')")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader  # noqa: E402
from tensorboard.compat.proto.event_pb2 import SessionLog  # noqa: E402
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData  # noqa: E402
from wandb.proto import wandb_internal_pb2  # noqa: E402


@pytest.fixture(scope="module")
def offline_wandb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """W&B offline and silent, its own folders (cache, config, data) under a temporary folder."""
    import wandb

    home = tmp_path_factory.mktemp("wandb-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        for variable in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
            (home / variable.lower()).mkdir()
            patch.setenv(variable, str(home / variable.lower()))
        yield
        wandb.teardown()  # stop W&B's service process, which holds the environment it started with


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory: pytest.TempPathFactory, offline_wandb: None) -> Path:
    """Four steps of a tiny SMILES run, validated at steps 2 and 4, reported to both trackers."""
    run = tmp_path_factory.mktemp("tracked") / "smiles-mlm"
    train(tiny_config("smiles", run, max_steps=4, eval_every=2, report_to=["tensorboard", "wandb"]))
    return run


def metrics_by_tag(run: Path) -> dict[str, dict[int, float]]:
    """metrics.jsonl as {key: {step: value}}, numbers only (what a tracker is sent)."""
    found: dict[str, dict[int, float]] = {}
    for record in read_jsonl(run / "metrics.jsonl"):
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                found.setdefault(key, {})[record["step"]] = value
    return found


def tensorboard_scalars(folder: Path) -> tuple[dict[str, dict[int, float]], EventAccumulator]:
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    scalars = {tag: {event.step: event.value for event in events.Scalars(tag)} for tag in events.Tags()["scalars"]}
    return scalars, events


def wandb_records(folder: Path) -> list[Any]:
    """The records of the one offline W&B run under ``folder/wandb`` (its .wandb file: a LevelDB-style log of
    32 KiB blocks after a 7-byte header, each record a 7-byte header (crc, length, type) and a protobuf)."""
    (path,) = (folder / "wandb").glob("offline-run-*/run-*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, offset, pending = [], 7, b""
    while offset + 7 <= len(data):
        if 32768 - offset % 32768 < 7:  # a block's tail too short for a header is padding
            offset += 32768 - offset % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[offset:offset + 7])
        pending += data[offset + 7:offset + 7 + length]
        offset += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            records.append(wandb_internal_pb2.Record.FromString(pending))
            pending = b""
        elif kind == 0:
            break
    return records


def wandb_history(records: list[Any]) -> dict[str, dict[int, float]]:
    """The logged numbers as {key: {step: value}}, without W&B's own (_step, _runtime, _timestamp)."""
    history: dict[str, dict[int, float]] = {}
    for record in records:
        if record.WhichOneof("record_type") == "history":
            for item in record.history.item:
                key = item.key or ".".join(item.nested_key)
                if not key.startswith("_"):
                    history.setdefault(key, {})[record.history.step.num] = json.loads(item.value_json)
    return history


def assert_same(logged: dict[str, dict[int, float]], expected: dict[str, dict[int, float]]) -> None:
    assert logged.keys() == expected.keys()
    for key, values in expected.items():
        assert logged[key].keys() == values.keys(), key
        for step, value in values.items():
            assert logged[key][step] == pytest.approx(value, rel=1e-6, abs=1e-9), (key, step)


def test_tensorboard_gets_every_number_of_metrics_jsonl_and_the_config(tracked_run: Path) -> None:
    expected = metrics_by_tag(tracked_run)
    assert {"loss", "lr", "tokens_per_s", "val_loss", "val_accuracy"} <= expected.keys()
    assert sorted(expected["val_loss"]) == [2, 4] and sorted(expected["loss"]) == [1, 2, 3, 4]
    scalars, events = tensorboard_scalars(tracked_run / "tensorboard")
    assert_same(scalars, expected)
    start = HParamsPluginData.FromString(events.PluginTagToContent("hparams")["_hparams_/session_start_info"])
    hparams = start.session_start_info.hparams
    assert hparams["train.lr"].number_value == pytest.approx(3e-3)
    assert hparams["modality.name"].string_value == "smiles"


def test_offline_wandb_run_gets_every_number_of_metrics_jsonl_and_the_config(tracked_run: Path) -> None:
    records = wandb_records(tracked_run)
    assert_same(wandb_history(records), metrics_by_tag(tracked_run))
    (run,) = [record.run for record in records if record.WhichOneof("record_type") == "run"]
    assert run.display_name == tracked_run.name
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert config["train"]["lr"] == pytest.approx(3e-3) and config["train"]["report_to"] == ["tensorboard", "wandb"]


def test_a_resumed_run_replaces_what_was_logged_after_its_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "resumed"
    config = tiny_config("smiles", run, max_steps=4, save_every=2, report_to=["tensorboard"])
    train(config)
    train(resume=run / "checkpoints" / "step-000002")  # steps 3 and 4 again: new timings in metrics.jsonl
    scalars, _ = tensorboard_scalars(run / "tensorboard")
    assert_same(scalars, metrics_by_tag(run))
    restarts = [event.step for path in sorted((run / "tensorboard").glob("events.out.tfevents.*"))
                for event in EventFileLoader(str(path)).Load() if event.session_log.status == SessionLog.START]
    assert restarts == [1, 3]  # the second tells TensorBoard to hide the first invocation's steps 3 and 4


def test_overwrite_removes_the_trackers_logs_too(tmp_path: Path) -> None:
    for name in ("tensorboard", "wandb"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "old").write_text("an earlier run's")
    assert held_run(tmp_path) == ["tensorboard", "wandb"]
    claim_run_folder(tmp_path, "overwrite")
    assert list(tmp_path.iterdir()) == []


def test_finetuning_cells_report_each_epoch(tracked_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    assert main(["finetune", "--task", "moleculenet/freesolv", "--checkpoint", str(tracked_run), "--epochs", "2",
                 "--max-train-examples", "64", "--max-valid-examples", "32", "--max-test-examples", "32",
                 "--no-save-models", "--quiet", "--out", str(out), "--set", "report_to=[tensorboard,wandb]"]) == 0
    (cell_file,) = (out / "cells").glob("*/*/seed-0.json")
    cell = json.loads(cell_file.read_text())
    assert cell["epochs_run"] == 2
    events = out / "tensorboard" / cell_file.relative_to(out / "cells").with_suffix("")
    scalars, _ = tensorboard_scalars(events)
    assert scalars.keys() == {"train_loss", *(f"valid_{name}" for name in cell["valid"])}
    assert all(sorted(values) == [1, 2] for values in scalars.values())
    best = {f"valid_{name}": value for name, value in cell["valid"].items()}
    assert {key: scalars[key][cell["best_epoch"]] for key in best} == pytest.approx(best, rel=1e-6)
    records = wandb_records(out)
    (run,) = [record.run for record in records if record.WhichOneof("record_type") == "run"]
    assert run.display_name == f"{cell['system']}/moleculenet/freesolv/seed-0"
    assert_same(wandb_history(records), scalars)


@pytest.mark.parametrize("backend", ["tensorboard", "wandb"])
def test_a_missing_package_is_one_line_naming_the_extra(backend: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, backend, None)  # `import <backend>` now fails as if it were not installed
    message = f"train.report_to: {backend} is not installed; install it with: pip install 'polymask[{backend}]'"
    with pytest.raises(ConfigError) as error:
        train(tiny_config("smiles", tmp_path / "api", report_to=[backend]))
    assert str(error.value) == message
    assert main(["train", "--modality", "smiles", "--objective", "mlm", "--out", str(tmp_path / "cli"),
                 "--set", f"train.report_to=[{backend}]"]) == 2
    assert capsys.readouterr().err == f"polymask: error: {message}\n"
    assert not (tmp_path / "api").exists() and not (tmp_path / "cli").exists()  # nothing started


def test_an_unknown_tracker_fails_at_load_time_naming_the_field() -> None:
    from polymask.config import build_run_config

    with pytest.raises(ConfigError, match=r"train\.report_to\.0: Input should be 'tensorboard' or 'wandb'"):
        build_run_config(tiny_config("smiles", Path("unused"), report_to=["mlflow"]))
