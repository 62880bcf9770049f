"""Molecular features beside the encoder (``extra_features``): the sets, their standardisation, a fine-tuned model
whose head reads them, the row's name, and what refuses them."""
import json

import numpy as np
import pytest

import polymask
from polymask.benchmarking.systems import row_name
from polymask.checkpoints.finetuned_meta import SavedFeatures
from polymask.cli import main
from polymask.finetune_config import FinetuneConfig
from polymask.errors import CheckpointError
from polymask.tasks.finetune.features import CLIP, FEATURE_SETS, MoleculeFeatures, descriptor_columns
from tests.conftest import one_line_error

MOLECULES = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C[N+](C)(C)C", "OC(=O)CCCCCCCCCCCCCCCCC"]


def test_the_option_offers_exactly_the_registered_sets():
    offered = FinetuneConfig.model_fields["extra_features"].annotation.__args__[0].__args__
    assert set(offered) == set(FEATURE_SETS)
    with pytest.raises(ValueError, match="extra_features"):
        FinetuneConfig(extra_features=["maccs"])
    with pytest.raises(ValueError, match="named twice"):
        FinetuneConfig(extra_features=["morgan", "morgan"])


def test_descriptors_are_standardised_on_the_training_molecules_and_bits_kept_as_they_are():
    features = MoleculeFeatures.fit(["morgan", "rdkit2d"], MOLECULES)
    train = features.transform(MOLECULES)
    assert train.shape == (5, 2048 + len(descriptor_columns())) and train.dtype == np.float32
    assert np.isfinite(train).all() and features.transform([]).shape == (0, features.width)
    bits, descriptors = train[:, :2048], train[:, 2048:]
    assert set(np.unique(bits)) <= {0.0, 1.0} and bits.sum() > 20
    varying = features.std[2048:] != 1.0
    assert varying.sum() > 100
    assert np.allclose(descriptors[:, varying].mean(axis=0), 0, atol=1e-4)
    assert np.abs(features.transform(["C" * 60]))[0].max() <= CLIP  # far outside the training range: clipped
    saved = SavedFeatures.model_validate_json(features.saved().model_dump_json())
    assert np.array_equal(MoleculeFeatures.from_saved(saved).transform(MOLECULES[:2]), train[:2])
    saved.columns[2048 + 3] = "SomeOtherDescriptor"  # written by an RDKit with other descriptors
    with pytest.raises(CheckpointError, match="another RDKit release .first difference: SomeOtherDescriptor -> "):
        MoleculeFeatures.from_saved(saved)


def test_a_molecule_with_an_infinite_descriptor_leaves_its_column_s_statistics_alone():
    selenium = "c1ccc2[nH]c(CNc3ccc(C4C[Se]N=N4)cc3)nc2c1"  # from HIV: RDKit gives it an infinite Gasteiger charge
    columns = descriptor_columns()
    charge = columns.index("MaxAbsPartialCharge")
    assert not np.isfinite(FEATURE_SETS["rdkit2d"].compute([selenium])[0, charge])
    features = MoleculeFeatures.fit(["rdkit2d"], [*MOLECULES, selenium])
    assert np.isclose(features.mean[charge], MoleculeFeatures.fit(["rdkit2d"], MOLECULES).mean[charge])
    rows = features.transform([*MOLECULES, selenium])[:, charge]
    assert rows[-1] == 0 and np.isclose(rows[:-1].mean(), 0, atol=1e-4) and rows[:-1].std() > 0.5  # still varies


def test_a_row_is_named_by_the_sets_its_head_reads():
    assert row_name("enc (mlm)", FinetuneConfig()) == "enc (mlm)"
    assert row_name("no pretraining", FinetuneConfig(extra_features=["rdkit2d"])) == "no pretraining + rdkit2d"


@pytest.mark.integration
@pytest.mark.usefixtures("one_torch_thread")
def test_a_model_whose_head_reads_features_predicts_with_them_and_refuses_export(tiny_smiles_run, tmp_path, capsys):
    out = tmp_path / "esol"
    assert main(["finetune", "--task", "moleculenet/esol", "--checkpoint", str(tiny_smiles_run), "--epochs", "2",
                 "--lr", "3e-3", "--max-train-examples", "200", "--max-valid-examples", "50",
                 "--max-test-examples", "50", "--max-len", "64", "--set", "extra_features=[morgan,rdkit2d]", "--augment",
                 "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "results.json").read_text())
    assert [row["system"] for row in report["rows"]] == ["run (mlm) + morgan + rdkit2d"]
    model = polymask.load_model(out / report["cells"][0]["model_dir"])
    assert model.features.names == ["morgan", "rdkit2d"]
    assert model.network.head.in_features == 64 + 2048 + len(descriptor_columns())
    predicted = model.predict(MOLECULES + ["not a molecule"])
    assert np.isfinite(predicted["predicted_measured log solubility in mols per litre"][:5]).all()
    assert predicted["reason"].iloc[5] and predicted["reason"].iloc[:5].isna().all()
    nothing = model.predict(["not a molecule"])  # no molecule to compute features of: a row with its reason
    assert nothing["reason"].iloc[0] and nothing.iloc[0, 0] != nothing.iloc[0, 0]
    fitted = model.features
    model.features = MoleculeFeatures(fitted.names, fitted.columns, fitted.mean, fitted.std * 1e6)  # features all but zero
    assert not np.allclose(model.predict(MOLECULES).iloc[:, 0], predicted.iloc[:5, 0])  # they reach the prediction
    capsys.readouterr()
    code = main(["export", "--checkpoint", str(out / report["cells"][0]["model_dir"]), "--out", str(tmp_path / "hf")])
    one_line_error(capsys, code, "morgan+rdkit2d features", "polymask predict")


@pytest.mark.integration
def test_molecular_features_on_a_dna_task_are_one_line(tmp_path, capsys):
    code = main(["finetune", "--task", "dna/ecoli_promoters", "--checkpoint", "dna-gue-3mer-mlm-196k", "--epochs", "1",
                 "--set", "extra_features=[morgan]", "--out", str(tmp_path / "dna"), "--quiet"])
    one_line_error(capsys, code, "extra_features ['morgan'] are molecular", "dna")


@pytest.mark.integration
@pytest.mark.parametrize("setting, named", [("extra_features=[morgan]", "extra_features ['morgan']"),
                                            ("head=mlp", "head mlp")])
def test_a_pooled_vector_s_setting_on_a_span_task_is_one_line(tiny_text_checkpoint, tmp_path, capsys, setting, named):
    code = main(["finetune", "--task", "squad/v1", "--checkpoint", str(tiny_text_checkpoint), "--epochs", "1",
                 "--max-train-examples", "8", "--max-valid-examples", "8", "--max-test-examples", "8",
                 "--set", setting, "--out", str(tmp_path / "squad"), "--quiet"])
    one_line_error(capsys, code, named, "a pooled sequence vector", "squad/v1")
