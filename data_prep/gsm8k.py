"""GSM8K -> verl parquet, for the three-reward math recipes (correctness, integer, format).

Each record ``{question, answer}`` becomes a prompt of system(the paper's ``SYSTEM_PROMPT``, asking for
``<think>...</think>\\n<answer>...</answer>``) + user(question), with the number after ``####`` in ``answer``
as ground truth (data_source ``openai/gsm8k``). Splits keep GSM8K's train/test split and order.

Sources: local files (``.parquet``, ``.jsonl`` or ``.json`` with ``question`` and ``answer`` columns) given
with ``--train-file`` and ``--test-file``; without them the Hugging Face dataset ``openai/gsm8k`` (config
``main``) is downloaded with ``datasets`` (needs network). The ground truth loses GSM8K's thousands separators
(``#### 1,080`` -> ``1080``, as verl's own GSM8K preprocessing does): with the comma no answer could score on both
correctness (string equality) and integer (all digits). Malformed records (a missing or empty field, an
answer without ``####`` or with nothing after it) are counted by reason; the run fails unless
``--skip-bad`` drops them. Run from any directory (shipped in the package as ``gdpo_verl.data_prep``):

    python -m gdpo_verl.data_prep.gsm8k                                        # download -> ~/data/gdpo/gsm8k/
    python -m gdpo_verl.data_prep.gsm8k --train-file train.jsonl --test-file test.jsonl --out data/gsm8k
"""

from __future__ import annotations

from typing import Any

from gdpo_verl.rewards.gsm8k import SYSTEM_PROMPT

from .common import BadRecord, convert_report_write, load_train_test, require_text, train_test_args, verl_row

TASK = "gsm8k"
DATA_SOURCE = "openai/gsm8k"
HF_DATASET = ("openai/gsm8k", "main")


def to_row(split: str):
    """The record -> row function of one split."""

    def convert_record(record: Any, index: int) -> dict:
        question = require_text(record, "question")
        answer = require_text(record, "answer")
        if "####" not in answer:
            raise BadRecord("answer has no '####' line")
        number = answer.split("####")[1].strip().replace(",", "")
        if not number:
            raise BadRecord("answer has nothing after '####'")
        prompt = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
        return verl_row(DATA_SOURCE, prompt, "math", number, split, index)

    return convert_record


def main(argv: list[str] | None = None) -> int:
    args = train_test_args(__doc__.splitlines()[0], TASK, argv, "local GSM8K train split", "local GSM8K test split")
    raw, sources = load_train_test(args, {"train": (HF_DATASET, "train"), "test": (HF_DATASET, "test")})
    return convert_report_write(TASK, raw, to_row, args, sources=sources)


if __name__ == "__main__":
    raise SystemExit(main())
