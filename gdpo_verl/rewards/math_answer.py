"""Math answer correctness for the DeepScaleR task: the final ``\\boxed{}`` answer against the ground truth.

- ``correctness_reward``: 1.0 when the last ``\\boxed{...}`` of the final answer is mathematically equal to the
  ground truth, else 0.0. The final answer is the text after the last ``</think>``; a response without
  ``</think>`` scores 0 (the reasoning models of this task always close their thinking; ``require_think_end=False``
  lifts that). Equality is Hugging Face ``math-verify``: both sides are parsed from LaTeX into SymPy
  (``math_verify.parse``) and compared symbolically and numerically (``math_verify.verify``), so
  ``\\frac12 = \\frac{1}{2} = 0.5``, ``2\\sqrt2 = \\sqrt{8}``, ``2^{10} = 1024``, ``\\text{(A)} = A``,
  ``x = 5`` matches ``5`` and ``10\\text{ cm}`` matches ``10``. Before parsing, a percent sign is dropped
  (``50\\%`` matches ``50``, not ``0.5``). Identical strings (spaces ignored) match without parsing.
- ``compute_score``: verl's custom-reward form of the task, with the length budget of
  ``gdpo_verl.rewards.length`` counted only for a correct answer (the paper's condition).

Hard time limit: math-verify's own time-outs use ``signal.alarm``, which works only in a process's main thread
(verl calls reward functions from worker threads) and cannot interrupt a long computation inside C code
(``9^{9^{9^9}}``). So every parse+verify runs in a helper process (``python -c`` of this module's ``serve``,
started on first use and reused); a call that overruns ``timeout_s`` kills that process (the next call starts a
fresh one) and scores 0.0. Starting a helper (importing SymPy) takes about a second and does not count against
``timeout_s``. Any other failure also scores 0.0: these functions never raise on any response (only when the
helper cannot start at all, an environment problem, ``HelperUnavailable`` is raised).
Run the examples: ``python -m doctest -v gdpo_verl/rewards/math_answer.py``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gdpo_verl.rewards.inputs import text_inputs
from gdpo_verl.rewards.length import DEFAULT_MAX_TOKENS, length_reward

REWARD_KEYS = ("correctness", "length")
DEFAULT_TIMEOUT_S = 10.0  # per answer comparison (parse both sides + verify), wall clock
STARTUP_TIMEOUT_S = 120.0  # a helper's start (Python + SymPy imports) on a loaded machine
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding gdpo_verl/, for the helper
_PERCENT = ("\\%", "%")


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


def _prepare(answer: str) -> str:
    """The answer as math-verify reads it: boxed, percent signs dropped."""
    for token in _PERCENT:
        answer = answer.replace(token, "")
    return "\\boxed{" + answer.strip() + "}"


def _verify_here(predicted: str, ground_truth: str, limit_s: int) -> bool:
    """math-verify in this process (the helper's main thread, where its signal time-outs work)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    gold = parse(_prepare(ground_truth), config, parsing_timeout=limit_s)
    pred = parse(_prepare(predicted), config, parsing_timeout=limit_s)
    return bool(gold and pred and verify(gold, pred, timeout_seconds=limit_s))


def serve() -> None:
    """The helper's loop: one JSON request per stdin line, one JSON answer per stdout line.

    Request ``{"pred": str, "gold": str, "limit": int}`` -> ``{"equal": bool}`` or ``{"error": str}``.
    """
    import logging

    logging.disable(logging.WARNING)  # math-verify logs every time-out and parse failure
    import math_verify  # noqa: F401  (import before answering "ready", so start-up is not a call's time)

    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            answer = {"equal": _verify_here(request["pred"], request["gold"], int(request["limit"]))}
        except BaseException as e:  # noqa: BLE001 - the helper must answer every request
            answer = {"error": f"{type(e).__name__}: {e}"[:500]}
        out.write(json.dumps(answer) + "\n")
        out.flush()


class HelperUnavailable(RuntimeError):
    """The helper process cannot start: an environment problem (math-verify missing), never a response's fault."""


class _Helper:
    """One helper process; ``ask`` returns its answer or raises ``TimeoutError`` (the caller kills it)."""

    def __init__(self) -> None:
        code = (
            f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
            "from gdpo_verl.rewards.math_answer import serve; serve()"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        if self._read(STARTUP_TIMEOUT_S) != {"ready": True}:
            self.kill()
            raise HelperUnavailable("the math-verify helper process did not start (is math-verify installed?)")

    def _read(self, timeout_s: float) -> dict:
        ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, timeout_s))
        if not ready:
            raise TimeoutError(f"no answer within {timeout_s:.1f} s")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the math-verify helper process exited")
        return json.loads(line)

    def ask(self, predicted: str, ground_truth: str, timeout_s: float) -> dict:
        limit = max(1, int(timeout_s / 3))  # math-verify's own limit per parse/verify; ours kills at timeout_s
        self.process.stdin.write(json.dumps({"pred": predicted, "gold": ground_truth, "limit": limit}) + "\n")
        self.process.stdin.flush()
        return self._read(timeout_s)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


