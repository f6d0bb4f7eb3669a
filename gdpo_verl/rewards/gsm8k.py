"""Rewards of the GSM8K math task with three rewards (the paper's trl-GDPO run): correctness, integer, format.

The system prompt (``SYSTEM_PROMPT``, the paper's, typo included) asks for
``<think>reasoning</think>\\n<answer>integer</answer>``. The answer is the text after the LAST ``<answer>``
up to the next ``</answer>``, stripped (the whole response when there is no ``<answer>``).

- ``correctness_reward``: 1.0 when the answer string equals the ground truth (the text after ``####`` in
  GSM8K's solution; a ground truth without ``####`` is used as it is), else 0.0.
- ``integer_reward``: 1.0 when the answer is all digits (``str.isdigit``, as in the reference), else 0.0.
- ``format_reward``: 1.0 when the whole response matches ``^<think>.*?</think>\\n<answer>.*?</answer>$``
  (DOTALL) and holds exactly one ``<answer>`` and one ``</answer>``, else 0.0.

The response is scored as decoded (no stripping), like the reference. All functions are pure and never raise
on any response; the tag counts are checked before the regex, which then runs in linear time.
Run the examples: ``python -m doctest -v gdpo_verl/rewards/gsm8k.py``.
"""

from __future__ import annotations

import re
from typing import Any

from gdpo_verl.rewards.inputs import text_inputs

REWARD_KEYS = ("correctness", "integer", "format")

SYSTEM_PROMPT = """
You are a helpful AI assistant.

For every request, you should carefully think through the math problem step by step, then provide the fianl answer in integer format.

Steps for Each Request:
1. Think: Provide detailed, step-by-step reasoning, calculations, or derivations.
2. Produce Final Answer: After step-by-step reasoning, output the final answer in integer format.

Output Format:
<think>Your thoughts and reasoning</think>
<answer>Final answer in integer format</answer>

Important Notes:
1. You must include your reasoning steps inside <think>.
2. You must always output the Final Answer within <answer> after the reasoning steps is done.
3. You should consistently work through the solution step by step before giving the final answer.
4. The final answer can only be an integer.
"""  # noqa: E501 - the paper's prompt, verbatim

_FORMAT_RE = re.compile(r"<think>.*?</think>\n<answer>.*?</answer>$", re.DOTALL)


def extract_answer(text: str) -> str:
    """Text after the last ``<answer>`` up to the next ``</answer>``, stripped.

    >>> extract_answer("<think>6*7</think>\\n<answer> 42 </answer>")
    '42'
    """
    return text.rpartition("<answer>")[2].partition("</answer>")[0].strip()


def ground_truth_answer(ground_truth: str) -> str:
    """The number after ``####`` in a GSM8K solution; any other string, stripped.

    >>> ground_truth_answer("She pays 3 * 4 = 12 dollars.\\n#### 12")
    '12'
    """
    return ground_truth.split("####")[1].strip() if "####" in ground_truth else ground_truth.strip()


@text_inputs
def correctness_reward(solution_str: str, ground_truth: str) -> float:
    """1.0 when the extracted answer equals the ground-truth number as a string.

    >>> correctness_reward("<think>6*7</think>\\n<answer>42</answer>", "42")
    1.0
    >>> correctness_reward("<think>6*7</think>\\n<answer>42.0</answer>", "42")  # string equality, not numeric
    0.0
    """
    return 1.0 if extract_answer(solution_str) == ground_truth_answer(ground_truth) else 0.0


@text_inputs
def integer_reward(solution_str: str, ground_truth: str) -> float:
    """1.0 when the extracted answer is all digits (no sign, no decimal point).

    >>> integer_reward("<answer>17</answer>", "3"), integer_reward("<answer>-3</answer>", "-3")
    (1.0, 0.0)
    """
    return 1.0 if extract_answer(solution_str).isdigit() else 0.0


@text_inputs
def format_reward(solution_str: str, ground_truth: str) -> float:
    """1.0 for ``<think>...</think>\\n<answer>...</answer>`` with one answer tag pair, else 0.0.

    >>> format_reward("<think>easy</think>\\n<answer>4</answer>", "4")
    1.0
    >>> format_reward("<think>easy</think> <answer>4</answer>", "4")  # a space where the newline belongs
    0.0
    """
    if solution_str.count("<answer>") != 1 or solution_str.count("</answer>") != 1:
        return 0.0
    return 1.0 if _FORMAT_RE.match(solution_str) else 0.0


@text_inputs
def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> dict[str, float]:
    """verl custom reward: ``{"score": sum, "correctness": ..., "integer": ..., "format": ...}``.

    >>> compute_score("openai/gsm8k", "<think>2+2</think>\\n<answer>4</answer>", "4")
    {'score': 3.0, 'correctness': 1.0, 'integer': 1.0, 'format': 1.0}
    """
    scores = {
        "correctness": correctness_reward(solution_str, ground_truth),
        "integer": integer_reward(solution_str, ground_truth),
        "format": format_reward(solution_str, ground_truth),
    }
    return {"score": sum(scores.values()), **scores}
