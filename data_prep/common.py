"""Shared pieces of the data-prep scripts: reading records, verl's row schema, bad-row accounting, atomic writes.

verl reads parquet rows with ``data_source`` (str), ``prompt`` (a chat: list of {role, content}), ``ability``
(str), ``reward_model`` ({style: "rule", ground_truth: str}) and ``extra_info`` (here {split, index}). Every
script here writes exactly that schema (``SCHEMA``), so the output does not depend on type inference.

Bad input: each script validates every record, counts malformed ones by reason and prints the counts with the
first few records of each reason (file and record index, or jsonl line); it fails (exit status 2, nothing written)
unless ``--skip-bad`` is given, which drops them. A file that cannot be read, a split left empty, and a failed
download each end the script with one line naming the file (or dataset) and the fix. Nothing is downloaded unless
a split's local file is left out; give all of a task's files, or none. Output is written
to a temporary file in the target directory and moved into place with ``os.replace``, so a reader never sees
a half-written file; the same input gives byte-identical output on every run.
This module is a library; run a task's script instead (see ``data_prep/__init__.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

PROMPT_TYPE = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", PROMPT_TYPE),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", pa.struct([("split", pa.string()), ("index", pa.int64())])),
    ]
)


class BadRecord(ValueError):
    """A malformed input record; the message is its reason (counted, reported, dropped with --skip-bad)."""


def default_out_dir(task: str) -> Path:
    """``$GDPO_DATA/<task>``, by default ``~/data/gdpo/<task>`` (where the recipes look)."""
    return Path(os.environ.get("GDPO_DATA", Path.home() / "data" / "gdpo")) / task


def arg_parser(description: str, task: str) -> argparse.ArgumentParser:
    """A parser with the options every script shares: ``--out`` and ``--skip-bad``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=default_out_dir(task), help="output directory")
    parser.add_argument("--skip-bad", action="store_true", help="drop malformed records instead of failing")
    return parser


