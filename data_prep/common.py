"""Shared pieces of the data-prep scripts: reading records, verl's row schema, bad-row accounting, atomic writes.

verl reads parquet rows with ``data_source`` (str), ``prompt`` (a chat: list of {role, content}), ``ability``
(str), ``reward_model`` ({style: "rule", ground_truth: str}) and ``extra_info`` (here {split, index}). Every
script here writes exactly that schema (``SCHEMA``), so the output does not depend on type inference.

Bad input: each script validates every record, counts malformed ones by reason and prints the counts with the
first few records of each reason (file and record index, or jsonl line); it fails (exit status 2, nothing written)
unless ``--skip-bad`` is given, which drops them. A jsonl line nested too deeply for the JSON parser or longer
than ``--max-record-mb`` is such a malformed record. A file that cannot be read (a symlink loop, a truncated
parquet, not UTF-8, a .json record that is not JSON, too deep or too long), a split left empty, and a failed
download each end the script with one line naming the file (or dataset) and the record, exit status 2. Nothing is
downloaded unless a split's local file is left out; give all of a task's files, or none.

Memory is bounded by the largest record, not the file: records are streamed in (``read_records``) and rows
streamed out (``SplitWriter``, a temporary file in the target directory moved into place with ``os.replace``
once every split is good, so a reader never sees a half-written file and a failed run writes nothing). The same
input gives byte-identical output on every run.
This module is a library; run a task's script instead (see ``data_prep/__init__.py``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

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
    parser.add_argument(
        "--max-record-mb", type=float, default=MAX_RECORD_MB, help="refuse larger records (bounds memory)"
    )
    return parser


MAX_RECORD_MB = 64  # a record larger than this is refused (a line of a .jsonl: a bad record; of a .json: the file)
CHUNK = 1 << 20  # characters read at a time from a .json file
PARQUET_BATCH = 256  # rows read at a time from a .parquet file


class ReadError(Exception):
    """The input cannot be read on (I/O error, truncated file, not UTF-8, not JSON): one line, exit status 2."""


def fail(message: str) -> NoReturn:
    """End the script with ``message`` on one line of stderr and exit status 2 (bad input; nothing written)."""
    print(message.replace("\n", " "), file=sys.stderr)
    raise SystemExit(2)


def _json_value(text: str | bytes, where: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        return BadRecord(f"{where} is nested too deeply to read (RecursionError)")
    except ValueError as e:
        return BadRecord(f"{where} is not JSON ({getattr(e, 'msg', type(e).__name__)})")


def _jsonl(path: Path, max_bytes: int) -> Iterator[Any]:
    with open(path, "rb") as f:
        for number in itertools.count(1):
            line = f.readline(max_bytes + 1)
            if not line:
                return
            if len(line) > max_bytes and not line.endswith(b"\n"):
                while (rest := f.readline(CHUNK)) and not rest.endswith(b"\n"):
                    pass  # skip the rest of the line without holding it
                yield BadRecord(f"line {number} is longer than {max_bytes >> 20} MB (--max-record-mb)")
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ReadError(f"line {number} is not UTF-8 ({e.reason})") from None
            del line
            if text.strip():
                value = _json_value(text, f"line {number}")
                del text  # memory holds the parsed record only
                yield value


def _json_list(path: Path, max_chars: int) -> Iterator[Any]:
    """The elements of a JSON list, one at a time: a buffer holds the current record and at most a chunk more."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8") as f:
        buf, pos, eof = "", 0, False

        def more(at_least: int = CHUNK) -> None:
            nonlocal buf, pos, eof
            chunk = f.read(max(at_least, CHUNK))
            eof = not chunk
            buf, pos = buf[pos:] + chunk, 0

        def next_char() -> str:
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in " \t\r\n":
                    pos += 1
                if pos < len(buf) or eof:
                    return buf[pos] if pos < len(buf) else ""
                more()

        more()
        first = next_char()
        if first != "[":
            raise ReadError(f"expected a JSON list of records, got {first!r} first")
        pos += 1
        for index in itertools.count():
            char = next_char()
            if char == "]":
                return
            if index:
                if char != ",":
                    raise ReadError(f"expected ',' or ']' after record {index - 1}, got {char!r}")
                pos += 1
                next_char()
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                    if end < len(buf) or eof:  # a number at the end of the buffer may go on in the next chunk
                        break
                except RecursionError:
                    raise ReadError(f"record {index} is nested too deeply to read (RecursionError)") from None
                except ValueError as e:
                    if eof:
                        raise ReadError(f"record {index} is not JSON ({getattr(e, 'msg', e)})") from None
                if len(buf) - pos > max_chars:
                    raise ReadError(f"record {index} is longer than {max_chars >> 20} MB (--max-record-mb)")
                more(len(buf) - pos)  # the buffer doubles: each record is parsed O(1) times on average
            pos = end
            yield value


