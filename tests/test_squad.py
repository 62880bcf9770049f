"""SQuAD: the scorer against hand-computed scores, offsets on real questions, splits, decoding, the CLI."""
import json
import re
import shutil
import unicodedata

import numpy as np
import pytest
import torch

from polymask.cli import main
from polymask.errors import DataError
from polymask.finetune_config import SpanOptions
from polymask.modalities import MODALITIES
from polymask.resources import builtin_dir
from polymask.tasks.data.spec import load_task_spec
from polymask.tasks.data.squad import QAExample, load_squad, read_squad
from polymask.tasks.finetune.span_features import answer_predictions, best_spans, build_features, windows
from polymask.tasks.metrics.squad import (
    Golds,
    best_exact_match,
    best_f1,
    best_threshold,
    exact_match,
    f1,
    has_answer_f1,
    no_answer_f1,
    normalize_answer,
)
from polymask.tokenization import load_tokenizer

pytestmark = pytest.mark.integration  # trains, fine-tunes or runs the command line end to end

INF = float("inf")

# Official-format questions (answer texts; [] = no answer) and (best span, no-answer score) predictions.
GOLDS = [["the Denver Broncos", "Denver Broncos"], ["Santa Clara, California"], [], [], ["1990"]]
PREDICTIONS = [("Denver Broncos.", -2.0), ("Santa Clara", -1.5), ("Levi's Stadium", -1.0), ("the", 2.0), ("1990", 0.5)]


def test_normalisation_as_the_official_script():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("banana theatre") == "banana theatre"  # articles only as whole words


def test_exact_and_f1_against_hand_computed_scores():
    golds = Golds(GOLDS, version_2=True)
    # threshold 0: answers 1-3 are given, 4 and 5 become "" (no-answer score above 0)
    # exact: 1 (normalised match) + 0 + 0 (an answer to an unanswerable question) + 1 (correct "") + 0
    assert exact_match(golds, PREDICTIONS) == pytest.approx(100 * 2 / 5)
    # F1: 1 + 0.8 (P = 1, R = 2/3) + 0 + 1 + 0
    assert f1(golds, PREDICTIONS) == pytest.approx(100 * 2.8 / 5)
    assert has_answer_f1(golds, PREDICTIONS) == pytest.approx(100 * 1.8 / 3)  # questions 1, 2, 5
    assert no_answer_f1(golds, PREDICTIONS) == pytest.approx(50.0)  # questions 3, 4


def test_best_threshold_sweep_against_hand_computed_scores():
    golds = Golds(GOLDS, version_2=True)
    # start with "" everywhere (2 unanswerable right), then answer in order of no-answer score:
    # F1 running totals 2 -> 3 (q1) -> 3.8 (q2) -> 2.8 (q3 answered wrongly) -> 3.8 (q5) -> 2.8 (q4): best 3.8 at -1.5
    assert best_threshold(golds, PREDICTIONS, "f1") == pytest.approx((100 * 3.8 / 5, -1.5))
    assert best_f1(golds, PREDICTIONS) == pytest.approx(76.0)
    # exact: 2 -> 3 (q1) -> 3 -> 2 -> 3 -> 2: best 3 at -2.0
    assert best_threshold(golds, PREDICTIONS, "exact") == pytest.approx((60.0, -2.0))
    assert best_exact_match(golds, PREDICTIONS) == pytest.approx(60.0)


def test_v1_and_v2_rules_differ_only_on_gold_answers_that_normalise_to_nothing():
    prediction = [(",", -INF)]
    assert exact_match(Golds([["."]], version_2=False), prediction) == 100.0
    assert f1(Golds([["."]], version_2=False), prediction) == 0.0  # v1.1: no shared token, F1 0
    assert f1(Golds([["."]], version_2=True), prediction) == 100.0  # v2.0: both empty after normalising
    assert f1(Golds([["Broncos", "."]], version_2=True), [("Denver Broncos", -INF)]) == pytest.approx(100 * 2 / 3)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(builtin_dir("tokenizers") / "text")


