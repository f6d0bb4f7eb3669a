"""Eurus-2-RL code problems -> verl parquet, for the code-reasoning recipes (pass rate, bug-free, length).

Eurus-2-RL-Data (PRIME) is already in verl's format; this keeps its ``ability == "code"`` rows (math rows are
skipped and counted as such), checks each one and rewrites it in this project's schema: the chat prompt as
it is, the test cases (JSON ``{"inputs", "outputs", "fn_name"?}``) as ground truth, the original
data_source (``taco``, ``codecontests``, ``apps``, ...). ``validation`` becomes ``test.parquet``.

Sources: local parquet files given with ``--train-file`` and ``--test-file``; without them the Hugging Face
dataset ``PRIME-RL/Eurus-2-RL-Data`` is downloaded with ``datasets`` (needs network). Malformed code rows
(no chat prompt, test cases that are not JSON or not equally long non-empty input/output lists, call-based
tests whose inputs or outputs are not JSON, named with the record's index) are counted by reason; the run
fails unless ``--skip-bad`` drops them. Run from any directory (shipped in the package as ``gdpo_verl.data_prep``):

    python -m gdpo_verl.data_prep.eurus_code                                   # download -> ~/data/gdpo/code/
    python -m gdpo_verl.data_prep.eurus_code --train-file train.parquet --test-file validation.parquet --out data/code
"""

from __future__ import annotations

from typing import Any

from gdpo_verl.rewards.code_tests import parse_tests

from .common import BadRecord, convert_report_write, load_train_test, require_text, train_test_args, verl_row

TASK = "code"
HF_DATASET = "PRIME-RL/Eurus-2-RL-Data"
HF_SPLITS = {"train": "train", "test": "validation"}


def is_code(record: Any) -> bool:
    """Code rows, and unreadable ones (to be counted as malformed rather than skipped)."""
    return isinstance(record, BadRecord) or (isinstance(record, dict) and record.get("ability") == "code")


def chat(record: dict) -> list[dict[str, str]]:
    """The record's prompt as a list of {role, content}, or ``BadRecord``."""
    prompt = record.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise BadRecord("prompt is not a non-empty chat list")
    for message in prompt:
        if not isinstance(message, dict) or not all(isinstance(message.get(k), str) for k in ("role", "content")):
            raise BadRecord("a prompt message lacks a string role or content")
    return [{"role": m["role"], "content": m["content"]} for m in prompt]


def to_row(split: str):
    """The record -> row function of one split (code records only)."""

    def convert_record(record: Any, index: int) -> dict | None:
        if not is_code(record):
            return None  # the other tasks of the mix: not used here, not malformed
        data_source = require_text(record, "data_source")
        reward_model = record.get("reward_model")
        ground_truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
        if not isinstance(ground_truth, str):
            raise BadRecord("reward_model.ground_truth is not a string")
        try:
            parse_tests(ground_truth)
        except (ValueError, TypeError, RecursionError) as e:
            if "call-based" in str(e):
                raise BadRecord(str(e)) from None
            raise BadRecord(f"test cases are malformed ({type(e).__name__})") from None
        return verl_row(data_source, chat(record), "code", ground_truth, split, index)

    return convert_record


def main(argv: list[str] | None = None) -> int:
    args = train_test_args(
        __doc__.splitlines()[0],
        TASK,
        argv,
        "local Eurus-2-RL-Data train.parquet",
        "local Eurus-2-RL-Data validation.parquet",
    )
    raw, sources = load_train_test(args, {split: ((HF_DATASET,), hub_split) for split, hub_split in HF_SPLITS.items()})
    return convert_report_write(TASK, raw, to_row, args, sources=sources, left_out="non-code records")


if __name__ == "__main__":
    raise SystemExit(main())
