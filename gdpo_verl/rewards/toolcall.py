"""Rewards of the tool-calling task (ToolRL "rlla" data): format in {0, 1} and correctness in [-3, 3].

The model answers ``<think>...</think>`` then ``<tool_call>`` (one JSON object per line, keys ``name`` and
``parameters``) and/or ``<response>...</response>``. The ground truth is the reference answer in that format.

- ``format_reward``: 1.0 when the whole response has exactly the tag layout of the ground truth (think +
  response, think + tool_call, think + tool_call + response, or think only) with each of those tags present
  exactly once, else 0.0.
- ``correctness_reward``: 0.0 when the ground truth calls no tool; -3.0 when the response's tool-call block is
  missing or a line of it is not a JSON object with a string ``name`` and an object ``parameters``; +3.0 when
  the list of calls equals the ground truth's; otherwise ``6 * S / S_max - 3`` with
  ``S_max = 1 + sum over ground-truth calls of (1 + number of parameters)`` and
  ``S = match(gt names, predicted names) + sum over ground-truth calls of the best unused predicted call
  with the same name: match(gt parameter keys, its keys) + number of keys whose values are equal``, where
  ``match(a, b)`` is 1 for equal lists, 0 if either is empty, else ``|a & b| / (|a| + |b| - |a & b|)``
  (multiset intersection). A predicted call is used only when its score is positive.

Details as in the paper's reference implementation (ToolRL's ``rlla`` reward, used by NVlabs verl-GDPO): the
response is stripped (and cut out of a Qwen/Llama chat transcript if one is passed); the predicted block is the
text between the first ``<tool_call>`` and the next ``</tool_call>``; the layout's ``<tool_call>`` and
``<response>`` tags must appear exactly once (``<think>`` tags are not counted); a predicted line must be a JSON
object with a hashable ``name``, and only a line whose name is one of the ground truth's must have an object
``parameters`` (the reference reads the parameters of same-name calls only; anything else is -3, as the
reference's catch-all gives).

``strict=True`` (component kwargs ``{strict: true}``; default False, the reference) adds two rules, each closing a
reward hack the reference leaves open:

- format: ``<think>`` and ``</think>`` must also appear exactly once. The reference's lazy ``<think>.*?</think>``
  lets a second ``</think>`` through, so text outside the reasoning (``<think>a</think> free text </think>``)
  still earns format 1.
- correctness: every predicted line must be a call with a string ``name`` and an object ``parameters``. The
  reference only reads the names of calls to tools the ground truth does not use, so padding the block with
  non-executable lines such as ``{"name": "x"}`` costs only part of the name match (the right call plus one
  such line scores 2.0 of 3) instead of marking the block malformed (-3).

All functions are pure, never raise on any response string, and take well under a millisecond per KB (tag counts
are checked before the layout regex, so the regex never backtracks quadratically). Run the examples:
``python -m doctest -v gdpo_verl/rewards/toolcall.py``.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from typing import Any

from gdpo_verl.rewards.inputs import text_inputs

REWARD_KEYS = ("format", "correctness")
MAX_CORRECTNESS, MIN_CORRECTNESS = 3.0, -3.0

_THINK = ("<think>", "</think>")
_TOOL_CALL = ("<tool_call>", "</tool_call>")
_RESPONSE = ("<response>", "</response>")
_LAYOUTS = {  # (ground truth has tool_call, has response) -> (layout regex, tags that must appear once: reference)
    (False, True): (re.compile(r"<think>.*?</think>\n<response>.*?</response>$", re.DOTALL), _RESPONSE),
    (True, False): (re.compile(r"<think>.*?</think>\n<tool_call>\n.*?\n</tool_call>$", re.DOTALL), _TOOL_CALL),
    (True, True): (
        re.compile(r"<think>.*?</think>\n<tool_call>\n.*?\n</tool_call>\n<response>.*?</response>$", re.DOTALL),
        _TOOL_CALL + _RESPONSE,
    ),
    (False, False): (re.compile(r"<think>.*?</think>$", re.DOTALL), ()),
}


def _assistant_text(solution_str: str) -> str:
    """The assistant's turn, stripped; a plain decoded response passes through (stripped)."""
    for start, end in (
        ("<|im_start|>assistant", "<|im_end|>"),
        ("<|start_header_id|>assistant<|end_header_id|>", "<|eot_id|>"),
    ):
        if start in solution_str:
            return solution_str.rpartition(start)[2].partition(end)[0].strip()
    return solution_str.strip()


@text_inputs
def format_reward(solution_str: str, ground_truth: str, strict: bool = False) -> float:
    """1.0 when the response has the ground truth's tag layout, its call/response tags exactly once (``strict``:
    the think tags too), else 0.0.

    >>> gt = '<think>plan</think>\\n<tool_call>\\n{"name": "f", "parameters": {}}\\n</tool_call>'
    >>> format_reward('<think>ok</think>\\n<tool_call>\\n{"name": "f", "parameters": {}}\\n</tool_call>', gt)
    1.0
    >>> format_reward('<think>ok</think>\\n<response>hi</response>', gt)
    0.0
    >>> format_reward('<think>a</think>b</think>\\n<tool_call>\\n{}\\n</tool_call>', gt, strict=True)
    0.0
    """
    response = _assistant_text(solution_str)
    pattern, tags = _LAYOUTS[("<tool_call>" in ground_truth, "<response>" in ground_truth)]
    if any(response.count(tag) != 1 for tag in (_THINK + tags if strict else tags)):
        return 0.0
    return 1.0 if pattern.match(response) else 0.0


