"""Test-time averaging over a label's invariances: DNA's strands and frames, SMILES atom orders, the mean over
them, the benchmark's extra row and a saved model that predicts the way it was scored."""
import dataclasses
import json
import random

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, trainers

import polymask
from polymask.benchmarking.report import write_report
from polymask.benchmarking.runner import AVERAGED, aggregate, with_averaged_rows
from polymask.checkpoints.finetuned import SaveTarget
from polymask.checkpoints.pretrained import read_checkpoint
from polymask.errors import ConfigError
from polymask.data.variants import encode_variants, expand_variants
from polymask.finetune_config import FinetuneConfig
from polymask.modalities.dna import COMPLEMENT, Dna, DnaConfig
from polymask.modalities.smiles import TEST_TIME_ORDERS, Smiles, SmilesConfig
from polymask.tasks.data.loading import TaskData, load_task, subset
from polymask.tasks.data.spec import load_task_spec
from polymask.tasks.finetune.tables import finetune
from polymask.training.trainer import train
from polymask.cli import main
from tests.conftest import tiny_config

SEQUENCE = "ACGTTGCAAGGCTTAN"
REVERSE = "NTAAGCCTTGCAACGT"


def test_dna_variants_are_the_strands_and_frames_the_label_allows():
    k3 = Dna(DnaConfig(k=3))
    assert k3.variants(SEQUENCE) == [SEQUENCE]  # a promoter's label has a strand and a position
    assert k3.variants(SEQUENCE, ["reverse_complement"]) == [SEQUENCE, REVERSE]
    assert k3.variants(SEQUENCE, ["shift"]) == [SEQUENCE, SEQUENCE[1:], SEQUENCE[2:]]
    both = k3.variants(SEQUENCE, ["reverse_complement", "shift"])
    assert both == [SEQUENCE, SEQUENCE[1:], SEQUENCE[2:], REVERSE, REVERSE[1:], REVERSE[2:]]
    assert Dna(DnaConfig(k=3, overlapping=True)).variants(SEQUENCE, ["shift"]) == [SEQUENCE]  # no frame to shift
    assert Dna(DnaConfig(k=6)).variants("ACG", ["shift"]) == ["ACG", "CG", "G"]  # never an empty record


def test_a_long_record_is_cut_to_the_window_a_model_reads_before_its_strands_are_made():
    """A record longer than max_len is read from its start on both strands (not the other strand's start, the
    record's end), and a chromosome is cut before it is tokenised; the cut is counted. A run with a tokenizer file
    of its own (tokens of any length) is cut where its tokens end, not by k-mer arithmetic."""
    from polymask.data.model_inputs import encode_records, tokenize_normalised
    from polymask.tasks.data.loading import TaskSplit
    from polymask.tasks.finetune.tables import first_windows

    k3, overlapping = Dna(DnaConfig(k=3)), Dna(DnaConfig(k=3, overlapping=True))
    head, tail = "ACGTTG" * 100, "GGGCCC" * 1000
    tokenizer = k3.build_tokenizer()
    assert k3.first_window(head + tail, 100, tokenizer) == head[:294]  # 98 3-mers
    assert k3.first_window(SEQUENCE, 100, tokenizer) == SEQUENCE
    assert overlapping.first_window(head + tail, 100, overlapping.build_tokenizer()) == head[:100]  # overlapping
    assert Dna(DnaConfig(k=3, tokenizer="dna-3mer")).first_window(head + tail, 100, tokenizer) == head[:294]
    encoded = encode_records([(head + tail * 1000,), (SEQUENCE,)], [None, None], k3, tokenizer, 100)
    assert [len(parts[0]) for parts in encoded.records] == [294, len(SEQUENCE)] and encoded.truncated == 1
    whole = tokenizer.encode(k3.tokenizer_input(head + tail)).ids
    assert encoded.ids[0] == whole[:99] + whole[-1:]  # the tokens a cut after tokenising keeps: [CLS] 98 [SEP]
    variants = expand_variants(encoded.records, k3, ["reverse_complement"])
    reverse = variants.inputs[1][0].translate(str.maketrans("ACGT", "TGCA"))[::-1]
    assert reverse == variants.inputs[0][0] == head[:294]  # both strands read the record's first 294 bases
    assert tokenize_normalised([(head + tail,), (SEQUENCE,)], k3, tokenizer, 100).cut == [True, False]
    split = first_windows(TaskSplit([(head + tail,), (SEQUENCE,)], np.zeros((2, 1))), k3, tokenizer, 100)
    assert [parts[0] for parts in split.inputs] == [head[:294], SEQUENCE]