def read_records(path: str | Path, max_record_mb: float = MAX_RECORD_MB) -> Iterator[Any]:
    """Records of a ``.json`` (a list), ``.jsonl`` (one per line) or ``.parquet`` file, streamed: memory holds
    one record (a batch of ``PARQUET_BATCH`` rows for parquet), never the file.

    A jsonl line that is not JSON, is nested too deeply or is longer than ``max_record_mb`` becomes a
    ``BadRecord`` in the stream, to be counted like any bad record. A file that cannot be read on raises
    ``ReadError`` (or ``OSError`` / ``pyarrow.ArrowException``) when the stream reaches the fault.
    """
    path = Path(path)
    max_bytes = int(max_record_mb * (1 << 20))
    if path.suffix == ".parquet":
        for batch in pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH):
            yield from batch.to_pylist()
    elif path.suffix == ".jsonl":
        yield from _jsonl(path, max_bytes)
    else:
        yield from _json_list(path, max_bytes)


def load_records(
    local: Path | None, *hf_dataset: str, split: str, max_record_mb: float = MAX_RECORD_MB
) -> Iterable[Any]:
    """Records of a local file (streamed, see ``read_records``), or of the Hugging Face dataset ``hf_dataset``
    (name[, config]) at ``split`` (memory-mapped by ``datasets``, iterated row by row)."""
    if local is not None:
        return read_records(local, max_record_mb)
    try:
        import datasets  # imported here: only the download path needs it

        return datasets.load_dataset(*hf_dataset, split=split)
    except Exception as e:  # offline, unknown dataset, ...
        message = str(e).splitlines()[0] if str(e) else ""
        fail(
            f"cannot download {'/'.join(hf_dataset)} ({split}): {type(e).__name__}: {message}; "
            "give local files instead (see --help)"
        )


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
        raw[split] = load_records(local, *dataset, split=hub_split, max_record_mb=args.max_record_mb)
        sources[split] = str(local or "/".join(dataset))
    return raw, sources


def all_or_none(args, *options: str) -> None:
    """Exit naming the options left out when only some of a task's local files are given (no silent download)."""
    given = [o for o in options if getattr(args, o) is not None]
    if given and len(given) != len(options):
        missing = ", ".join("--" + o.replace("_", "-") for o in options if o not in given)
        fail(f"{', '.join('--' + o.replace('_', '-') for o in given)} given without {missing}: give all "
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


WRITE_BATCH = 1024  # rows buffered before they go to the parquet file ...
WRITE_BATCH_BYTES = 8 << 20  # ... or this many characters of text, whichever comes first


class SplitWriter:
    """Rows of one split streamed to ``<out_dir>/.<split>.parquet.tmp-<pid>`` with ``SCHEMA``, ``WRITE_BATCH``
    rows or ``WRITE_BATCH_BYTES`` of text at a time; ``commit`` moves the file into place (``os.replace``),
    ``discard`` removes it."""

    def __init__(self, out_dir: Path, split: str):
        self.path = out_dir / f"{split}.parquet"
        self.tmp = out_dir / f".{split}.parquet.tmp-{os.getpid()}"
        self.rows: list[dict] = []
        self.count = self.size = 0
        self.writer: pq.ParquetWriter | None = None

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.count += 1
        self.size += sum(len(m["content"]) for m in row["prompt"]) + len(row["reward_model"]["ground_truth"])
        if len(self.rows) >= WRITE_BATCH or self.size >= WRITE_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.tmp, SCHEMA, compression="zstd")
        self.writer.write_table(pa.Table.from_pylist(self.rows, schema=SCHEMA))
        self.rows, self.size = [], 0

    def commit(self) -> None:
        self.flush()
        self.writer.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.tmp.unlink(missing_ok=True)


