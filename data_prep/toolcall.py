"""ToolRL "rlla" tool-calling data -> verl parquet, for the tool-calling recipes.

Input: the raw ToolRL RL set (``dataset/rlla_4k_raw/rlla_rl.json`` of the ToolRL repository: a JSON list of
``{instruction, input, output}``; ``.jsonl`` and ``.parquet`` are read too). Each record becomes a prompt of
system(instruction) + user(input) with ``output`` as ground truth (data_source ``rlla``). Records are
shuffled as the paper's reference script does (NumPy's legacy ``RandomState(31415)`` shuffling the record
list) and the last 2% are held out as ``test.parquet``, the rest is ``train.parquet``.

Malformed records (a missing or empty field, a ground-truth ``<tool_call>`` line that is not a JSON object
with a string ``name`` and an object ``parameters``) are counted by reason; the run fails unless
``--skip-bad`` drops them. Run from any directory (shipped in the package as ``gdpo_verl.data_prep``):

    python -m gdpo_verl.data_prep.toolcall /path/to/rlla_rl.json    # -> ~/data/gdpo/toolcall/{train,test}.parquet
    python -m gdpo_verl.data_prep.toolcall rlla_rl.json --out data/toolcall --skip-bad
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pyarrow import ArrowException

from gdpo_verl.rewards.toolcall import ground_truth_calls

from .common import (
    BadRecord,
    ReadError,
    arg_parser,
    convert_report_write,
    fail,
    load_records,
    require_text,
    verl_row,
)

TASK = "toolcall"
DATA_SOURCE = "rlla"
SEED = 31415
TEST_FRACTION = 0.02


def shuffle_split(records: list[Any], seed: int = SEED, fraction: float = TEST_FRACTION) -> tuple[list, list]:
    """(train, test): the reference's ``np.random.seed(seed); np.random.shuffle(records)``, last part = test.

    The test part has ``int(n * fraction)`` records (80 of the 4000 rlla records), at least one when n >= 2.
    """
    shuffled = list(records)
    np.random.RandomState(seed).shuffle(shuffled)
    n_test = max(int(len(shuffled) * fraction), 1 if len(shuffled) >= 2 else 0)
    cut = len(shuffled) - n_test
    return shuffled[:cut], shuffled[cut:]


def to_row(split: str):
    """The record -> row function of one split."""

    def convert_record(record: Any, index: int) -> dict:
        instruction = require_text(record, "instruction")
        user = require_text(record, "input")
        output = require_text(record, "output")
        try:
            ground_truth_calls(output)
        except (ValueError, RecursionError) as e:
            raise BadRecord(f"output has a malformed <tool_call> block ({type(e).__name__})") from None
        prompt = [{"role": "system", "content": instruction}, {"role": "user", "content": user}]
        return verl_row(DATA_SOURCE, prompt, "tool_calling", output, split, index)

    return convert_record


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__.splitlines()[0], TASK)
    parser.add_argument("raw", type=Path, help="the raw ToolRL file (rlla_rl.json)")
    args = parser.parse_args(argv)
    try:  # the reference shuffle permutes the whole record list: this task holds its (4,000) records in memory
        records = list(load_records(args.raw, split="train", max_record_mb=args.max_record_mb))
    except (OSError, ValueError, ReadError, ArrowException) as e:
        fail(f"{args.raw}: cannot read: {type(e).__name__}: {e}")
    train_records, test_records = shuffle_split(records)
    sources = {"train": f"{args.raw} (shuffled train part)", "test": f"{args.raw} (shuffled test part)"}
    return convert_report_write(TASK, {"train": train_records, "test": test_records}, to_row, args, sources=sources)


if __name__ == "__main__":
    raise SystemExit(main())
