"""The command line answers at once and helps: light --help, defaults shown, closest names suggested,
progress inside a fine-tuning cell."""
import json
import subprocess
import sys

import pytest
import torch

from conftest import sub_parsers

from polymask.cli import DefaultsHelpFormatter, build_parser, main
from polymask.errors import ConfigError
from polymask.finetune_config import FinetuneConfig
from polymask.runtime import inner_progress
from polymask.tasks.data.spec import load_task_spec
from polymask.tasks.finetune.loop import fit

HEAVY = ("numpy", "torch", "datasets", "pandas", "rdkit", "transformers", "sklearn", "scipy", "deepchem")


VERBS = [" ".join(path) for path, _ in sub_parsers(build_parser())]


def test_help_imports_no_heavy_library():
    """`polymask --help` and every `polymask <verb> --help` run without loading numpy, torch, datasets, pandas or RDKit."""
    script = (
        "import json, sys\n"
        "from polymask.cli import main\n"
        f"for verb in {VERBS!r}:\n"
        "    try:\n"
        "        main([*verb.split(), '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(json.dumps(sorted(name for name in {HEAVY!r} if name in sys.modules)))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
    assert "polymask export" in result.stdout and "polymask finetune" in result.stdout


def test_every_option_says_its_default():
    formatter = DefaultsHelpFormatter("polymask")
    for path, parser in sub_parsers(build_parser()):
        for action in parser._actions:
            if not action.option_strings or action.required or action.nargs == 0:
                continue  # positionals, required options, flags (off unless given) and --help
            text = formatter._get_help_string(action) % {"default": action.default}
            assert "default" in text, (" ".join(path), action.option_strings, text)


def test_finetune_help_shows_the_config_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["finetune", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    recipe = "or the benchmark's recipe (tasks/<benchmark>/recipe.yaml)"
    assert f"learning rate (default: {FinetuneConfig().lr} {recipe})" in shown
    assert f"maximum epochs (default: {FinetuneConfig().epochs} {recipe})" in shown


def test_unknown_names_suggest_the_closest(capsys):
    assert main(["train", "--modality", "smils", "--objective", "mlm"]) == 2
    assert "did you mean 'smiles'?" in capsys.readouterr().err
    assert main(["finetune", "--task", "moleculenet/esol", "--checkpoint", "x", "--set", "epoch=3"]) == 2
    assert "epoch: Extra inputs are not permitted (got 3); did you mean 'epochs'?" in capsys.readouterr().err
    assert main(["benchmark", "moleculenett", "--checkpoint", "x"]) == 2
    assert "did you mean 'moleculenet'?" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="unknown task 'bbbp'; did you mean 'moleculenet/bbbp'?"):
        load_task_spec("bbbp")


@pytest.mark.parametrize("argv, usage, hint", [
    (["trian"], "usage: polymask [-h]", "polymask: error: argument command: invalid choice: 'trian'; "
                                        "did you mean 'train'?"),
    (["train", "--modalty", "smiles"], "usage: polymask train [-h]",
     "polymask train: error: unrecognized arguments: --modalty smiles; did you mean '--modality'?"),
    (["tokenizer", "trian"], "usage: polymask tokenizer [-h]", "did you mean 'train'?"),
])
def test_a_mistyped_verb_or_option_suggests_the_closest(capsys, argv, usage, hint):
    """Exit status 2, the usage of the verb the mistake was made in (not the top-level one), then one error line."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err.startswith(usage)
    assert hint in err.strip().splitlines()[-1]


def test_fine_tuning_shows_epochs_and_steps_inside_a_benchmark_cell(capsys):
    """Inside a benchmark (``inner_progress``) ``fit`` shows its epoch, steps and validation metric;
    outside it stays silent."""
    torch.manual_seed(0)
    inputs = torch.linspace(-1, 1, 64).unsqueeze(1)
    targets = 3 * inputs
    model = torch.nn.Linear(1, 1)
    batches = lambda epoch: [slice(start, start + 16) for start in range(0, 64, 16)]  # noqa: E731
    loss_of = lambda rows: torch.nn.functional.mse_loss(model(inputs[rows]), targets[rows])  # noqa: E731
    validate = lambda: {"rmse": float(loss_of(slice(0, 64)).detach().sqrt())}  # noqa: E731
    config = FinetuneConfig(epochs=2, lr=0.1)
    fit(model, config, batches, loss_of, validate, "rmse")
    assert "epoch" not in capsys.readouterr().err
    with inner_progress(True):
        fitted = fit(model, config, batches, loss_of, validate, "rmse")
    shown = capsys.readouterr().err
    assert "epoch 1/2" in shown and "epoch 2/2" in shown and "/8" in shown and "valid rmse" in shown
    assert fitted.epochs_run == 2
