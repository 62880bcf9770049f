"""``polymask predict`` and ``polymask embed``: argument parsing and wiring (imports stay light until a
command runs, so that building the parser does not load torch)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Callable

from polymask.builtin_models import checkpoint_path
from polymask.cli_options import add_plugin_option
from polymask.errors import ConfigError, DataError

PREDICT_FORMATS = (".csv", ".tsv", ".parquet")
EMBED_FORMATS = (".npy", ".parquet")


def _write_atomically(out: Path, write: Callable[[Path], Any]) -> None:
    """Write ``out`` through a temporary file renamed into place: a crash or a full disk leaves no half file."""
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DataError(f"cannot write {out}: {exc.strerror or exc}") from None
    except BaseException:  # a value the format cannot hold, Ctrl-C: no half-written temporary file stays behind
        tmp.unlink(missing_ok=True)
        raise


def _check_suffix(out: Path, formats: tuple[str, ...]) -> None:
    if out.suffix.lower() not in formats:
        raise DataError(f"--out {out}: give a file ending in {' or '.join(formats)}")


def _require_a_usable_row(data: Path, reasons: list[str | None]) -> None:
    """A file none of whose rows can be used is a user fault (a wrong delimiter, the wrong column), not an
    output of empty predictions: fail naming the file and the first row's reason."""
    if reasons and all(reason is not None for reason in reasons):
        raise DataError(f"{data}: none of its {len(reasons)} rows is usable; the first: {reasons[0]}")


def _input_table(args: argparse.Namespace, applied: Any) -> Any:
    from polymask.inference.table import read_input_table

    return read_input_table(args.data, args.column, applied.column_defaults, len(applied.input_columns),
                            applied.table_layout)


def _arrow_table(frame: Any, out: Path) -> Any:
    """``frame`` as an Arrow table for ``out``; a column Parquet cannot hold (a JSON-lines column with numbers
    in some rows and strings in others, or an integer beyond int64) is one line naming it."""
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataError(f"cannot write {out}: {'; '.join(map(str, exc.args))} (a Parquet column holds one type; "
                        f"write .csv instead)") from None
    except OverflowError:
        columns = ", ".join(str(name) for name in frame.columns if _overflows(frame[name]))
        raise DataError(f"cannot write {out}: an integer beyond Parquet's int64 in column {columns} (write .csv "
                        f"instead)") from None


def _overflows(values: Any) -> bool:
    """Whether a column holds an integer Arrow cannot hold (an object column keeps JSON's integers unbounded)."""
    import pyarrow as pa

    try:
        pa.array(values, from_pandas=True)
    except OverflowError:
        return True
    return False


def _write_parquet(table: Any, out: Path) -> None:
    """Write ``table`` to ``out``; a column type Parquet lacks (a JSON-lines column of empty objects) is one line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        _write_atomically(out, lambda tmp: pq.write_table(table, tmp))
    except pa.ArrowNotImplementedError as exc:
        raise DataError(f"cannot write {out}: {exc} (write .csv instead)") from None


def _write_table(frame: Any, out: Path) -> None:
    if out.suffix.lower() == ".parquet":
        _write_parquet(_arrow_table(frame, out), out)
    else:
        separator = "\t" if out.suffix.lower() == ".tsv" else ","
        _write_atomically(out, lambda tmp: frame.to_csv(tmp, index=False, sep=separator))


def cmd_predict(args: argparse.Namespace) -> int:
    import pandas as pd

    from polymask.inference.columns import REASON
    from polymask.inference.model import load_model

    _check_suffix(args.out, PREDICT_FORMATS)
    model = load_model(args.model, args.device)
    table = _input_table(args, model)
    applied = model.predict_inputs(table.inputs, table.reasons, args.batch_size, progress=not args.quiet)
    _require_a_usable_row(args.data, [reason if isinstance(reason, str) else None for reason in applied.frame[REASON]])
    clashes = [name for name in applied.frame.columns if name in table.frame.columns]
    if clashes:
        raise DataError(f"{args.data} already has the column(s) {clashes} that predict writes; rename them")
    _write_table(pd.concat([table.frame.reset_index(drop=True), applied.frame], axis=1), args.out)
    cut = applied.cut or f"truncated to {model.max_len} tokens"
    print(f"polymask predict: {len(table.inputs)} rows: {applied.predicted} predicted, {applied.rejected} rejected "
          f"(see the reason column), {applied.truncated} {cut}, {applied.unknown} with tokens outside the "
          f"vocabulary{_averaged_note(model)}{_headerless_note(table)} -> {args.out}")
    return 0


def _headerless_note(table: Any) -> str:
    """Say so when the file's first line was read as a record (the model's task files have no header row)."""
    if not table.headerless:
        return ""
    return f"; no header row: columns named as the model's task files ({', '.join(table.frame.columns)})"


def _averaged_note(model: Any) -> str:
    """How a model that averages over each record's variants predicted (as it was chosen at fine-tuning)."""
    if not model.averaged_over:
        return ""
    return f"; each prediction is the mean over the record's variants under {', '.join(model.averaged_over)}"


def _embedder(folder: Path, device: str, modality: str | None) -> Any:
    from polymask.builtin_models import not_found
    from polymask.checkpoints.finetuned import is_finetuned
    from polymask.checkpoints.pretrained import read_checkpoint
    from polymask.inference.model import HFFolderEncoder, PretrainedEncoder, load_model
    from polymask.modalities import MODALITIES
    from polymask.tasks.finetune.hf_folder import is_hf_folder, is_polymask_folder

    if is_hf_folder(folder):
        if modality is None:
            raise ConfigError(f"{folder} is a Hugging Face folder: say which modality reads its records "
                              f"(--modality {', '.join(MODALITIES.names())})")
        return HFFolderEncoder(folder, MODALITIES.get(modality)(), device)
    if modality is not None:
        if not Path(folder).exists():
            raise ConfigError(not_found(folder))
        what = "reads records with its own modality" if is_polymask_folder(folder) else "has no config.json"
        raise ConfigError(f"--modality is for a Hugging Face folder (config.json); {folder} {what}")
    return load_model(folder, device) if is_finetuned(folder) else PretrainedEncoder(read_checkpoint(folder), device)