def test_a_window_with_n_ends_where_the_tokens_do_so_both_strands_read_the_same_bases():
    """An N is a token of one base (and breaks the k-mer run), so max_len - 2 tokens hold fewer than (max_len - 2) * k
    bases: the window ends at the last token the model reads, and the reverse strand reads those bases, not the
    record's next ones. What the forward strand reads is unchanged."""
    from polymask.data.model_inputs import tokenize_normalised

    k3 = Dna(DnaConfig(k=3))
    tokenizer = k3.build_tokenizer()
    record = "ACGTN" * 40 + "GGGCCC" * 40  # ACG T N: 3 tokens per 5 bases; 98 tokens end at base 164
    window = k3.first_window(record, 100, tokenizer)
    assert window == record[:164]
    assert len(tokenizer.encode(k3.tokenizer_input(window)).ids) == 100  # [CLS] 98 tokens [SEP]: nothing cut
    assert k3.first_window("ACGTN" * 3, 100, tokenizer) == "ACGTN" * 3
    assert k3.first_window("ACGTT", 4, tokenizer) == "ACGT"  # ACG T | T
    forward, reverse = tokenize_normalised([(record,), (window.translate(COMPLEMENT)[::-1],)], k3, tokenizer, 100).ids
    assert forward == tokenizer.encode(k3.tokenizer_input(record[:294])).ids[:99] + forward[-1:]  # as before
    read = "".join(tokenizer.id_to_token(token) for token in reverse[1:-1])
    assert read.translate(COMPLEMENT)[::-1] == window  # the reverse strand reads exactly the forward strand's bases


def random_bases(length: int) -> str:
    """A fixed random DNA record of ``length`` bases."""
    draw = random.Random(0)
    return "".join(draw.choice("ACGT") for _ in range(length))


def bpe_on(record: str, vocab_size: int) -> Tokenizer:
    """A BPE vocabulary (tokens of any length, a tokenizer file of a run's own) learnt from ``record``'s 100-base
    pieces."""
    from polymask.tokenization import SPECIAL_TOKENS

    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    bpe.train_from_iterator([record[i:i + 100] for i in range(0, len(record), 100)], trainer)
    return bpe


def test_a_tokenizer_of_the_runs_own_cuts_the_window_where_its_tokens_end():
    """Tokens of any length (a BPE vocabulary): the window is the bases the model's max_len - 2 tokens read, so a
    reverse strand made from it reads those bases, not the record's end."""
    record = random_bases(2000)
    bpe = bpe_on(record, vocab_size=40)
    own = Dna(DnaConfig(k=3, tokenizer="own-bpe"))
    read = bpe.encode(record, add_special_tokens=False).ids[:48]  # what [CLS] 48 tokens [SEP] keeps
    window = own.first_window(record, 50, bpe)
    assert record.startswith(window) and 48 < len(window) < 1000  # tokens of one to several bases
    assert bpe.encode(window, add_special_tokens=False).ids == read
    assert own.first_window(record[:30], 50, bpe) == record[:30]  # fits: whole


