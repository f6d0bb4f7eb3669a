"""DeepScaleR (train) and AIME 2024 (test) -> verl parquet, for the math-with-a-length-budget recipes.

Each record ``{problem, answer}`` becomes a single user turn: the problem followed by DeepScaleR's
instruction "Let's think step by step and output the final answer within \\boxed{}." (no system prompt), with
the answer as ground truth. Train rows have data_source ``deepscaler``, test rows ``aime2024``.

Sources: local files (``.parquet``, ``.jsonl`` or ``.json`` with ``problem`` and ``answer`` columns) given
with ``--train-file`` and ``--test-file``; without them the Hugging Face datasets
``agentica-org/DeepScaleR-Preview-Dataset`` and ``HuggingFaceH4/aime_2024`` are downloaded with ``datasets``
(needs network). Malformed records (a missing or empty problem or answer) are counted by reason; the run
fails unless ``--skip-bad`` drops them. Run from any directory (shipped in the package as ``gdpo_verl.data_prep``):

    python -m gdpo_verl.data_prep.deepscaler                                   # download -> ~/data/gdpo/deepscaler/
    python -m gdpo_verl.data_prep.deepscaler --train-file dsr.parquet --test-file aime24.jsonl --out data/deepscaler
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from .common import BadRecord, convert_report_write, load_train_test, require_text, train_test_args, verl_row

TASK = "deepscaler"
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
SOURCES = {  # split -> (data_source, Hugging Face dataset, its split)
    "train": ("deepscaler", "agentica-org/DeepScaleR-Preview-Dataset", "train"),
    "test": ("aime2024", "HuggingFaceH4/aime_2024", "train"),
}


NOT_ANSWERS = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "true", "false"}


def answer_text(record: Any) -> str:
    """The answer as a string (AIME answers may be stored as numbers); a math answer must be finite.

    >>> answer_text({"answer": 42}), answer_text({"answer": " \\\\frac{1}{2} "})
    ('42', '\\\\frac{1}{2}')
    """
    value = record.get("answer") if isinstance(record, dict) else None
    if isinstance(value, bool):
        raise BadRecord("field 'answer' is a boolean, not a math answer")
    if isinstance(value, numbers.Number):
        if not math.isfinite(value):
            raise BadRecord("field 'answer' is not a finite number")
        return str(value)
    text = require_text(record, "answer").strip()
    if text.lower() in NOT_ANSWERS:
        raise BadRecord(f"field 'answer' is {text!r}, not a finite math answer")
    return text


def to_row(split: str):
    """The record -> row function of one split."""

    def convert_record(record: Any, index: int) -> dict:
        problem = require_text(record, "problem")
        answer = answer_text(record)
        if not answer:
            raise BadRecord("field 'answer' is empty")
        prompt = [{"role": "user", "content": f"{problem.strip()} {INSTRUCTION}"}]
        return verl_row(SOURCES[split][0], prompt, "math", answer, split, index)

    return convert_record


def main(argv: list[str] | None = None) -> int:
    args = train_test_args(__doc__.splitlines()[0], TASK, argv, "local DeepScaleR records", "local AIME 2024 records")
    raw, sources = load_train_test(
        args, {split: ((name,), hub_split) for split, (_, name, hub_split) in SOURCES.items()}
    )
    return convert_report_write(TASK, raw, to_row, args, sources=sources)


if __name__ == "__main__":
    raise SystemExit(main())
