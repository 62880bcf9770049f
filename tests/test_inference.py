"""Using what was trained, end to end on the tiny encoder: fine-tuning saves the model it chose on the
validation split; `polymask predict` keeps every input row, in order, with rejected records marked;
`polymask embed` gives a vector per record from MLM, MAE-LM and ExLM checkpoints; `polymask.load_model`."""
import csv
import gzip
import json
import shutil
import unicodedata
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import polymask
from polymask.cli import main
from polymask.errors import CheckpointError
from polymask.modalities.smiles import Smiles
from polymask.tasks.data.loading import load_task, subset
from polymask.tasks.data.spec import load_task_spec
from polymask.training.trainer import train
from tests.conftest import tiny_config  # imported here, not in a fixture: importing it sets torch's threads


pytestmark = [pytest.mark.integration,  # trains, fine-tunes or runs the command line end to end
              pytest.mark.usefixtures("one_torch_thread")]
REPO = Path(__file__).parent.parent
MAX_LEN = 64
#: Records each modality rejects, with the words of the reason predict gives.
BAD_SMILES = [("not_a_smiles", "outside the SMILES grammar"), ("", "empty SMILES"), ("C1CC", "RDKit")]
#: A molecule longer than the model (102 tokens, max_len 64): predicted from its first 64 tokens, counted.
LONG_SMILES = "C" * 100


def real_molecules(count: int) -> list[str]:
    with gzip.open(REPO / "tasks/moleculenet/data/delaney-processed.csv.gz", "rt") as handle:
        return [row["smiles"].strip() for row, _ in zip(csv.DictReader(handle), range(count))]