def test_the_window_follows_the_tokenizer_not_the_config_so_a_saved_model_reads_what_it_was_trained_on():
    """A saved fine-tuned model's modality names no tokenizer file (finetuned.json: the folder holds it), so the
    window is told by the tokenizer: predict with a BPE model reads the 48 tokens fine-tuning read, not the
    bases 48 3-mers would hold. Overlapping k-mers from a tokenizer file (the built-in one, named) are cut after
    max_len - 2 k-mers, so the reverse strand reads the forward one's bases, not the record's end."""
    from polymask.data.model_inputs import encode_records, tokenize_normalised
    from polymask.tokenization import add_special_token_processing, cut_encoding

    record = random_bases(2000)
    bpe = add_special_token_processing(bpe_on(record, vocab_size=400))
    trained, saved = Dna(DnaConfig(k=3, tokenizer="own-bpe")), Dna(DnaConfig(k=3))
    window = trained.first_window(record, 50, bpe)
    assert len(window) > 48 * 3 and saved.first_window(record, 50, bpe) == window  # tokens longer than 3 bases
    encoded = encode_records([(record,)], [None], saved, bpe, 50)
    assert encoded.ids[0] == cut_encoding(bpe.encode(record), 50)
    assert encoded.truncated == 1

    named = Dna(DnaConfig(k=6, overlapping=True, tokenizer="dna-6mer-overlap"))
    tokenizer = named.load_tokenizer()
    window = named.first_window(record, 50, tokenizer)
    assert window == record[:53]  # 48 overlapping 6-mers
    read = tokenize_normalised([(record,), (window.translate(COMPLEMENT)[::-1],)], named, tokenizer, 50)
    forward, reverse = read.ids
    assert named.decode(tokenizer, reverse).translate(COMPLEMENT)[::-1] == named.decode(tokenizer, forward) == window
    assert read.cut == [True, False]


def test_a_spec_naming_an_invariance_its_modality_does_not_know_is_refused(tmp_path):
    spec = (polymask.resources.builtin_dir("tasks") / "dna" / "tf_0.yaml").read_text()
    assert "reverse_complement" in spec
    path = tmp_path / "tf_0.yaml"
    path.write_text(spec.replace("reverse_complement", "reverse-complement"))
    with pytest.raises(ConfigError, match=r"tf_0.yaml: invalid task spec:\n  invariant_to: 'reverse-complement' is not "
                                          r"a transformation the dna modality knows \(reverse_complement, shift\); "
                                          r"did you mean 'reverse_complement'\?"):
        load_task_spec(str(path))


def test_smiles_variants_are_the_molecule_in_other_atom_orders_drawn_alike_each_time():
    smiles = Smiles()
    aspirin = smiles.normalize("CC(=O)Oc1ccccc1C(=O)O")
    assert smiles.invariances() == ["atom_order"] == smiles.invariances(["atom_order"])  # true of any molecular label
    assert Dna().invariances() == [] and Dna().invariances(["shift"]) == ["shift"]
    variants = smiles.variants(aspirin, smiles.invariances())
    assert variants[0] == aspirin and 1 < len(variants) <= 1 + TEST_TIME_ORDERS and len(set(variants)) == len(variants)
    assert {smiles.normalize(variant) for variant in variants} == {aspirin}  # one molecule, other strings
    assert smiles.variants(aspirin, ["atom_order"]) == variants  # seeded by the molecule: the same every time
    assert smiles.variants(aspirin) == [aspirin] and smiles.variants("C", ["atom_order"]) == ["C"]
    phenol = "Oc1ccccc1"  # its string's crc32 is above 2^31, where RDKit would draw unseeded
    drawn = smiles.variants(phenol, ["atom_order"])
    Smiles(SmilesConfig(augment=True)).augment(aspirin, random.Random(0))  # RDKit's own generator moves on
    assert smiles.variants(phenol, ["atom_order"]) == drawn and len(drawn) > 1
    explicit = "[H]OC([H])([H])C"
    assert all(variant.count("[H]") == 3 for variant in smiles.variants(explicit, ["atom_order"]))


