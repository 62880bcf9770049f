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
    """Every usable question of an official-format file (``.gz`` accepted) and whether it is v2.0. The spec's
    input columns name the question and context fields, its label column the answers field. A question whose
    question or context fails the record checks (``normalize_record``) is skipped and reported in ``skipped``."""
    with open_text(path) as handle:
        try:
            data = json.loads("".join(handle))
        except ValueError as exc:
            raise DataError(f"{path}: not valid JSON ({exc})") from None
    try:
        examples, version_2 = _squad_examples(data, spec)
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise DataError(f"{path}: not a SQuAD file (field {exc} missing or malformed)") from None
    return _checked(examples, modality, str(path), skipped), version_2


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


def _squad_examples(data: dict, spec: TaskSpec) -> tuple[list[QAExample], bool]:
    question_field, context_field = spec.input_columns
    answers_field = spec.label_columns[0]
    examples = []
    for number, article in enumerate(data["data"]):
        for paragraph in article["paragraphs"]:
            context = paragraph[context_field]
            for qa in paragraph["qas"]:
                answers = qa[answers_field]
                examples.append(QAExample(qa["id"], qa[question_field].strip(), context,
                                          tuple(a["text"] for a in answers),
                                          answers[0]["answer_start"] if answers else -1,
                                          f"{number}: {article.get('title', '')}"))
    return examples, str(data.get("version", "")).lstrip("v").startswith("2")


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


def _answer_found(example: QAExample) -> bool:
    start = example.answer_start
    return not example.answers or example.context[start:start + len(example.answers[0])] == example.answers[0]


def _trainable(examples: list[QAExample], source: str, skipped: list[dict]) -> list[QAExample]:
    """Training questions whose first answer is where it says it is (the others are skipped and reported)."""
    kept = [example for example in examples if _answer_found(example)]
    skipped += [{"source": source, "line": f"question {example.qid}", "reason": "answer text not at answer_start"}
                for example in examples if not _answer_found(example)]
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