@pytest.mark.parametrize("key", ["squad/v1", "squad/v2-cs224n"])
def test_offsets_recover_the_gold_answer_of_every_training_window(key, tokenizer):
    task = load_squad(load_task_spec(key), MODALITIES.get("text")())
    everything = task.train + task.valid + task.test
    sample = [example for example in everything if example.article.startswith(("0:", "1:"))]  # two real articles
    features = build_features(sample, tokenizer, 160, SpanOptions(doc_stride=64))
    assert len(features) > len(sample)  # long contexts do span several windows
    found = exact = 0
    for row in range(len(features)):
        example = sample[features.example[row]]
        if features.starts[row] == 0:
            continue
        offsets = features.offsets[row]
        first, last = (features.starts[row] - features.context_from[row], features.ends[row] - features.context_from[row])
        answer_end = example.answer_start + len(example.answers[0])
        # the smallest token span covering the answer's characters
        assert offsets[first][0] <= example.answer_start < offsets[first][1]
        assert offsets[last][0] < answer_end <= offsets[last][1]
        text = example.context[offsets[first][0]:offsets[last][1]].strip()
        assert example.answers[0] in text
        found += 1
        exact += text == example.answers[0]
    answerable = {i for i, example in enumerate(sample) if example.answers}
    assert {features.example[row] for row in range(len(features)) if features.starts[row]} == answerable
    assert exact >= 0.98 * found  # the rest end inside a BPE token (e.g. "DTIME(n2)" in "DTIME(n2),")


def test_windows_cover_the_context_with_the_stride():
    assert windows(10, 4, 3) == [(0, 4), (3, 7), (6, 10)]
    assert windows(3, 4, 2) == [(0, 3)]


def test_without_a_train_file_the_dev_split_is_article_disjoint_and_labelled():
    task = load_squad(load_task_spec("squad/v2-cs224n"), MODALITIES.get("text")())
    articles = [{example.article for example in part} for part in (task.train, task.valid, task.test)]
    assert not (articles[0] & articles[1] or articles[0] & articles[2] or articles[1] & articles[2])
    assert sum(map(len, articles)) == 16 and len(task.train) + len(task.valid) + len(task.test) == 6078
    assert task.version_2 and not task.standard and "NOT the standard protocol" in task.protocol


def test_with_a_train_file_the_standard_protocol_runs(tmp_path):
    # the dev file stands in for train-v1.1.json here, only to exercise the standard protocol's code path
    shipped = builtin_dir("tasks") / "squad" / "data" / "dev-v1.1.json.gz"
    for name in ("train-v1.1.json.gz", "dev-v1.1.json.gz"):
        shutil.copy(shipped, tmp_path / name)
    task = load_squad(load_task_spec("squad/v1"), MODALITIES.get("text")(), tmp_path)
    assert task.standard and task.protocol.startswith("standard: train file, 2 of its 48 articles held out")
    assert len(task.test) == 10570 and len(task.train) + len(task.valid) == 10570 and not task.version_2
    assert not {example.article for example in task.train} & {example.article for example in task.valid}


def test_questions_failing_the_record_checks_are_skipped_and_reported(tmp_path):
    """SQuAD's questions pass the checks every record passes (``normalize_record``): blank, or over max_chars."""
    contexts = {"ok": "The cat sat on the mat.", "long": "word " * 2_500, "blank": " \t "}
    questions = {"q1": ("ok", "Where did the cat sit?"), "q2": ("ok", "\u200b"), "q3": ("long", "Which word?"),
                 "q4": ("blank", "What?")}
    paragraphs = [{"context": contexts[name], "qas": [{"id": qid, "question": question, "answers": []}
                                                     for qid, (where, question) in questions.items() if where == name]}
                  for name in contexts]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}))
    text = MODALITIES.get("text")
    skipped: list[dict] = []
    examples, _ = read_squad(path, load_task_spec("squad/v2-cs224n"), text(text.Config(max_chars=10_000)), skipped)
    assert [example.qid for example in examples] == ["q1"]
    reasons = {entry["line"]: entry["reason"] for entry in skipped}
    assert set(reasons) == {"question q2", "question q3", "question q4"}
    assert {entry["source"] for entry in skipped} == {str(path)}
    assert reasons["question q2"] == reasons["question q4"] == "only whitespace or control characters"
    assert "12,500 characters, over the text limit of 10,000" in reasons["question q3"]