def test_a_pair_cycles_its_part_with_fewer_variants_and_a_variant_cut_where_its_record_is_not_is_dropped():
    smiles = Smiles()
    pair = expand_variants([("CC(=O)Oc1ccccc1C(=O)O", "O")], smiles, ["atom_order"])
    assert len(pair.inputs) > 1 and {second for _, second in pair.inputs} == {"O"}
    long_chain = "C" * 10 + "(C)" + "C" * 10  # its other atom orders are longer: branches move
    tokenizer = smiles.build_tokenizer([long_chain])
    record_length = len(tokenizer.encode(long_chain).ids)
    variants, ids = encode_variants([(long_chain,), ("CCO",)], smiles, tokenizer, record_length, ["atom_order"])
    assert variants.inputs[0] == (long_chain,) and all(len(row) <= record_length for row in ids)
    everything = expand_variants([(long_chain,), ("CCO",)], smiles, ["atom_order"])
    assert len(variants.inputs) < len(everything.inputs)  # the longer orders of the chain are gone
    assert set(variants.owner.tolist()) == {0, 1} and len(ids) == len(variants.inputs)
    assert encode_variants([], smiles, tokenizer, 8, ["atom_order"])[0].records == 0
    k6 = Dna(DnaConfig(k=6))
    window = "ACGTTGCAAG" * 9 + "ACGTTG"  # 96 bases: 16 6-mers, [CLS] and [SEP]; other frames leave single bases
    dna, dna_ids = encode_variants([(window,)], k6, k6.build_tokenizer(), 18, ["reverse_complement", "shift"])
    assert len(dna.inputs) == 12 == len(dna_ids)  # DNA is cut into windows anyway: every strand and frame stays


def test_variants_average_back_to_their_own_record():
    variants = expand_variants([("ACGT",), ("AAAC",), ("GG",)], Dna(DnaConfig(k=2)), ["reverse_complement"])
    assert variants.inputs == [("ACGT",), ("ACGT",), ("AAAC",), ("GTTT",), ("GG",), ("CC",)]
    assert variants.owner.tolist() == [0, 0, 1, 1, 2, 2] and variants.per_record == 2
    predictions = np.array([[1.0], [3.0], [0.0], [1.0], [5.0], [5.0]])
    assert variants.average(predictions)[:, 0].tolist() == [2.0, 0.5, 5.0]


def test_the_averaged_row_follows_its_own_and_counts_no_time_twice():
    averaged = {"valid": {"mcc": 0.6}, "test": {"mcc": 0.5}, "variants_per_example": 6.0,
                "over": ["reverse_complement", "shift"]}
    cells = [{"system": "enc (mlm)", "task": "dna/tf_0", "seed": 0, "valid": {"mcc": 0.55}, "test": {"mcc": 0.4},
              "time_s": 10.0, "model_dir": "cells/enc/tf_0/seed-0", "model_bytes": 1, "averaged": averaged},
             {"system": "no pretraining", "task": "dna/tf_0", "seed": 0, "valid": {"mcc": 0.1}, "test": {"mcc": 0.1},
              "time_s": 8.0}]
    rows, systems = with_averaged_rows(cells, {"enc (mlm)": "a checkpoint", "no pretraining": "untrained"})
    assert list(systems) == ["enc (mlm)", "enc (mlm)" + AVERAGED, "no pretraining"]
    assert "reverse_complement, shift; 6.0 per example" in systems["enc (mlm)" + AVERAGED]
    extra = rows[-1]
    assert extra["system"] == "enc (mlm)" + AVERAGED and extra["test"] == {"mcc": 0.5} and extra["valid"]["mcc"] == 0.6
    assert extra["time_s"] == 0.0 and "model_dir" not in extra
    assert with_averaged_rows(cells[1:], {"no pretraining": "untrained"})[0] == cells[1:]


