"""Rewards of the second CPU demo (``recipes/demo_toolcall_scale.yaml``): the paper's tool-calling reward STRUCTURE
on the toy addition task: a binary format reward in {0, 1} next to a partial-credit correctness reward in [-3, 3].

- ``format``: :func:`gdpo_verl.demo.rewards.format_reward` (free text without ``<``/``>`` then exactly one
  ``<a>N</a>``). It is NOT implied by correctness: ``"<a> 7 </a>"``, ``"<a>7</a>."`` or ``"<a>1</a><a>7</a>"`` are
  correct but badly formatted.
- ``correctness``: ToolRL-like partial credit on the last ``<a>...</a>``: -3 when it holds no integer,
  ``3 - min(6, 6 * |answer - truth| / scale)`` otherwise (``scale`` = 6: +3 exact, one point less per unit off,
  -3 from 6 off).

The scales differ by 6x, as in the paper's tool-calling task, which is what GDPO's per-reward normalization is
about. Pure functions, never raise, return floats. Examples: ``python -m doctest -v gdpo_verl/demo/scale_rewards.py``.
"""

from __future__ import annotations

import re
from typing import Any

from gdpo_verl.demo.rewards import extract_answer, format_reward
from gdpo_verl.rewards.inputs import text_inputs

CORRECTNESS_SCALE = 6.0
REWARD_KEYS = ("format", "correctness")
_INT_RE = re.compile(r"[+-]?\d+")
MAX_DIGITS = 100

__all__ = ["CORRECTNESS_SCALE", "REWARD_KEYS", "format_reward", "partial_correctness_reward"]


@text_inputs
def partial_correctness_reward(solution_str: str, ground_truth: Any, scale: float = CORRECTNESS_SCALE) -> float:
    """Partial credit in [-3, 3] for the integer in the last ``<a>...</a>`` (see the module docstring).

    >>> partial_correctness_reward("<a>7</a>", "7"), partial_correctness_reward("<a> 8 </a>", 7)
    (3.0, 2.0)
    >>> partial_correctness_reward("<a>1</a>", "7"), partial_correctness_reward("<a>18</a>", "0")
    (-3.0, -3.0)
    >>> partial_correctness_reward("7", "7"), partial_correctness_reward("<a>seven</a>", "7")
    (-3.0, -3.0)
    """
    answer = extract_answer(solution_str)
    if answer is None or len(answer) > MAX_DIGITS or not _INT_RE.fullmatch(answer):
        return -3.0  # no integer (or one too long to be an answer: int() of 4300+ digits raises)
    try:
        truth = int(ground_truth.strip())
    except ValueError:
        return -3.0
    return 3.0 - min(6.0, 6.0 * abs(int(answer) - truth) / float(scale))
