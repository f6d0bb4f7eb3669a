"""The toy multi-reward task of the CPU demo: single-digit addition answered as ``<a>N</a>``.

A prompt is one user turn ``"3+4="``; a good response is ``<a>7</a>``. Its three rewards live in
``gdpo_verl.demo.rewards`` (format, correctness, brevity). There are 100 distinct problems (a, b in 0..9):
the train split repeats each a few times in a seeded shuffle, the val split is a seeded sample of them.
Val shares its facts with train on purpose: the demo measures whether RL sharpens a half-learned policy
(format, brevity, picking the right sum), not generalization.

Rows follow verl's RL parquet schema: ``data_source``, ``prompt`` (chat list of ``{role, content}``),
``ability``, ``reward_model: {style: "rule", ground_truth}``, ``extra_info: {split, index}``.
Write both splits with ``python -m gdpo_verl.demo.task OUT_DIR``.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gdpo_verl.demo.rewards import ANSWER_CLOSE, ANSWER_OPEN

DATA_SOURCE = "gdpo_verl/toy_addition"
ABILITY = "arithmetic"
MAX_OPERAND = 9


@dataclass(frozen=True)
class Problem:
    """One addition problem ``a + b``."""

    a: int
    b: int

    @property
    def question(self) -> str:
        """The user turn, e.g. ``"3+4="``."""
        return f"{self.a}+{self.b}="

    @property
    def answer(self) -> str:
        """The ground truth, e.g. ``"7"``."""
        return str(self.a + self.b)

    @property
    def ideal_response(self) -> str:
        """The response that earns every reward, e.g. ``"<a>7</a>"``."""
        return f"{ANSWER_OPEN}{self.answer}{ANSWER_CLOSE}"


def all_problems() -> list[Problem]:
    """The 100 problems ``a + b`` with a, b in 0..9, in a fixed order."""
    return [Problem(a, b) for a in range(MAX_OPERAND + 1) for b in range(MAX_OPERAND + 1)]


def split_problems(seed: int, train_repeats: int = 3, val_size: int = 32) -> tuple[list[Problem], list[Problem]]:
    """Seeded splits: train = every problem ``train_repeats`` times, shuffled; val = ``val_size`` distinct ones."""
    rng = random.Random(seed)
    train = all_problems() * train_repeats
    rng.shuffle(train)
    val = rng.sample(all_problems(), val_size)
    return train, val


def to_row(problem: Problem, split: str, index: int) -> dict:
    """One verl RL row for ``problem``."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": problem.question}],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": problem.answer},
        "extra_info": {"split": split, "index": index},
    }


def to_frame(problems: list[Problem], split: str) -> pd.DataFrame:
    """verl RL rows for ``problems``, indexed 0..len-1 within the split."""
    return pd.DataFrame([to_row(p, split, i) for i, p in enumerate(problems)])


def write_splits(out_dir: str | Path, seed: int = 0, train_repeats: int = 3, val_size: int = 32) -> tuple[Path, Path]:
    """Write ``train.parquet`` and ``val.parquet`` under ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train, val = split_problems(seed, train_repeats, val_size)
    paths = out / "train.parquet", out / "val.parquet"
    to_frame(train, "train").to_parquet(paths[0], index=False)
    to_frame(val, "val").to_parquet(paths[1], index=False)
    return paths


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for path in write_splits(args.out_dir, seed=args.seed):
        print(f"wrote {path} ({len(pd.read_parquet(path))} rows)")