def test_a_task_without_variants_gives_the_averaged_row_its_plain_scores_marked_so_the_row_has_a_mean(tmp_path):
    """A promoter (no invariance) is scored by a test-time averaging model as without averaging: the averaged row
    gets those scores, marked '=', and a mean over every task; a row never averaged gains nothing."""
    on = {"system": {"finetune": {"test_time_average": True}}}
    averaged = {"valid": {"mcc": 0.6}, "test": {"mcc": 0.5}, "variants_per_example": 6.0, "over": ["shift"]}

    def cell(system, task, seed, test, **extra):
        return {"system": system, "task": task, "seed": seed, "metric": "mcc", "valid": {"mcc": test},
                "test": {"mcc": test}, "time_s": 1.0, "split": "predefined", "n_train": 4, "n_valid": 2,
                "n_test": 2, "skipped": 0, "truncated": 0, **extra}

    cells = [cell("enc", "dna/mouse_0", seed, 0.4, averaged=averaged, identity=on) for seed in (0, 1)]
    cells += [cell("enc", "dna/prom_300_tata", seed, (0.7, 0.8)[seed], identity=on) for seed in (0, 1)]
    cells += [cell("k-mer", task, seed, 0.3) for task in ("dna/mouse_0", "dna/prom_300_tata") for seed in (0, 1)]
    listed, systems = with_averaged_rows(cells, {"enc": "a checkpoint", "k-mer": "a reference"})
    same = [c for c in listed if c.get("no_variants")]
    assert [(c["system"], c["task"], c["test"]["mcc"]) for c in same] == [
        ("enc" + AVERAGED, "dna/prom_300_tata", 0.7), ("enc" + AVERAGED, "dna/prom_300_tata", 0.8)]
    assert all(c["time_s"] == 0.0 for c in same) and list(systems)[1] == "enc" + AVERAGED
    results = {"cells": listed, "systems": systems, "seeds": [0, 1], "task_order": ["dna/mouse_0", "dna/prom_300_tata"],
               "wall_time_s": 0.0, "missing": {}, "tasks": {}}
    text = write_report(tmp_path, "t", aggregate(results), results, {}).read_text()
    main_table = text.split("## ")[0]
    assert "| enc + test-time average | **0.500 ± 0.000** | 0.750 ± 0.050 = | 0.625 ± 0.025 |" in main_table
    assert "| enc | 0.400 ± 0.000 | **0.750 ± 0.050** |" in main_table  # the mark is never the column's best
    assert "=: the task's examples have no variants" in main_table
    promoters_only = [c for c in cells if c["task"] == "dna/prom_300_tata"]
    assert with_averaged_rows(promoters_only, {"enc": "a checkpoint", "k-mer": "a reference"})[0] == promoters_only