def _squad_file(path, paragraphs, version="1.1"):
    data = {"data": [{"title": "t", "paragraphs": paragraphs}], **({"version": version} if version else {})}
    path.write_text(json.dumps(data))
    return path


def test_malformed_questions_are_skipped_by_id_and_a_malformed_layout_is_one_line(tmp_path):
    """A field of the wrong type skips its question, named by id (else by place); the file's layout is a DataError."""
    good = {"id": "ok", "question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]}
    faults = {"q-type": {"question": 12}, "start-str": {"answers": [{"text": "cat", "answer_start": "4"}]},
              "start-float": {"answers": [{"text": "cat", "answer_start": 4.0}]},
              "no-start": {"answers": [{"text": "cat"}]}, "text-null": {"answers": [{"text": None, "answer_start": 4}]},
              "answers-object": {"answers": {"text": "cat", "answer_start": 4}}}
    qas = [good, *({**good, "id": qid, **fault} for qid, fault in faults.items()), "not a question",
           {key: value for key, value in good.items() if key != "id"} | {"question": None}]
    paragraphs = [{"context": "The cat sat.", "qas": qas}, {"context": None, "qas": [{**good, "id": "ctx-null"}]}]
    path = _squad_file(tmp_path / "dev.json", paragraphs)
    skipped: list[dict] = []
    examples, _ = read_squad(path, load_task_spec("squad/v1"), MODALITIES.get("text")(), skipped)
    assert [example.qid for example in examples] == ["ok"]
    assert {entry["line"]: entry["reason"] for entry in skipped} == {
        "question q-type": "'question' is a number, not a string",
        "question start-str": "'answer_start' '4' is not a whole number",
        "question start-float": "'answer_start' 4.0 is not a whole number",
        "question no-start": "'answer_start' is missing",
        "question text-null": "'text' is null, not a string",
        "question answers-object": "'answers' is an object, not a list of objects",
        "question data[0].paragraphs[0].qas[7]": "a string, not an object",
        "question data[0].paragraphs[0].qas[8]": "'question' is null, not a string",
        "question ctx-null": "'context' is null, not a string"}
    layouts = {"not a SQuAD file: the top level is a list, not an object": [1],
               "not a SQuAD file: data is an object, not a list": {"data": {}},
               "not a SQuAD file: data[0].paragraphs is missing": {"data": [{"title": "t"}]},
               "not a SQuAD file: data[0].paragraphs[0].qas is a string, not a list":
                   {"data": [{"paragraphs": [{"context": "c", "qas": "q"}]}]},
               "question x: 'context' is missing, not a string; no usable question in the file":
                   {"data": [{"paragraphs": [{"qas": [{**good, "id": "x"}]}]}]}}
    for message, data in layouts.items():
        path.write_text(json.dumps(data))
        with pytest.raises(DataError, match="^" + re.escape(f"{path}: {message}") + "$"):
            read_squad(path, load_task_spec("squad/v1"), MODALITIES.get("text")(), [])


def test_a_file_with_an_unanswerable_question_is_scored_by_the_v2_rules_whatever_its_version(tmp_path):
    """v1.1's rules cannot score a question without an answer (max() of no gold answer crashed after training)."""
    qas = [{"id": "a", "question": "Who?", "answers": [{"text": "cat", "answer_start": 4}]},
           {"id": "b", "question": "Why?", "answers": []}]
    paragraphs = [{"context": "The cat sat.", "qas": qas}]
    spec, text = load_task_spec("squad/v1"), MODALITIES.get("text")()
    for version in ("1.1", None):
        path = _squad_file(tmp_path / "dev.json", paragraphs, version)
        assert read_squad(path, spec, text, [])[1]
    assert not read_squad(_squad_file(tmp_path / "dev.json", [{"context": "The cat sat.", "qas": qas[:1]}]), spec,
                          text, [])[1]


def test_training_questions_without_a_target_span_are_skipped_and_reported(tmp_path):
    """A blank answer, or one not at its answer_start, gives no target: such training questions are skipped."""
    context = "The cat sat on the mat. " * 3
    answers = {"good": ("cat", 4), "empty": ("", 0), "blank": (" ", 3), "moved": ("cat", 5), "negative": ("mat.", -4)}
    paragraphs = [{"context": context, "qas": [{"id": f"{article}-{name}", "question": "What?",
                                                "answers": [{"text": text, "answer_start": start}]}
                                               for name, (text, start) in answers.items()]}
                  for article in range(10)]
    data = {"version": "1.1", "data": [{"title": str(i), "paragraphs": [paragraph]} for i, paragraph in
                                       enumerate(paragraphs)]}
    (tmp_path / "dev-v1.1.json").write_text(json.dumps(data))
    task = load_squad(load_task_spec("squad/v1"), MODALITIES.get("text")(), tmp_path)
    assert task.train and all(example.qid.endswith("-good") for example in task.train)
    reasons = {entry["line"].rsplit("-", 1)[1]: entry["reason"] for entry in task.skipped}
    assert reasons == {"empty": "answer text is empty or only whitespace",
                       "blank": "answer text is empty or only whitespace",
                       "moved": "answer text not at answer_start", "negative": "answer text not at answer_start"}
    assert len(task.skipped) == 4 * len({example.article for example in task.train})


def test_a_span_of_decomposed_text_keeps_its_last_combining_accent(tokenizer):
    """NFC aligns "a" + U+0300 with the "a" only: the span is extended over the accent, so it reads back as given."""
    context = unicodedata.normalize("NFD", "Il est allé là où Noël était, à Paris.")
    answer = unicodedata.normalize("NFD", "allé là")
    example = QAExample("q", "Où?", context, (answer,), context.index(answer), "a")
    features = build_features([example], tokenizer, 128, SpanOptions())
    [(text, _)] = answer_predictions(features, [example], np.zeros(1), np.array(features.starts),
                                     np.array(features.ends), np.zeros(1), allow_null=False)
    assert text == answer


def test_best_spans_matches_brute_force():
    torch.manual_seed(0)
    start, end = torch.randn(3, 9), torch.randn(3, 9)
    scores, starts, ends, nulls = best_spans(start, end, max_answer_len=3)
    for row in range(3):
        candidates = [(start[row, i] + end[row, j], i, j) for i in range(1, 9) for j in range(i, min(i + 3, 9))]
        best = max(candidates)
        assert (starts[row], ends[row]) == (best[1], best[2]) and torch.isclose(scores[row], best[0])
        assert torch.isclose(nulls[row], start[row, 0] + end[row, 0])


def test_finetune_cli_on_squad_v2_labels_the_protocol(tiny_text_checkpoint, tmp_path):
    out = tmp_path / "squad"
    assert main(["finetune", "--task", "squad/v2-cs224n", "--checkpoint", str(tiny_text_checkpoint), "--epochs", "1",
                 "--max-train-examples", "48", "--max-valid-examples", "24", "--max-test-examples", "40",
                 "--max-len", "128", "--set", "span.doc_stride=48", "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "results.json").read_text())
    cell = report["cells"][0]
    assert set(cell["test"]) == {"squad_f1", "exact_match", "has_answer_f1", "no_answer_f1", "best_squad_f1",
                                 "best_exact_match"}
    assert all(0 <= value <= 100 for value in cell["test"].values())
    assert cell["test"]["best_squad_f1"] >= cell["test"]["squad_f1"] - 1e-9  # the oracle threshold is never worse
    assert (cell["n_train"], cell["n_valid"], cell["n_test"]) == (48, 24, 40)
    assert cell["windows"]["test"] > 40 and set(cell["oracle_no_answer_threshold"]) == {"exact", "f1"}
    markdown = (out / "results.md").read_text()
    assert "NOT the standard protocol" in markdown and "max_test_examples = 40" in markdown
    assert "best_squad_f1" in markdown  # further metrics are tabled too