def read_records(path: str | Path) -> list[Any]:
    """Records of a ``.json`` (a list), ``.jsonl`` (one per line) or ``.parquet`` file.

    A jsonl line that is not JSON becomes a ``BadRecord`` in the list, to be counted like any bad record.
    """
    path = Path(path)
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        records: list[Any] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as e:
                records.append(BadRecord(f"line {number} is not JSON ({e.msg})"))
        return records
    data = json.loads(text)
    if not isinstance(data, list):
        raise SystemExit(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    return data


def load_records(local: Path | None, *hf_dataset: str, split: str) -> list[Any]:
    """Records of a local file, or of the Hugging Face dataset ``hf_dataset`` (name[, config]) at ``split``."""
    if local is not None:
        try:
            return read_records(local)
        except (OSError, ValueError, pa.ArrowException) as e:  # missing, truncated, not UTF-8, not JSON, ...
            raise SystemExit(f"{local}: cannot read: {type(e).__name__}: {e}") from None
    try:
        import datasets  # imported here: only the download path needs it

        return list(datasets.load_dataset(*hf_dataset, split=split))
    except Exception as e:  # offline, unknown dataset, ...
        message = str(e).splitlines()[0] if str(e) else ""
        raise SystemExit(
            f"cannot download {'/'.join(hf_dataset)} ({split}): {type(e).__name__}: {message}; "
            "give local files instead (see --help)"
        ) from None


def train_test_args(description: str, task: str, argv, train_help: str, test_help: str) -> argparse.Namespace:
    """The shared options plus ``--train-file``/``--test-file`` (both or neither: no silent download)."""
    parser = arg_parser(description, task)
    parser.add_argument("--train-file", type=Path, help=f"{train_help} (default: download)")
    parser.add_argument("--test-file", type=Path, help=f"{test_help} (default: download)")
    args = parser.parse_args(argv)
    all_or_none(args, "train_file", "test_file")
    return args


def load_train_test(args, hub: dict[str, tuple[tuple[str, ...], str]]):
    """(records, sources) per split: each split's local file (``--<split>-file``), or its Hugging Face dataset
    ``hub[split] = ((name[, config]), hub split)``."""
    raw, sources = {}, {}
    for split, (dataset, hub_split) in hub.items():
        local = getattr(args, f"{split}_file")
        raw[split] = load_records(local, *dataset, split=hub_split)
        sources[split] = str(local or "/".join(dataset))
    return raw, sources


def all_or_none(args, *options: str) -> None:
    """Exit naming the options left out when only some of a task's local files are given (no silent download)."""
    given = [o for o in options if getattr(args, o) is not None]
    if given and len(given) != len(options):
        missing = ", ".join("--" + o.replace("_", "-") for o in options if o not in given)
        raise SystemExit(f"{', '.join('--' + o.replace('_', '-') for o in given)} given without {missing}: give all "
                         "of them (local data), or none (download from the Hugging Face hub)")  # fmt: skip


def require_text(record: Any, key: str, allow_empty: bool = False) -> str:
    """``record[key]`` as a string, or ``BadRecord`` naming what is wrong."""
    if not isinstance(record, dict):
        raise BadRecord(f"record is a {type(record).__name__}, not an object")
    value = record.get(key)
    if not isinstance(value, str):
        raise BadRecord(f"field {key!r} is {'missing' if value is None else type(value).__name__}, not a string")
    if not allow_empty and not value.strip():
        raise BadRecord(f"field {key!r} is empty")
    return value


def verl_row(
    data_source: str, prompt: list[dict[str, str]], ability: str, ground_truth: str, split: str, index: int
) -> dict[str, Any]:
    """One parquet row in verl's format."""
    return {
        "data_source": data_source,
        "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"split": split, "index": index},
    }


EXAMPLES = 3  # records named per reason


class BadRecords(Counter):
    """Counts of malformed records by reason, with the first ``EXAMPLES`` places of each (``where``)."""

    def __init__(self):
        super().__init__()
        self.where: dict[str, list[str]] = {}

    def add(self, reason: str, where: str) -> None:
        self[reason] += 1
        places = self.where.setdefault(reason, [])
        if len(places) < EXAMPLES:
            places.append(where)


def convert(
    records: Iterable[Any], to_row: Callable[[Any, int], dict | None], bad: BadRecords, source: str = ""
) -> list[dict]:
    """Rows of the valid records (``to_row(record, index)``, index counting valid rows; a ``None`` row is a record
    the task does not use, left out without counting it as bad); reasons into ``bad``, named by record index."""
    rows: list[dict] = []
    for i, record in enumerate(records):
        try:
            if isinstance(record, BadRecord):
                raise record
            row = to_row(record, len(rows))
            if row is not None:
                rows.append(row)
        except BadRecord as e:
            bad.add(str(e), f"{source} record {i}".strip())
    return rows


def report(task: str, total: int, bad: BadRecords, skip_bad: bool, splits: dict[str, list]) -> None:
    """Print what was read and kept; exit with status 2 (nothing written) on bad records without --skip-bad, or
    when a split has no usable record."""
    n_bad = sum(bad.values())
    print(f"{task}: {total} records read, {n_bad} malformed")
    for reason, count in bad.most_common():
        print(f"  {count:6d}  {reason}  (e.g. {', '.join(bad.where.get(reason, []))})")
    if n_bad and not skip_bad:
        print(f"{task}: refusing to write with malformed records; fix the input or pass --skip-bad", file=sys.stderr)
        raise SystemExit(2)
    empty = [name for name, rows in splits.items() if not rows]
    if empty:
        print(f"{task}: no usable records in split {', '.join(empty)}; nothing written", file=sys.stderr)
        raise SystemExit(2)
    print(f"{task}: " + ", ".join(f"{name} {len(rows)}" for name, rows in splits.items()))


def convert_report_write(
    task: str,
    raw: dict[str, list],
    to_row: Callable[[str], Callable[[Any, int], dict]],
    args,
    total: int | None = None,
    sources: dict[str, str] | None = None,
) -> int:
    """The tail of every data-prep ``main``: convert each split, report (exit 2 on bad rows unless --skip-bad, or
    on an empty split), write. ``total`` is the number of records read (default: all records in ``raw``);
    ``sources`` names each split's input in the messages (default: the split's name). Returns 0."""
    bad = BadRecords()
    sources = sources or {}
    splits = {split: convert(records, to_row(split), bad, sources.get(split, split)) for split, records in raw.items()}
    report(task, sum(map(len, raw.values())) if total is None else total, bad, args.skip_bad, splits)
    write_splits(args.out, splits)
    return 0


def write_parquet(rows: list[dict], path: Path) -> None:
    """Write ``rows`` with ``SCHEMA`` atomically: a temporary file in the same directory, then ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_splits(out_dir: Path, splits: dict[str, list[dict]]) -> None:
    """``<out_dir>/<split>.parquet`` for each split, then print where they went."""
    for name, rows in splits.items():
        write_parquet(rows, out_dir / f"{name}.parquet")
    print(f"wrote {', '.join(str(out_dir / f'{name}.parquet') for name in splits)}")
