"""SQuAD v1.1 / v2.0 from the official JSON format, split into article-disjoint parts.

Standard protocol (train and dev files present): fine-tune on the train file, with a fixed-seed,
article-disjoint part of it (``split.valid_from_train``) held out for early stopping, and evaluate
on the dev file. Without a train file, the dev file's articles, in a fixed-seed random order, are
divided into train / valid / test parts of about ``split.fractions`` of its questions: an
article-disjoint dev split, labelled as such in every table, never the standard protocol.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polymask.data.readers import open_text
from polymask.data.records import normalize_record
from polymask.errors import ConfigError, DataError, InvalidRecord, TaskFileMissing
from polymask.modalities.base import Modality
from polymask.tasks.data.loading import find_task_file, holdout
from polymask.tasks.data.spec import TaskSpec
from polymask.tasks.metrics.squad import Golds


@dataclass(frozen=True)
class QAExample:
    """A question on a context: gold answer texts (none: unanswerable) and where the first one starts."""

    qid: str
    question: str
    context: str
    answers: tuple[str, ...]
    answer_start: int
    article: str


@dataclass
class SquadTask:
    """The questions of each part, which scoring rules apply, and where they came from."""

    spec: TaskSpec
    train: list[QAExample]
    valid: list[QAExample]
    test: list[QAExample]
    version_2: bool
    files: list[str]
    standard: bool
    protocol: str
    skipped: list[dict] = field(default_factory=list)
    duplicates_removed: int = 0
    label_names: list[str] = field(default_factory=lambda: ["answer span"])

    def golds(self, examples: list[QAExample]) -> Golds:
        return Golds([list(example.answers) for example in examples], self.version_2)


def read_squad(path: Path, spec: TaskSpec, modality: Modality, skipped: list[dict]) -> tuple[list[QAExample], bool]:
    """Every usable question of an official-format file (``.gz`` accepted) and whether it is v2.0 (so declared, or
    holding an unanswerable question, which v1.1's rules cannot score). The spec's input columns name the question
    and context fields, its label column the answers field. A file that departs from SQuAD's layout (no ``data`` list of articles with ``paragraphs`` lists of ``qas`` lists) is a
    ``DataError`` naming the place; a question with a malformed field, or whose question or context fails the
    record checks (``normalize_record``), is skipped and reported in ``skipped``."""
    with open_text(path) as handle:
        try:
            data = json.loads("".join(handle))
        except ValueError as exc:
            raise DataError(f"{path}: not valid JSON ({exc})") from None
    first = len(skipped)
    examples = _checked(_squad_examples(data, spec, str(path), skipped), modality, str(path), skipped)
    if not examples:
        reason = f"{skipped[first]['line']}: {skipped[first]['reason']}; " if len(skipped) > first else ""
        raise DataError(f"{path}: {reason}no usable question in the file")
    declared = str(data.get("version", "")).lstrip("v").startswith("2")
    return examples, declared or any(not example.answers for example in examples)


def _checked(examples: list[QAExample], modality: Modality, source: str, skipped: list[dict]) -> list[QAExample]:
    """The questions whose question and context pass the checks every record passes; the texts are kept as read
    (answer offsets point into them)."""
    kept = []
    for example in examples:
        try:
            for text in (example.question, example.context):
                normalize_record(modality, text)
        except InvalidRecord as exc:
            skipped.append({"source": source, "line": f"question {example.qid}", "reason": exc.reason})
            continue
        kept.append(example)
    return kept


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _items(parent: Any, path: str, key: str, source: str) -> list:
    """``parent[key]``, which SQuAD's layout makes a list; else a ``DataError`` naming the place."""
    if not isinstance(parent, dict):
        raise DataError(f"{source}: not a SQuAD file: {path or 'the top level'} is {_json_type(parent)}, "
                        f"not an object")
    items = parent.get(key)
    if not isinstance(items, list):
        found = "missing" if key not in parent else f"{_json_type(items)}, not a list"
        raise DataError(f"{source}: not a SQuAD file: {f'{path}.' if path else ''}{key} is {found}")
    return items


def _string(record: dict, key: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise InvalidRecord(f"'{key}' is {'missing' if key not in record else _json_type(value)}, not a string")
    return value


def _example(qid: str, qa: dict, paragraph: dict, spec: TaskSpec, article: str) -> QAExample:
    """One question of a paragraph; ``InvalidRecord`` naming its first malformed field."""
    question_field, context_field = spec.input_columns
    answers_field = spec.label_columns[0]
    question, context = _string(qa, question_field), _string(paragraph, context_field)
    answers = qa.get(answers_field)
    if not isinstance(answers, list) or not all(isinstance(answer, dict) for answer in answers):
        found = "missing" if answers_field not in qa else _json_type(answers)
        raise InvalidRecord(f"'{answers_field}' is {found}, not a list of objects")
    for answer in answers:
        _string(answer, "text")
        start = answer.get("answer_start")
        if isinstance(start, bool) or not isinstance(start, int):
            raise InvalidRecord(f"'answer_start' {start!r} is not a whole number" if "answer_start" in answer
                                else "'answer_start' is missing")
    return QAExample(qid, question.strip(), context, tuple(answer["text"] for answer in answers),
                     answers[0]["answer_start"] if answers else -1, article)


def _squad_examples(data: Any, spec: TaskSpec, source: str, skipped: list[dict]) -> list[QAExample]:
    """The questions of a parsed file; a malformed question is reported in ``skipped`` (by its id, else its place)."""
    examples = []
    for number, article in enumerate(_items(data, "", "data", source)):
        paragraphs = _items(article, f"data[{number}]", "paragraphs", source)
        for index, paragraph in enumerate(paragraphs):
            place = f"data[{number}].paragraphs[{index}]"
            for at, qa in enumerate(_items(paragraph, place, "qas", source)):
                qid = str(qa["id"]) if isinstance(qa, dict) and "id" in qa else f"{place}.qas[{at}]"
                try:
                    if not isinstance(qa, dict):
                        raise InvalidRecord(f"{_json_type(qa)}, not an object")
                    examples.append(_example(qid, qa, paragraph, spec, f"{number}: {article.get('title', '')}"))
                except InvalidRecord as exc:
                    skipped.append({"source": source, "line": f"question {qid}", "reason": exc.reason})
    return examples


def _articles(examples: list[QAExample]) -> list[str]:
    return list(dict.fromkeys(example.article for example in examples))


def _of_articles(examples: list[QAExample], articles: set[str]) -> list[QAExample]:
    return [example for example in examples if example.article in articles]


def article_split(examples: list[QAExample], fractions: tuple[float, float, float],
                  seed: int) -> list[list[QAExample]]:
    """Whole articles in a seeded random order fill train, then valid, then test, each part taking
    articles until it holds its cumulative fraction of the questions (every part gets one at least)."""
    articles = _articles(examples)
    counts = {article: 0 for article in articles}
    for example in examples:
        counts[example.article] += 1
    targets = np.cumsum(fractions) * len(examples)
    parts: list[set[str]] = [set(), set(), set()]
    part, taken = 0, 0
    for index in np.random.default_rng(seed).permutation(len(articles)):
        if part < 2 and parts[part] and taken >= targets[part]:
            part += 1
        parts[part].add(articles[index])
        taken += counts[articles[index]]
    if not parts[2]:
        raise DataError(f"{len(articles)} articles are too few for an article-disjoint train/valid/test split")
    return [_of_articles(examples, chosen) for chosen in parts]


def _answer_problem(example: QAExample) -> str | None:
    """Why a training question's first answer gives no target span (blank, or not where it says it is), or None."""
    if not example.answers:
        return None
    start, text = example.answer_start, example.answers[0]
    if not text.strip():
        return "answer text is empty or only whitespace"
    return None if start >= 0 and example.context[start:start + len(text)] == text else "answer text not at answer_start"


def _trainable(examples: list[QAExample], source: str, skipped: list[dict]) -> list[QAExample]:
    """Training questions whose first answer gives a target span (the others are skipped and reported)."""
    kept = []
    for example in examples:
        problem = _answer_problem(example)
        if problem:
            skipped.append({"source": source, "line": f"question {example.qid}", "reason": problem})
        else:
            kept.append(example)
    return kept


def load_squad(spec: TaskSpec, modality: Modality, data_dir: Path | None = None) -> SquadTask:
    """The task's questions under the standard protocol, or the dev-split one when there is no train file."""
    test_path = find_task_file(spec.files["test"], spec.benchmark, data_dir)
    skipped: list[dict] = []
    test, version_2 = read_squad(test_path, spec, modality, skipped)
    split = spec.split
    try:
        train_path = find_task_file(spec.files["train"], spec.benchmark, data_dir)
    except TaskFileMissing:
        train, valid, test = article_split(test, split.fractions, split.seed)
        protocol = (f"dev split, NOT the standard protocol (no train file '{spec.files['train']}' found): the articles "
                    f"of the dev file divided article-disjointly into train/valid/test of about "
                    f"{'/'.join(f'{f:.0%}' for f in split.fractions)} of its questions (seed {split.seed})")
        return SquadTask(spec, _trainable(train, str(test_path), skipped), valid, test, version_2, [str(test_path)],
                         False, protocol, skipped)
    if split.valid_from_train is None:
        raise ConfigError(f"{spec.key}: the standard protocol needs split.valid_from_train (held-out train articles)")
    examples, _ = read_squad(train_path, spec, modality, skipped)
    articles = _articles(examples)
    kept, held = holdout(len(articles), split.valid_from_train, split.seed)
    train = _of_articles(examples, {articles[i] for i in kept})
    valid = _of_articles(examples, {articles[i] for i in held})
    protocol = (f"standard: train file, {len(held)} of its {len(articles)} articles held out for validation "
                f"(seed {split.seed}); test = the dev file")
    return SquadTask(spec, _trainable(train, str(train_path), skipped), valid, test, version_2,
                     [str(train_path), str(test_path)], True, protocol, skipped)