def match_score(a: list, b: list) -> float:
    """Similarity of two lists as multisets: 1 if equal, 0 if either is empty, else |a & b| / |a | b|.

    >>> match_score(["x", "y"], ["y", "z"])  # intersection {y}: 1 / (2 + 2 - 1)
    0.3333333333333333
    """
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    common = sum((Counter(a) & Counter(b)).values())
    return common / (len(a) + len(b) - common)


@functools.lru_cache(maxsize=4096)
def ground_truth_calls(ground_truth: str) -> list[dict[str, Any]] | None:
    """The ground truth's calls, or None when it calls no tool. Malformed ground truth is a data error."""
    if "<tool_call>" not in ground_truth:
        return None
    block = ground_truth.split("<tool_call>")[1].split("</tool_call>")[0].strip()
    calls = [json.loads(line) for line in block.split("\n")]
    if not all(_is_call(call) for call in calls):
        raise ValueError(f"ground truth has a malformed tool call: {block[:200]!r}")
    return calls


def _is_call(call: Any) -> bool:
    return isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("parameters"), dict)


def _is_named(call: Any) -> bool:
    """The reference's own requirement on every predicted line: an object whose ``name`` can be counted."""
    return isinstance(call, dict) and "name" in call and isinstance(call["name"], (str, int, float, bool, type(None)))


def _predicted_calls(response: str, strict: bool) -> list[dict[str, Any]] | None:
    """The response's calls, or None when the block is missing or a line is not a call (``strict``: not a valid
    call with a string name and object parameters; else: not an object with a hashable name)."""
    if "<tool_call>" not in response or "</tool_call>" not in response:
        return None
    block = response.split("<tool_call>", 2)[1].split("</tool_call>", 1)[0].strip()
    calls = []
    for line in block.split("\n"):
        try:
            call = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not (_is_call(call) if strict else _is_named(call)):
            return None
        calls.append(call)
    return calls


def tool_call_score(gt_calls: list[dict[str, Any]], pred_calls: list[dict[str, Any]]) -> tuple[float, float]:
    """(S, S_max) of the module docstring, for valid calls.

    >>> tool_call_score([{"name": "f", "parameters": {"a": 1, "b": 2}}], [{"name": "f", "parameters": {"a": 1}}])
    (2.5, 4.0)
    """
    score = match_score([c["name"] for c in gt_calls], [c["name"] for c in pred_calls])
    score_max = 1.0
    used: set[int] = set()
    for gt in gt_calls:
        gt_params = gt["parameters"]
        score_max += 1.0 + len(gt_params)
        best, best_index = 0.0, -1
        for index, pred in enumerate(pred_calls):
            if index in used or pred["name"] != gt["name"]:
                continue
            params = pred["parameters"]
            value_hits = sum(1.0 for key, value in gt_params.items() if key in params and params[key] == value)
            candidate = match_score(list(gt_params), list(params)) + value_hits
            if candidate > best:
                best, best_index = candidate, index
        if best_index >= 0:
            used.add(best_index)
            score += best
    return score, score_max


@text_inputs
def correctness_reward(solution_str: str, ground_truth: str, strict: bool = False) -> float:
    """Tool-call correctness in [-3, 3] (module docstring; ``strict``: every predicted line a valid call).

    >>> gt = '<think>x</think>\\n<tool_call>\\n{"name": "weather", "parameters": {"city": "Paris"}}\\n</tool_call>'
    >>> correctness_reward(gt.replace("x", "sunny?"), gt)  # the same call: exact match
    3.0
    >>> correctness_reward(gt.replace("Paris", "Rome"), gt)  # S = 1 (names) + 1 (keys) + 0 (values), S_max = 3
    1.0
    >>> correctness_reward('<think>x</think>\\n<response>It is sunny.</response>', gt)  # no block
    -3.0
    >>> padded = gt.replace("}}", '}}\\n{"name": "x"}')  # the right call and a line no tool could run
    >>> correctness_reward(padded, gt), correctness_reward(padded, gt, strict=True)
    (2.0, -3.0)
    """
    gt_calls = ground_truth_calls(ground_truth)
    if gt_calls is None:
        return 0.0
    try:
        pred_calls = _predicted_calls(_assistant_text(solution_str), strict)
        if pred_calls is None:
            return MIN_CORRECTNESS
        if pred_calls == gt_calls:
            return MAX_CORRECTNESS
        gt_names = {call["name"] for call in gt_calls}
        if any(call["name"] in gt_names and not isinstance(call.get("parameters"), dict) for call in pred_calls):
            return MIN_CORRECTNESS  # the reference reads a same-name call's parameters as an object
        score, score_max = tool_call_score(gt_calls, pred_calls)
    except RecursionError:  # absurdly nested values compared deeply: treated like a malformed call
        return MIN_CORRECTNESS
    return (MAX_CORRECTNESS - MIN_CORRECTNESS) * score / score_max + MIN_CORRECTNESS


@text_inputs
def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    strict: bool = False,
    **kwargs: Any,
) -> dict[str, float]:
    """verl custom reward: ``{"score": format + correctness, "format": ..., "correctness": ...}``.

    >>> compute_score("rlla", "<think>hi</think>", "<think>greet</think>")
    {'score': 1.0, 'format': 1.0, 'correctness': 0.0}
    """
    fmt = format_reward(solution_str, ground_truth, strict=strict)
    correct = correctness_reward(solution_str, ground_truth, strict=strict)
    return {"score": fmt + correct, "format": fmt, "correctness": correct}