def read_output(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """Tiny SMILES checkpoints per objective (the MAE-LM and ExLM ones only for embedding shapes)."""
    runs = {}

    def run(objective: str, modality: str = "smiles") -> Path:
        if (modality, objective) not in runs:
            path = tmp_path_factory.mktemp("pretrained") / f"tiny-{modality}-{objective}"
            config = tiny_config(modality, path, max_steps=20 if objective == "mlm" else 2, threads=1)
            config["objective"] = {"name": objective}
            train(config)
            runs[(modality, objective)] = path
        return runs[(modality, objective)]

    return run


def finetune_cli(checkpoint: Path, task: str, out: Path, *options: str) -> Path:
    """`polymask finetune` for one epoch on a few examples; returns the saved model folder."""
    assert main(["finetune", "--task", task, "--checkpoint", str(checkpoint), "--epochs", "1",
                 "--max-train-examples", "96", "--max-valid-examples", "48", "--max-test-examples", "48",
                 "--max-len", str(MAX_LEN), "--set", "precision=fp32", "--out", str(out), "--quiet", *options]) == 0
    cell = json.loads((out / "results.json").read_text())["cells"][0]
    return out / cell["model_dir"]


@pytest.fixture(scope="module")
def smiles_model(pretrained, tmp_path_factory):
    models = {}

    def model(task: str) -> Path:
        if task not in models:
            models[task] = finetune_cli(pretrained("mlm"), task, tmp_path_factory.mktemp("finetune"))
        return models[task]

    return model


@pytest.fixture(scope="module")
def smiles_file(tmp_path_factory) -> Path:
    """Real molecules with rejected records and an over-long one among them; ids with leading zeros."""
    smiles = real_molecules(4)
    records = [smiles[0], BAD_SMILES[0][0], smiles[1], BAD_SMILES[1][0], LONG_SMILES, smiles[2],
               BAD_SMILES[2][0], smiles[3]]
    path = tmp_path_factory.mktemp("inputs") / "molecules.csv"
    pd.DataFrame({"id": [f"{i:03d}" for i in range(len(records))], "smiles": records,
                  "note": [f"row {i}" for i in range(len(records))]}).to_csv(path, index=False)
    return path


TOX21 = ["NR-AR", "NR-AR-LBD", "NR-AhR", "NR-Aromatase", "NR-ER", "NR-ER-LBD", "NR-PPAR-gamma", "SR-ARE",
         "SR-ATAD5", "SR-HSE", "SR-MMP", "SR-p53"]


@pytest.mark.parametrize("task, columns", [
    ("moleculenet/esol", ["predicted_measured log solubility in mols per litre"]),
    ("moleculenet/bbbp", ["prob_0", "prob_1", "predicted_p_np"]),
    ("moleculenet/tox21", [f"prob_{name}" for name in TOX21]),
])
def test_smiles_predict_keeps_every_row_in_order_and_marks_the_rejected(task, columns, smiles_model, smiles_file,
                                                                       tmp_path, capsys):
    out = tmp_path / "predictions.csv"
    assert main(["predict", "--model", str(smiles_model(task)), "--data", str(smiles_file), "--out", str(out),
                 "--quiet"]) == 0
    given, predicted = read_output(smiles_file), read_output(out)
    assert list(predicted.columns) == ["id", "smiles", "note", *columns, "reason"]
    assert predicted[["id", "smiles", "note"]].equals(given)  # every row, in order, ids such as 003 unchanged
    rejected = predicted["reason"] != ""
    assert rejected.tolist() == [False, True, False, True, False, False, True, False]
    for (_, words), reason in zip(BAD_SMILES, predicted.loc[rejected, "reason"]):
        assert words in reason
    assert (predicted.loc[rejected, columns] == "").all().all()  # rejected rows: empty prediction cells
    probabilities = predicted.loc[~rejected, [c for c in columns if c.startswith("prob_")]].astype(float)
    assert ((probabilities >= 0) & (probabilities <= 1)).all().all()
    if task.endswith("bbbp"):
        assert np.allclose(probabilities.sum(axis=1), 1)
        assert set(predicted.loc[~rejected, "predicted_p_np"]) <= {"0", "1"}
    if task.endswith("esol"):
        assert np.isfinite(predicted.loc[~rejected, columns[0]].astype(float)).all()
    summary = capsys.readouterr().out
    assert "8 rows: 5 predicted, 3 rejected (see the reason column), 1 truncated to 64 tokens" in summary


def test_the_saved_model_is_the_one_chosen_on_validation_and_predicts_in_original_units(smiles_model):
    folder = smiles_model("moleculenet/esol")
    model = polymask.load_model(folder)
    meta = json.loads((folder / "finetuned.json").read_text())
    assert meta["task"]["problem_type"] == "regression" and meta["pretrained"]["objective"] == "mlm"
    assert Path(meta["pretrained"]["checkpoint"]).name == "step-000020"
    spec = load_task_spec("moleculenet/esol")
    valid = subset(load_task(spec, Smiles()).valid, 48, spec.split.seed)
    predictions = model.predict([inputs[0] for inputs in valid.inputs])
    values = predictions["predicted_measured log solubility in mols per litre"].to_numpy()
    rmse = np.sqrt(np.mean((values - valid.labels[:, 0]) ** 2))
    assert rmse == pytest.approx(meta["valid"]["rmse"], rel=1e-5)  # the validation score it was chosen with
    assert predictions["reason"].isna().all()


def test_load_model_predicts_and_embeds_from_python(smiles_model):
    model = polymask.load_model(smiles_model("moleculenet/bbbp"))
    frame = pd.DataFrame({"smiles": ["CCO", "C1CC", "c1ccccc1"]}, index=["a", "b", "c"])
    predictions = model.predict(frame)
    assert list(predictions.index) == ["a", "b", "c"]  # joins back onto the caller's frame
    assert pd.isna(predictions.loc["b", "predicted_p_np"]) and "RDKit" in predictions.loc["b", "reason"]
    vectors, reasons = model.embed(["CCO", "C1CC", "c1ccccc1"], with_reasons=True)
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    assert np.isnan(vectors[1]).all() and np.isfinite(vectors[[0, 2]]).all() and reasons[0] is None
    assert not np.allclose(model.embed(["CCO"], pool="cls"), model.embed(["CCO"], pool="mean"))

    # a DataFrame's column is found as predict finds a file's: in any case, or under the modality's usual names
    for name in ("SMILES", "Smiles"):
        assert predictions.equals(model.predict(frame.rename(columns={"smiles": name})))
    # a column named exactly as the model's wins over one differing in case only (either order)
    for both in (frame.assign(SMILES="not_a_smiles"), frame.assign(SMILES="not_a_smiles")[["SMILES", "smiles"]]):
        assert predictions.equals(model.predict(both))
    with pytest.raises(polymask.PolymaskError, match="none of the columns .'molecule'. .*DataFrame.rename"):
        model.predict(frame.rename(columns={"smiles": "molecule"}))


@pytest.mark.parametrize("task, columns", [("moleculenet/bbbp", ["prob_1"]),
                                           ("moleculenet/tox21", [f"prob_{name}" for name in TOX21])])
def test_an_exported_classifier_gives_the_probabilities_predict_gives(task, columns, smiles_model, tmp_path,
                                                                     capsys):
    """Binary and multi-task models export as one sigmoid output per task (multi_label_classification)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out = tmp_path / "hf"
    assert main(["export", "--checkpoint", str(smiles_model(task)), "--out", str(out)]) == 0
    capsys.readouterr()
    model = polymask.load_model(smiles_model(task))
    records = [model.modality.normalize(text) for text in real_molecules(6)]
    expected = model.predict(records)[columns].to_numpy(dtype=float)
    exported = AutoModelForSequenceClassification.from_pretrained(str(out), trust_remote_code=True).eval()
    assert exported.config.problem_type == "multi_label_classification"
    batch = AutoTokenizer.from_pretrained(str(out))(records, padding=True, return_tensors="pt")
    with torch.no_grad():
        got = torch.sigmoid(exported(**batch).logits).numpy()
    assert got.shape == expected.shape and np.abs(got - expected).max() < 1e-5
    assert np.ptp(expected, axis=0).max() > 1e-4  # the molecules get different probabilities


def test_a_damaged_model_folder_is_refused_with_a_clear_error(smiles_model, pretrained, tmp_path, capsys):
    folder = tmp_path / "model"
    shutil.copytree(smiles_model("moleculenet/esol"), folder)
    with pytest.raises(CheckpointError, match="not a pretraining checkpoint"):
        polymask.load_checkpoint(folder)
    with pytest.raises(CheckpointError, match="not a fine-tuned model folder"):
        polymask.load_model(pretrained("mlm"))
    (folder / "model.safetensors").write_bytes(b"not weights")
    assert main(["predict", "--model", str(folder), "--data", "x.csv", "--out", str(tmp_path / "p.csv")]) == 2
    assert "model.safetensors is corrupt" in capsys.readouterr().err


@pytest.mark.parametrize("objective", ["mlm", "maelm", "exlm"])
def test_embed_gives_a_vector_per_record_for_every_objective(objective, pretrained, tmp_path):
    run = pretrained(objective)
    molecules = tmp_path / "molecules.smi"
    smiles = real_molecules(3)
    molecules.write_text(f"{smiles[0]} first\n{smiles[1]} second\nC1CC broken\n# a comment\n{smiles[2]} third\n")
    assert main(["embed", "--checkpoint", str(run), "--data", str(molecules), "--out", str(tmp_path / "X.npy"),
                 "--quiet"]) == 0
    vectors = np.load(tmp_path / "X.npy")
    rows = read_output(tmp_path / "X.rows.csv")
    assert vectors.shape == (3, 64)
    assert rows["vector"].tolist() == ["0", "1", "", "2"] and rows["name"].tolist()[2] == "broken"
    assert rows["line"].tolist() == ["1", "2", "3", "5"] and "RDKit" in rows["reason"][2]
    assert np.allclose(vectors, polymask.load_checkpoint(run).embed(smiles), atol=1e-5)

    assert main(["embed", "--checkpoint", str(run), "--data", str(molecules), "--out", str(tmp_path / "X.parquet"),
                 "--pool", "cls", "--quiet"]) == 0
    table = pd.read_parquet(tmp_path / "X.parquet")
    embeddings = np.stack(table["embedding"].to_numpy())
    assert embeddings.shape == (4, 64) and table["smiles"].tolist()[2] == "C1CC"
    assert np.isnan(embeddings[2]).all() and np.isfinite(embeddings[[0, 1, 3]]).all()
    assert np.allclose(embeddings[[0, 1, 3]], polymask.load_checkpoint(run).embed(smiles, pool="cls"), atol=1e-5)


def test_text_pair_model_predicts_a_tsv_row_by_row(tiny_text_checkpoint, tmp_path, capsys):
    folder = finetune_cli(tiny_text_checkpoint, "glue/wnli", tmp_path / "wnli", "--data-dir",
                          str(REPO / "tests/data/glue"))
    dev = pd.read_csv(REPO / "tests/data/glue/WNLI/dev.tsv", sep="\t", dtype=str, keep_default_na=False)
    dev.loc[5, "sentence2"] = ""
    dev.loc[0, "sentence1"] = '" ' + dev.loc[0, "sentence1"]  # GLUE's TSV: quote characters are plain text
    data = tmp_path / "pairs.tsv"
    data.write_text("".join("\t".join(row) + "\n" for row in [dev.columns, *dev.values]))
    assert main(["predict", "--model", str(folder), "--data", str(data), "--out", str(tmp_path / "p.csv"),
                 "--quiet"]) == 0
    predicted = read_output(tmp_path / "p.csv")
    assert predicted[list(dev.columns)].equals(dev)  # every row, read as fine-tuning read the task's files
    assert list(predicted.columns[len(dev.columns):]) == ["prob_0", "prob_1", "predicted_label", "reason"]
    assert predicted["reason"][5] == "empty text" and predicted["prob_0"][5] == ""
    assert (predicted["reason"].drop(5) == "").all()
    assert "40 rows: 39 predicted, 1 rejected (see the reason column), 6 truncated to 64 tokens" in capsys.readouterr().out
    pairs = dev.rename(columns={"sentence1": "Sentence1", "sentence2": "SENTENCE2"})
    from_python = polymask.load_model(folder).predict(pairs)
    assert np.allclose(from_python["prob_1"].drop(5).astype(float), predicted["prob_1"].drop(5).astype(float),
                       atol=1e-5)

    # exported, the model card's pair call (truncation=True: longest-first) gives predict's probabilities
    assert main(["export", "--checkpoint", str(folder), "--out", str(tmp_path / "hf")]) == 0
    assert "tokenizer(first, second, padding=True, truncation=True, max_length=64" in \
        (tmp_path / "hf" / "README.md").read_text()
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hf")
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf", trust_remote_code=True).eval()
    kept = dev.drop(5)
    with torch.no_grad():
        logits = model(**tokenizer(kept["sentence1"].tolist(), kept["sentence2"].tolist(), padding=True,
                                   truncation=True, max_length=64, return_tensors="pt")).logits
    assert np.allclose(torch.sigmoid(logits[:, 0]).numpy(), predicted["prob_1"].drop(5).astype(float), atol=1e-4)


def test_span_model_answers_questions_from_their_context(tiny_text_checkpoint, tmp_path):
    folder = finetune_cli(tiny_text_checkpoint, "squad/v2-cs224n", tmp_path / "squad", "--max-len", "128",
                          "--set", "span.doc_stride=48")
    with gzip.open(REPO / "tasks/squad/data/cs224n_dev-v2.0.json.gz", "rt") as handle:
        paragraph = json.load(handle)["data"][0]["paragraphs"][0]
    questions = [qa["question"] for qa in paragraph["qas"][:3]] + [""]
    data = tmp_path / "questions.csv"
    pd.DataFrame({"qid": ["q1", "q2", "q3", "q4"], "question": questions,
                  "context": paragraph["context"]}).to_csv(data, index=False)
    assert main(["predict", "--model", str(folder), "--data", str(data), "--out", str(tmp_path / "a.csv"),
                 "--quiet"]) == 0
    answers = read_output(tmp_path / "a.csv")
    assert answers["qid"].tolist() == ["q1", "q2", "q3", "q4"]
    assert list(answers.columns[3:]) == ["predicted_answer", "no_answer_score", "reason"]
    assert all(answer in paragraph["context"] for answer in answers["predicted_answer"][:3])
    assert answers["reason"].tolist() == ["", "", "", "empty text"]


def test_span_answers_are_read_from_the_context_as_given(tiny_text_checkpoint, tmp_path):
    """A decomposed (NFD) context gets an answer in its own characters, not in their NFC form."""
    folder = finetune_cli(tiny_text_checkpoint, "squad/v1", tmp_path / "squad", "--max-len", "128",
                          "--set", "span.doc_stride=48")
    context = unicodedata.normalize("NFD", "Éloïse à Noël: café, crème brûlée, pâté, naïveté, déjà vu. " * 4)
    answers = polymask.load_model(folder).predict(pd.DataFrame({"question": ["Où?"], "context": [f"  {context}"]}))
    assert answers["predicted_answer"][0] and answers["predicted_answer"][0] in context


def test_dna_model_predicts_a_fasta_file_keeping_its_ids(pretrained, tmp_path, capsys):
    folder = finetune_cli(pretrained("mlm", "dna"), "dna/ecoli_promoters", tmp_path / "promoters")
    with gzip.open(REPO / "tasks/dna/data/promoters.csv.gz", "rt") as handle:
        sequences = [row["sequence"] for row, _ in zip(csv.DictReader(handle), range(2))]
    fasta = tmp_path / "reads.fa"
    fasta.write_text(f">p1 first promoter\n{sequences[0][:30]}\n{sequences[0][30:]}\n>bad\nACGTXZ\n"
                     f">p2\n{sequences[1].lower()}\n>long a genome piece\n{'ACGT' * 125}\n")
    assert main(["predict", "--model", str(folder), "--data", str(fasta), "--out", str(tmp_path / "p.csv"),
                 "--quiet"]) == 0
    predicted = read_output(tmp_path / "p.csv")
    assert predicted["id"].tolist() == ["p1", "bad", "p2", "long"]
    assert predicted["line"].tolist() == ["1", "4", "6", "8"] and predicted["description"][0] == "first promoter"
    assert list(predicted.columns[4:]) == ["prob_-", "prob_+", "predicted_label", "reason"]
    assert "not an IUPAC nucleotide code" in predicted["reason"][1] and predicted["prob_+"][1] == ""
    assert set(predicted["predicted_label"].drop(1)) <= {"-", "+"}
    assert "4 rows: 3 predicted, 1 rejected (see the reason column), 1 truncated" in capsys.readouterr().out


def test_a_model_of_a_header_less_task_reads_such_a_file_from_its_first_line(tiny_text_checkpoint, tmp_path, capsys):
    """CoLA's files have no header row: predict reads the model's own dev file as fine-tuning read it (the first
    record kept, its columns named as the task names them), and a file with a header as before."""
    rows = "gj04\t1\t\tThe cat sat on the mat.\ngj04\t0\t*\tCat the mat on sat.\n"  # CoLA's layout
    (tmp_path / "glue" / "CoLA").mkdir(parents=True)
    for split, repeat in (("train", 10), ("dev", 1)):
        (tmp_path / "glue" / "CoLA" / f"{split}.tsv").write_text(rows * repeat)
    folder = finetune_cli(tiny_text_checkpoint, "glue/cola", tmp_path / "cola", "--data-dir", str(tmp_path / "glue"))
    capsys.readouterr()
    out = tmp_path / "p.csv"
    assert main(["predict", "--model", str(folder), "--data", str(tmp_path / "glue/CoLA/dev.tsv"), "--out", str(out),
                 "--quiet"]) == 0
    predicted = read_output(out)
    assert predicted["sentence"].tolist() == ["The cat sat on the mat.", "Cat the mat on sat."]
    assert list(predicted.columns[:4]) == ["source", "label", "original_label", "sentence"]
    said = capsys.readouterr().out
    assert "2 rows: 2 predicted" in said
    assert "no header row: columns named as the model's task files (source, label, original_label, sentence)" in said
    with_header = tmp_path / "mine.tsv"
    with_header.write_text("id\tsentence\na\tThe cat sat on the mat.\n")
    assert main(["predict", "--model", str(folder), "--data", str(with_header), "--out", str(out), "--quiet"]) == 0
    assert read_output(out)["id"].tolist() == ["a"] and "no header row" not in capsys.readouterr().out


def test_unreadable_lines_of_a_jsonl_file_keep_their_rows(tmp_path):
    from polymask.inference.table import read_input_table

    path = tmp_path / "records.jsonl"
    path.write_text('{"id": "a1", "smiles": "CCO"}\nnot json\n\n[1, 2]\n{"id": "a5"}\n')
    table = read_input_table(path, None, ["smiles"])
    assert table.frame["id"].tolist()[::3] == ["a1", "a5"] and len(table.frame) == 4
    assert table.inputs == [("CCO",), None, None, None]
    assert table.reasons == [None, "line 2: not valid JSON (Expecting value)", "line 4: JSON line is not an object",
                             "no value for smiles"]


def test_json_lines_ids_come_back_as_written_and_a_mixed_column_is_one_line_for_parquet(smiles_model, tmp_path,
                                                                                         capsys):
    smiles = real_molecules(3)
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(row) + "\n" for row in
                               [{"id": 1, "smiles": smiles[0]}, {"smiles": smiles[1]}, {"id": 3, "smiles": smiles[2]}]))
    model = str(smiles_model("moleculenet/esol"))
    for out in (tmp_path / "p.csv", tmp_path / "p.parquet"):
        assert main(["predict", "--model", model, "--data", str(records), "--out", str(out), "--quiet"]) == 0
    assert read_output(tmp_path / "p.csv")["id"].tolist() == ["1", "", "3"]  # not 1.0 and 3.0
    ids = pq.read_table(tmp_path / "p.parquet").column("id")
    assert str(ids.type) == "int64" and ids.to_pylist() == [1, None, 3]  # not double (1.0 == 1 would pass)

    records.write_text("".join(json.dumps({"id": name, "smiles": smiles[0]}) + "\n" for name in (7, "seven")))
    capsys.readouterr()
    assert main(["predict", "--model", model, "--data", str(records), "--out", str(tmp_path / "q.parquet"),
                 "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "column id" in error and "write .csv" in error and "Traceback" not in error
    assert not (tmp_path / "q.parquet").exists()
    # an id beyond int64 (a 64-bit hash) and a column of empty objects: one line each, no file
    for row, words in (({"id": 2 ** 63}, "an integer beyond Parquet's int64 in column id"),
                       ({"meta": {}}, "struct type 'meta' with no child field")):
        records.write_text(json.dumps({**row, "smiles": smiles[0]}) + "\n")
        assert main(["predict", "--model", model, "--data", str(records), "--out", str(tmp_path / "q.parquet"),
                     "--quiet"]) == 2
        assert words in capsys.readouterr().err and not (tmp_path / "q.parquet").exists()


def test_an_interrupted_write_leaves_neither_the_file_nor_its_temporary(tmp_path):
    from polymask.inference.cli import _write_atomically

    def interrupted(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _write_atomically(tmp_path / "p.csv", interrupted)
    assert list(tmp_path.iterdir()) == []
