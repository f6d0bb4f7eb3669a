"""Math answer correctness for the DeepScaleR task: the final ``\\boxed{}`` answer against the ground truth.

- ``correctness_reward``: 1.0 when the last ``\\boxed{...}`` of the final answer equals the ground truth, else
  0.0. The final answer is the text after the last ``</think>``; a response without ``</think>`` scores 0
  (the reasoning models of this task always close their thinking; ``require_think_end=False`` lifts that).
  Equality is tested on normalized strings (spaces, ``\\left``/``\\right``, ``\\dfrac``, ``\\text{}``, degrees,
  percent, dollar signs, thousands separators and a leading ``x =`` removed), then numerically for plain
  numbers and ``\\frac{a}{b}`` / ``a/b`` (relative tolerance 1e-9). There is no symbolic algebra: two
  different forms of one expression (``\\sqrt{8}`` vs ``2\\sqrt{2}``) score 0.
- ``compute_score``: verl's custom-reward form of the task, with the length budget of
  ``gdpo_verl.rewards.length`` counted only for a correct answer (the paper's condition).

All functions are pure and never raise on any response; every scan is linear.
Run the examples: ``python -m doctest -v gdpo_verl/rewards/math_answer.py``.
"""

from __future__ import annotations

import re
from typing import Any

from gdpo_verl.rewards.length import DEFAULT_MAX_TOKENS, length_reward

REWARD_KEYS = ("correctness", "length")

_TEXT_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_THOUSANDS_RE = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_FRAC_RE = re.compile(r"(-?)\\frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}")
_SLASH_RE = re.compile(r"(-?[\d.]+)/(-?[\d.]+)")
_LHS_RE = re.compile(r"[A-Za-z]\w?=")
_REMOVE = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\$", "$", "^{\\circ}", "^\\circ", "\\%", "%", " ")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced; None if there is none.

    >>> last_boxed("so \\\\boxed{1} or rather \\\\boxed{\\\\frac{1}{2}}.")
    '\\\\frac{1}{2}'
    """
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    open_brace = text.find("{", start)
    if open_brace < 0 or text[start:open_brace] not in ("\\boxed", "\\fbox", "\\boxed "):
        return None
    depth = 0
    for index in range(open_brace, len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_brace + 1 : index]
    return None


def normalize(answer: str) -> str:
    """A canonical string for comparing final answers.

    >>> normalize("x = \\\\dfrac{3}{4}\\\\text{ cm}")
    '\\\\frac{3}{4}cm'
    """
    text = answer.strip().replace("\n", "")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = _TEXT_RE.sub(r"\1", text)
    for token in _REMOVE:
        text = text.replace(token, "")
    if _THOUSANDS_RE.fullmatch(text):
        text = text.replace(",", "")
    lhs = _LHS_RE.match(text)
    if lhs and "=" not in text[lhs.end() :]:
        text = text[lhs.end() :]
    return text.rstrip(".")


def _as_number(text: str) -> float | None:
    for pattern, sign_group in ((_FRAC_RE, True), (_SLASH_RE, False)):
        found = pattern.fullmatch(text)
        if found:
            groups = found.groups()
            sign = -1.0 if sign_group and groups[0] == "-" else 1.0
            num, den = groups[-2:]
            try:
                return sign * float(num) / float(den)
            except (ValueError, ZeroDivisionError):
                return None
    try:
        return float(text) if len(text) < 64 else None
    except ValueError:
        return None


def answers_match(predicted: str, ground_truth: str) -> bool:
    """Normalized string equality, else numeric equality for plain numbers and simple fractions.

    >>> answers_match("0.5", "\\\\frac{1}{2}"), answers_match("1,000", "1000"), answers_match("3", "4")
    (True, True, False)
    """
    a, b = normalize(predicted), normalize(ground_truth)
    if a == b:
        return bool(a)
    x, y = _as_number(a), _as_number(b)
    return x is not None and y is not None and abs(x - y) <= 1e-9 * max(1.0, abs(y))


def correctness_reward(solution_str: str, ground_truth: str, require_think_end: bool = True) -> float:
    """1.0 when the final ``\\boxed{}`` answer (after ``</think>``) matches the ground truth, else 0.0.

    >>> correctness_reward("<think>1+1=2</think> The answer is \\\\boxed{2}.", "2")
    1.0
    >>> correctness_reward("The answer is \\\\boxed{2}.", "2")  # no </think>: the reasoning never closed
    0.0
    """
    if "</think>" in solution_str:
        final = solution_str.rpartition("</think>")[2]
    elif require_think_end:
        return 0.0
    else:
        final = solution_str
    predicted = last_boxed(final)
    expected = last_boxed(ground_truth) if "\\boxed" in ground_truth else ground_truth
    if predicted is None or expected is None:
        return 0.0
    return 1.0 if answers_match(predicted, expected) else 0.0


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    tokenizer: str | None = None,
    max_chars: int | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl custom reward; ``score`` applies the paper's condition (length counts only when correct).

    >>> compute_score("deepscaler", "<think>ok</think> \\\\boxed{7}", "7", max_chars=50)
    {'score': 2.0, 'correctness': 1.0, 'length': 1.0}
    """
    correct = correctness_reward(solution_str, ground_truth)
    length = length_reward(solution_str, extra_info, max_tokens, tokenizer, max_chars)
    return {"score": correct + (length if correct >= 1.0 else 0.0), "correctness": correct, "length": length}