def convert(
    records: Iterable[Any], to_row: Callable[[Any, int], dict | None], bad: BadRecords, sink, source: str = ""
) -> tuple[int, int]:
    """Convert a stream of records: each valid record's row (``to_row(record, index)``, index counting valid rows)
    goes to ``sink.add``; a ``None`` row is a record the task does not use, left out without counting it as bad;
    reasons go into ``bad``, named by record index. Returns (records read, records left out)."""
    read = left_out = 0
    for i, record in enumerate(records):
        read += 1
        try:
            if isinstance(record, BadRecord):
                raise record
            row = to_row(record, sink.count)
            if row is None:
                left_out += 1
            else:
                sink.add(row)
        except BadRecord as e:
            bad.add(str(e), f"{source} record {i}".strip())
    return read, left_out


def report(task: str, total: int, bad: BadRecords, skip_bad: bool, counts: dict[str, int]) -> None:
    """Print what was read and kept; exit with status 2 (nothing written) on bad records without --skip-bad, or
    when a split has no usable record."""
    n_bad = sum(bad.values())
    print(f"{task}: {total} records read, {n_bad} malformed")
    for reason, count in bad.most_common():
        print(f"  {count:6d}  {reason}  (e.g. {', '.join(bad.where.get(reason, []))})")
    if n_bad and not skip_bad:
        fail(f"{task}: refusing to write with malformed records; fix the input or pass --skip-bad")
    empty = [name for name, count in counts.items() if not count]
    if empty:
        fail(f"{task}: no usable records in split {', '.join(empty)}; nothing written")
    print(f"{task}: " + ", ".join(f"{name} {count}" for name, count in counts.items()))


def convert_report_write(
    task: str,
    raw: dict[str, Iterable],
    to_row: Callable[[str], Callable[[Any, int], dict]],
    args,
    sources: dict[str, str] | None = None,
    left_out: str = "records",
) -> int:
    """The tail of every data-prep ``main``: stream each split's records through ``to_row(split)`` into a
    temporary parquet file, report (exit 2 on bad rows unless --skip-bad, or on an empty split, the temporary
    files removed), then move the files into place. ``sources`` names each split's input in the messages
    (default: the split's name); records ``to_row`` leaves out are counted as "<n> <left_out> skipped". A read
    error part-way is one line naming the input, exit 2, nothing written. Returns 0."""
    bad = BadRecords()
    sources = sources or {}
    sinks = {split: SplitWriter(args.out, split) for split in raw}
    total = skipped = 0
    try:
        for split, records in raw.items():
            source = sources.get(split, split)
            try:
                read, left = convert(records, to_row(split), bad, sinks[split], source)
            except (OSError, ValueError, ReadError, pa.ArrowException) as e:  # truncated, not UTF-8, not JSON, ...
                fail(f"{source}: cannot read: {type(e).__name__}: {e}")
            total, skipped = total + read, skipped + left
        if skipped:
            print(f"{task}: {skipped} {left_out} skipped")
        report(task, total, bad, args.skip_bad, {split: sink.count for split, sink in sinks.items()})
        for sink in sinks.values():
            sink.commit()
    finally:
        for sink in sinks.values():
            sink.discard()
    print(f"wrote {', '.join(str(sink.path) for sink in sinks.values())}")
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