_IDLE: list[_Helper] = []  # helpers not in use; a thread takes one (or starts one) per call
_LOCK = threading.Lock()


def _verify(predicted: str, ground_truth: str, timeout_s: float) -> bool:
    with _LOCK:
        helper = _IDLE.pop() if _IDLE else None
    if helper is None:
        helper = _Helper()
    start = time.monotonic()
    try:
        answer = helper.ask(predicted, ground_truth, timeout_s)
    except BaseException:
        helper.kill()  # overran (or broke): never reuse a helper that may still be computing
        if time.monotonic() - start >= timeout_s:
            return False
        raise
    with _LOCK:
        _IDLE.append(helper)
    return bool(answer.get("equal", False))


def answers_match(predicted: str, ground_truth: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether two final answers are mathematically equal (math-verify); False on a time-out or any failure.

    >>> answers_match("0.5", "\\\\frac{1}{2}"), answers_match("2\\\\sqrt2", "\\\\sqrt{8}"), answers_match("3", "4")
    (True, True, False)
    """
    if not predicted.strip() or not ground_truth.strip():
        return False
    if "".join(predicted.split()) == "".join(ground_truth.split()):
        return True
    try:
        return _verify(predicted, ground_truth, timeout_s)
    except HelperUnavailable:
        raise
    except Exception:
        return False


@text_inputs
def correctness_reward(
    solution_str: str, ground_truth: str, require_think_end: bool = True, timeout_s: float = DEFAULT_TIMEOUT_S
) -> float:
    """1.0 when the final ``\\boxed{}`` answer (after ``</think>``) equals the ground truth, else 0.0.

    >>> correctness_reward("<think>1+1=2</think> The answer is \\\\boxed{2}.", "2")
    1.0
    >>> correctness_reward("<think>half</think> \\\\boxed{\\\\frac12}", "0.5")
    1.0
    >>> correctness_reward("The answer is \\\\boxed{2}.", "2")  # no </think>: the reasoning never closed
    0.0
    """
    try:
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
        return 1.0 if answers_match(predicted, expected, timeout_s) else 0.0
    except HelperUnavailable:
        raise  # a broken environment must not pass for wrong answers
    except Exception:
        return 0.0


@text_inputs
def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_chars: int | None = None,
    response_length: int | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl custom reward; ``score`` applies the paper's condition (length counts only when correct).

    The token count is ``response_length``, else ``extra_info["response_length"]``; or give ``max_chars``.

    >>> compute_score("deepscaler", "<think>ok</think> \\\\boxed{7}", "7", max_chars=50)
    {'score': 2.0, 'correctness': 1.0, 'length': 1.0}
    """
    if response_length is None:
        response_length = (extra_info or {}).get("response_length")
    correct = correctness_reward(solution_str, ground_truth)
    length = length_reward(solution_str, response_length, max_tokens, max_chars)
    return {"score": correct + (length if correct >= 1.0 else 0.0), "correctness": correct, "length": length}