def rows_file(out: Path) -> Path:
    """The side file of an .npy embedding: which input row each vector belongs to."""
    return out.with_name(f"{out.stem}.rows.csv")


def cmd_embed(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from polymask.inference.columns import REASON

    _check_suffix(args.out, EMBED_FORMATS)
    embedder = _embedder(args.checkpoint, args.device, args.modality)
    table = _input_table(args, embedder)
    encoded = embedder.encode_inputs(table.inputs, table.reasons)
    _require_a_usable_row(args.data, encoded.reasons)
    vectors = embedder.embed_encoded(encoded, args.pool, args.batch_size, progress=not args.quiet)
    accepted = encoded.accepted
    frame = table.frame.reset_index(drop=True)
    if args.out.suffix.lower() == ".npy":
        vector_of = pd.array([None] * len(vectors), dtype="Int64")
        vector_of[accepted] = np.arange(len(accepted))
        rows = pd.DataFrame({"row": np.arange(len(vectors)), "vector": vector_of, REASON: encoded.reasons})

        def write_vectors(tmp: Path) -> None:
            with open(tmp, "wb") as handle:
                np.save(handle, vectors[accepted])

        _write_atomically(args.out, write_vectors)
        _write_table(pd.concat([rows, frame.drop(columns=table.columns)], axis=1), rows_file(args.out))
        where = f"{args.out} ({len(accepted)} x {vectors.shape[1]}); rows: {rows_file(args.out)}"
    else:
        import pyarrow as pa

        frame = frame.assign(**{REASON: encoded.reasons})
        embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])
        _write_parquet(_arrow_table(frame, args.out).append_column("embedding", embedding), args.out)
        where = f"{args.out} ({len(vectors)} rows x {vectors.shape[1]})"
    pooling = args.pool or embedder.pooling
    print(f"polymask embed: {len(vectors)} rows: {len(accepted)} embedded ({pooling} pooling), "
          f"{len(vectors) - len(accepted)} rejected, {encoded.truncated} truncated to {embedder.max_len} tokens"
          f"{_headerless_note(table)} -> {where}")
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, required=True,
                        help="records: .csv/.tsv/.jsonl/.parquet (every column kept), .smi, FASTA or .txt (a record "
                             "per line), optionally gzipped")
    parser.add_argument("--column", nargs="+",
                        help="input column(s) of a table (default: the model's own input columns, else the modality's "
                             "usual names such as smiles, sequence, text)")
    parser.add_argument("--batch-size", type=int, default=64, help="records per batch")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present, as train), cpu or cuda[:N]")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_plugin_option(parser, "the model's custom modality or task kind")


def add_commands(sub: argparse._SubParsersAction) -> None:
    predict = sub.add_parser(
        "predict", help="apply a fine-tuned model to new records",
        description="Apply a fine-tuned model (a seed-N/ folder written by finetune or benchmark) to a file of records. "
                    "The output has one row per input row, in input order: the input's own columns, then the "
                    "predictions (regression: predicted_<target> in original units; classification: prob_<class> "
                    "and predicted_<label>; several binary tasks: prob_<task> each; span/question answering: "
                    "predicted_answer from question and context columns), then 'reason', set where the modality "
                    "rejected the record (its prediction cells are empty).")
    predict.add_argument("--model", type=Path, required=True, help="fine-tuned model folder (has finetuned.json)")
    predict.add_argument("--out", type=Path, required=True, help="predictions: .csv, .tsv or .parquet")
    _common(predict)
    predict.set_defaults(handler=cmd_predict)

    embed = sub.add_parser(
        "embed", help="one vector per record from a pretrained or fine-tuned encoder",
        description="Embed records with the encoder of a pretraining run or checkpoint (MLM, MAE-LM, ExLM) or of a "
                    "fine-tuned model: the final hidden states pooled into one vector per record, in input order. "
                    ".parquet: one row per input row (the input's own columns, 'reason', and 'embedding'; a rejected "
                    "record's embedding is all NaN). .npy: only the embedded records' vectors, and a side file "
                    "X.rows.csv giving, for every input row, its vector's index in X.npy (empty if rejected), why, "
                    "and the input's other columns (ids).")
    embed.add_argument("--checkpoint", type=checkpoint_path, required=True,
                       help="pretraining run or checkpoint folder, a built-in model's name (polymask models), a "
                            "fine-tuned model folder, or a local Hugging Face model folder (with --modality)")
    embed.add_argument("--modality",
                       help="for a Hugging Face folder: the modality that checks and normalises its records (smiles, "
                            "dna, text), handed to the folder's own tokenizer as plain text (default: none; a polymask "
                            "checkpoint reads with its own)")
    embed.add_argument("--out", type=Path, required=True, help="X.npy (+ X.rows.csv) or X.parquet")
    embed.add_argument("--pool", choices=["cls", "mean"],
                       help="cls: the [CLS] state; mean: the mean over the record's tokens ([CLS] and [SEP] included, "
                            "padding excluded) (default: the fine-tuned model's own pooling; mean for a pretrained "
                            "checkpoint or a Hugging Face folder)")
    _common(embed)
    embed.set_defaults(handler=cmd_embed)
