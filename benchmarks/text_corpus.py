"""A text pretraining corpus with benchmark hygiene, from the shared tool's sources (issue 38).

Reads the one-paragraph-per-line files that ``shared/tools/text-corpus/build.py`` writes, finds every
paragraph that contains a held-out sentence (a sentence of 8+ words of a GLUE dev set on hand, or of a
SQuAD dev context), drops it, and writes a deterministic sample of the rest:

    python benchmarks/text_corpus.py --sources /work/corpus --glue /work/shared/data/glue \
        --words wikipedia=9e6 gutenberg=5e6 imdb=5e6 wikinews=2.5e6 --out runs/text-corpus

Writes ``<out>/corpus.txt`` (one paragraph per line) and ``<out>/hygiene.json`` / ``hygiene.md``: words
and paragraphs per source before and after, and per held-out set the sentences checked, the sentences
found in each source and the paragraphs removed. Matching is on lower-cased alphanumeric words, so
tokenisation differences (SST-2's ``it 's``) do not hide a copy. Every paragraph of every source is
checked, not only the sampled ones; the sample is taken by a hash of the paragraph, so it is the same
on every machine.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path

from polymask.jsonio import make_dir, write_json, write_text
from polymask.modalities.text import Text
from polymask.resources import builtin_dir
from polymask.tasks.data.loading import load_task
from polymask.tasks.data.spec import load_task_spec, task_names

MIN_WORDS = 8
WORD = re.compile(r"[a-z0-9]+")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def sentences(text: str) -> list[tuple[str, ...]]:
    """The sentences of ``text`` of at least ``MIN_WORDS`` words, as word tuples."""
    found = (tuple(words(part)) for part in SENTENCE_END.split(text))
    return [s for s in found if len(s) >= MIN_WORDS]


def glue_heldout(data_dir: Path) -> dict[str, set[tuple[str, ...]]]:
    """GLUE task name -> the sentences of its dev set (the benchmark's test split), for every task on hand."""
    found = {}
    for name in task_names("glue"):
        spec = load_task_spec(name)
        try:
            task = load_task(spec, Text(), data_dir)
        except Exception as exc:  # a task whose files are not on hand
            print(f"skipped {name}: {exc}")
            continue
        found[spec.name] = {s for inputs in task.test.inputs for text in inputs for s in sentences(text)}
    return found


def squad_heldout() -> dict[str, set[tuple[str, ...]]]:
    """SQuAD dev file -> the sentences of its contexts."""
    found = {}
    for path in sorted((builtin_dir("tasks") / "squad" / "data").glob("*.json.gz")):
        data = json.loads(gzip.open(path, "rt", encoding="utf-8").read())
        contexts = {p["context"] for article in data["data"] for p in article["paragraphs"]}
        found[f"squad/{path.name.removesuffix('.json.gz')}"] = {s for c in contexts for s in sentences(c)}
    return found


class Matcher:
    """Finds the held-out sentences a paragraph contains (indexed by their first ``MIN_WORDS`` words)."""

    def __init__(self, heldout: dict[str, set[tuple[str, ...]]]):
        self.by_prefix: dict[tuple[str, ...], list[tuple[tuple[str, ...], str]]] = defaultdict(list)
        for name, found in heldout.items():
            for sentence in found:
                self.by_prefix[sentence[:MIN_WORDS]].append((sentence, name))

    def find(self, paragraph: str) -> list[tuple[tuple[str, ...], str]]:
        tokens = words(paragraph)
        hits = []
        for start in range(len(tokens) - MIN_WORDS + 1):
            candidates = self.by_prefix.get(tuple(tokens[start:start + MIN_WORDS]))
            for sentence, name in candidates or ():
                if tuple(tokens[start:start + len(sentence)]) == sentence:
                    hits.append((sentence, name))
        return hits


def sampled(paragraph: str, rate: float) -> bool:
    digest = hashlib.blake2b(paragraph.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") < rate * 2**64


def build(sources: Path, targets: dict[str, float], matcher: Matcher, out: Path) -> dict:
    report: dict = {"sources": {}, "heldout_found": defaultdict(lambda: defaultdict(set))}
    counts = json.loads((sources / "counts.json").read_text()) if (sources / "counts.json").exists() else {}
    with open(out / "corpus.txt", "w", encoding="utf-8") as corpus:
        for source, target in targets.items():
            total = counts.get(source, {}).get("words") or sum(len(line.split()) for line in open(sources / f"{source}.txt"))
            rate = min(1.0, target / total)
            row = {"words": 0, "paragraphs": 0, "removed_paragraphs": 0, "removed_words": 0,
                   "sample_rate": rate, "kept_words": 0, "kept_paragraphs": 0}
            for line in open(sources / f"{source}.txt", encoding="utf-8"):
                n_words = len(line.split())
                row["words"] += n_words
                row["paragraphs"] += 1
                hits = matcher.find(line)
                if hits:
                    row["removed_paragraphs"] += 1
                    row["removed_words"] += n_words
                    for sentence, name in hits:
                        report["heldout_found"][name][source].add(sentence)
                elif sampled(line, rate):
                    corpus.write(line if line.endswith("\n") else line + "\n")
                    row["kept_words"] += n_words
                    row["kept_paragraphs"] += 1
            report["sources"][source] = row
            print(source, row, flush=True)
    return report


def table(report: dict, heldout: dict[str, set]) -> str:
    lines = ["| source | paragraphs | words | paragraphs removed (overlap) | words removed | sample rate | words kept |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for source, row in report["sources"].items():
        lines.append(f"| {source} | {row['paragraphs']:,} | {row['words']:,} | {row['removed_paragraphs']:,} | "
                     f"{row['removed_words']:,} | {row['sample_rate']:.4f} | {row['kept_words']:,} |")
    sources = list(report["sources"])
    lines += ["", "| held-out set | sentences of 8+ words | " + " | ".join(f"found in {s}" for s in sources)
              + " | found anywhere |", "|---|---:|" + "---:|" * (len(sources) + 1)]
    for name, found in heldout.items():
        per_source = report["heldout_found"].get(name, {})
        anywhere = set().union(*per_source.values()) if per_source else set()
        cells = " | ".join(f"{len(per_source.get(s, ())):,}" for s in sources)
        lines.append(f"| {name} | {len(found):,} | {cells} | {len(anywhere):,} ({len(anywhere) / max(len(found), 1):.1%}) |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=Path, required=True, help="folder of build.py's <source>.txt files")
    parser.add_argument("--glue", type=Path, required=True, help="GLUE data folder (the dev sets to keep out)")
    parser.add_argument("--words", nargs="+", required=True, help="SOURCE=WORDS: words to sample from each source")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    targets = {key: float(value) for key, value in (item.split("=", 1) for item in args.words)}
    heldout = {**glue_heldout(args.glue), **squad_heldout()}
    out = make_dir(args.out)
    report = build(args.sources, targets, Matcher(heldout), out)
    write_text(out / "hygiene.md", table(report, heldout))
    found = {name: {source: len(s) for source, s in per_source.items()}
             for name, per_source in report["heldout_found"].items()}
    write_json(out / "hygiene.json", {"min_words": MIN_WORDS, "sources": report["sources"],
                                      "heldout_sentences": {name: len(s) for name, s in heldout.items()},
                                      "heldout_found": found})
    print(table(report, heldout))


if __name__ == "__main__":
    main()
