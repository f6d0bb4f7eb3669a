"""Rewards of the toy addition task (``gdpo_verl.demo.task``): format, correctness, brevity.

The policy sees ``"3+4="`` and should answer ``<a>7</a>``. Three rewards, each in {0, 1}:

- ``format``: the whole response is optional free text (no angle brackets) followed by exactly one
  answer tag holding a whole number, e.g. ``"<a>7</a>"`` or ``"3+4=7 <a>7</a>"``.
- ``correctness``: the text inside the LAST ``<a>...</a>`` equals the ground truth (string equality after
  stripping whitespace, as the paper's GSM8K reward does).
- ``brevity``: the response has at most ``BRIEF_MAX_CHARS`` characters. Meant to be conditioned on
  correctness (paper Eq. 8: it counts only where ``correctness >= 1``); the project's estimator applies
  that condition, this module scores it unconditioned.

All functions are pure, never raise on any string input, and return floats.
``compute_score`` follows verl's custom reward convention and returns the per-reward dict that the
project's multi-reward manager forwards to the estimator. Run the examples with
``python -m doctest -v gdpo_verl/demo/rewards.py``.
"""

from __future__ import annotations

import re
from typing import Any

from gdpo_verl.rewards.inputs import text_inputs

ANSWER_OPEN = "<a>"
ANSWER_CLOSE = "</a>"
BRIEF_MAX_CHARS = 10  # "<a>18</a>" (the longest concise answer) has 9; "3+4=7 <a>7</a>" has 14
REWARD_KEYS = ("format", "correctness", "brevity")

_FORMAT_RE = re.compile(r"[^<>]*<a>-?\d+</a>", re.DOTALL)


def extract_answer(solution_str: str) -> str | None:
    """Text inside the last ``<a>...</a>`` of the response, stripped; ``None`` when there is none.

    >>> extract_answer("3+4=7 <a> 7 </a>")
    '7'
    >>> extract_answer("<a>1</a><a>2</a>"), extract_answer("<a>7"), extract_answer("")
    ('2', None, None)
    """
    text, last, position = str(solution_str), None, 0
    while True:  # the non-overlapping <a>...</a> pairs from the left, as re.findall would take them: linear time
        start = text.find(ANSWER_OPEN, position)
        end = text.find(ANSWER_CLOSE, start + len(ANSWER_OPEN)) if start >= 0 else -1
        if end < 0:
            return last
        last, position = text[start + len(ANSWER_OPEN) : end].strip(), end + len(ANSWER_CLOSE)


@text_inputs
def format_reward(solution_str: str, ground_truth: Any = None) -> float:
    """1.0 when the stripped response is free text without ``<``/``>`` followed by one ``<a>N</a>``, else 0.0.

    ``ground_truth`` is unused (the format does not depend on it); it keeps the signatures uniform.

    >>> format_reward("<a>7</a>"), format_reward("3+4=7 <a>7</a>"), format_reward("  <a>12</a>\\n")
    (1.0, 1.0, 1.0)
    >>> format_reward("7"), format_reward("<a>7"), format_reward("<a>7</a> done"), format_reward("<a>x</a>")
    (0.0, 0.0, 0.0, 0.0)
    >>> format_reward("<a>1</a><a>2</a>")
    0.0
    """
    return 1.0 if _FORMAT_RE.fullmatch(str(solution_str).strip()) else 0.0


@text_inputs
def correctness_reward(solution_str: str, ground_truth: Any) -> float:
    """1.0 when the last ``<a>...</a>`` holds ``ground_truth`` (compared as stripped strings), else 0.0.

    >>> correctness_reward("<a>7</a>", "7"), correctness_reward("3+4=7 <a>7</a>", 7)
    (1.0, 1.0)
    >>> correctness_reward("<a>8</a>", "7"), correctness_reward("7", "7"), correctness_reward("<a>07</a>", "7")
    (0.0, 0.0, 0.0)
    """
    answer = extract_answer(solution_str)
    return 1.0 if answer is not None and answer == str(ground_truth).strip() else 0.0


@text_inputs
def brevity_reward(solution_str: str, ground_truth: Any = None, max_chars: int = BRIEF_MAX_CHARS) -> float:
    """1.0 when the stripped response has at most ``max_chars`` characters, else 0.0.

    Unconditioned here; the project conditions it on correctness (paper Eq. 8), so a short wrong answer
    earns nothing from it in training. ``ground_truth`` is unused.

    >>> brevity_reward("<a>7</a>"), brevity_reward("<a>18</a>"), brevity_reward("3+4=7 <a>7</a>")
    (1.0, 1.0, 0.0)
    >>> brevity_reward("abc", max_chars=2)
    0.0
    """
    return 1.0 if len(str(solution_str).strip()) <= max_chars else 0.0


@text_inputs
def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **kwargs: Any
) -> dict[str, float]:
    """verl custom reward entry: ``{"score": sum of the three, "format", "correctness", "brevity"}``.

    ``data_source``, ``extra_info`` and extra keyword arguments are accepted and ignored. ``score`` is the
    plain unconditioned sum (what a single-reward GRPO run would see); every sample returns the same keys,
    as verl's reward loop requires.

    >>> compute_score("gdpo_verl/toy_addition", "<a>7</a>", "7")
    {'score': 3.0, 'format': 1.0, 'correctness': 1.0, 'brevity': 1.0}
    >>> compute_score("gdpo_verl/toy_addition", "3+4=8 <a>8</a>", "7")
    {'score': 1.0, 'format': 1.0, 'correctness': 0.0, 'brevity': 0.0}
    """
    rewards = {
        "format": format_reward(solution_str, ground_truth),
        "correctness": correctness_reward(solution_str, ground_truth),
        "brevity": brevity_reward(solution_str, ground_truth),
    }
    return {"score": sum(rewards.values()), **rewards}