@pytest.mark.integration
@pytest.mark.usefixtures("one_torch_thread")
def test_finetuning_scores_both_ways_and_the_saved_model_predicts_averaged(tmp_path, capsys):
    run = tmp_path / "tiny-dna"
    train(tiny_config("dna", run, max_steps=10))
    checkpoint = read_checkpoint(run)
    modality = Dna()
    splice = load_task(load_task_spec("dna/splice"), modality)  # its label is strand-specific: an invariance is
    spec = splice.spec.model_copy(update={"invariant_to": ["reverse_complement", "shift"]})  # declared for the test
    task = TaskData(spec, splice.label_names, subset(splice.train, 200, 0), subset(splice.valid, 60, 0),
                    subset(splice.test, 60, 0), splice.files, extra_tests={"other": subset(splice.test, 30, 1)})
    config = FinetuneConfig(epochs=1, lr=2e-3, precision="fp32", test_time_average=True)
    folder = tmp_path / "model"
    result = finetune(task, checkpoint.build_encoder(), checkpoint.tokenizer, modality, config, seed=0,
                      save_to=SaveTarget(folder, str(run), "mlm", 10))
    assert result["averaged"]["variants_per_example"] == 12  # 2 strands x 6 frames of a 6-mer
    assert set(result["averaged"]["test"]) == {"mcc", "accuracy", "macro_f1"} and "other_mcc" in result["test"]
    plain = finetune(task, checkpoint.build_encoder(), checkpoint.tokenizer, modality,
                     config.model_copy(update={"test_time_average": False}), seed=0)
    assert "averaged" not in plain and plain["test"] == result["test"]  # the single-prediction row is unchanged
    frameless = Dna(DnaConfig(k=6, overlapping=True))  # overlapping k-mers have no reading frame to shift
    shift_only = dataclasses.replace(task, spec=spec.model_copy(update={"invariant_to": ["shift"]}))
    assert "averaged" not in finetune(shift_only, checkpoint.build_encoder(), checkpoint.tokenizer, frameless, config,
                                      seed=0)  # no variant to average over: no row that repeats the plain one

    model = polymask.load_model(folder)
    assert model.averaged_over == ["reverse_complement", "shift"]
    sequence = task.test.inputs[0][0]
    averaged = model.predict([sequence]).filter(like="prob_").to_numpy()
    model.averaged_over = []
    each = model.predict(modality.variants(sequence, spec.invariant_to)).filter(like="prob_").to_numpy()
    assert np.allclose(averaged[0], each.mean(axis=0), atol=1e-6)
    assert not np.allclose(each[0], each.mean(axis=0))  # the variants do reach the prediction
    (tmp_path / "new.csv").write_text(f"sequence\n{sequence}\n")
    capsys.readouterr()  # the tiny run's collapse warning
    assert main(["predict", "--model", str(folder), "--data", str(tmp_path / "new.csv"), "--out",
                 str(tmp_path / "predicted.csv"), "--quiet"]) == 0
    assert "each prediction is the mean over the record's variants under reverse_complement, shift" in \
        capsys.readouterr().out
    assert main(["export", "--checkpoint", str(folder), "--out", str(tmp_path / "hf")]) == 0  # the one-record head
    assert "averages its predictions over reverse_complement, shift" in capsys.readouterr().out
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "predicts the mean of its predictions over each record's variants under reverse_complement, shift" in card
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    exported = AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf", trust_remote_code=True).eval()
    tokens = AutoTokenizer.from_pretrained(tmp_path / "hf", trust_remote_code=True)(
        modality.variants(sequence, spec.invariant_to), return_tensors="pt", padding=True)
    with torch.no_grad():
        probabilities = torch.softmax(exported(**tokens).logits, dim=-1).numpy()  # splice: 3 classes
    assert np.allclose(probabilities, each, atol=1e-4)  # averaging these gives polymask's prediction


@pytest.mark.integration
@pytest.mark.usefixtures("one_torch_thread")
def test_a_smiles_model_averages_over_atom_orders_that_are_never_canonicalised_back(tmp_path, tiny_smiles_run):
    out = tmp_path / "esol"
    assert main(["finetune", "--task", "moleculenet/esol", "--checkpoint", str(tiny_smiles_run), "--epochs", "1",
                 "--max-train-examples", "64", "--max-valid-examples", "32", "--max-test-examples", "32",
                 "--test-time-average", "--out", str(out), "--quiet"]) == 0
    cell = json.loads((out / "results.json").read_text())["cells"][0]
    assert cell["averaged"]["over"] == ["atom_order"] and cell["averaged"]["variants_per_example"] > 2
    assert cell["averaged"]["test"]["rmse"] != cell["test"]["rmse"]
    model = polymask.load_model(out / cell["model_dir"])
    assert model.averaged_over == ["atom_order"]
    molecules = ["CC(=O)Oc1ccccc1C(=O)O", "OC(=O)c1ccccc1OC(C)=O", "c1ccccc1"]  # aspirin twice, as two strings
    averaged = model.predict(molecules)["predicted_measured log solubility in mols per litre"].to_numpy()
    assert averaged[0] == pytest.approx(averaged[1], abs=1e-6)  # the same molecule, the same variants
    model.averaged_over = []
    single = model.predict(molecules)["predicted_measured log solubility in mols per litre"].to_numpy()
    assert not np.allclose(averaged, single)  # the atom orders reach the prediction
