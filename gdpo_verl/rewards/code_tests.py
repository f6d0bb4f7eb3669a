"""Rewards of the code-reasoning task (Eurus-2-RL code problems): pass rate and bug-free, both in [0, 1].

Ground truth: JSON (a string or a dict) ``{"inputs": [...], "outputs": [...], "fn_name": optional}``:

- without ``fn_name`` (standard input): input ``i`` is the program's stdin, output ``i`` its expected stdout;
  outputs match when their non-blank lines have equal whitespace-separated tokens (numbers within 1e-6);
- with ``fn_name`` (call-based): input ``i`` holds one JSON argument per line (or is the argument list) and
  output ``i`` the JSON result of ``fn_name`` (a top-level function, else a method of ``class Solution``);
  a result equal to the output, or to its only element, passes (as in verl's reference checker).

The program is the last fenced ```` ```python ```` block of the final answer (after the last ``</think>``),
else the last untagged fenced block. It runs ONLY through ``gdpo_verl.rewards.sandbox`` (local sandbox, or the
sandbox-fusion service when ``sandbox_fusion_url`` is set), at most ``max_tests`` tests of it.

- ``pass_rate_reward``: the fraction of those tests whose run succeeded with the expected output.
- ``bug_free_reward``: 1 minus the bug ratio, the fraction of tests whose run crashed (an exception, a syntax
  error, a non-zero exit, a time-out or a resource limit); a wrong answer is not a bug.
- Without a program both are 0.0 (nothing passes, and "no runnable program" is a bug).
- Length: use ``gdpo_verl.rewards.length.length_reward``; the paper counts it only when every test passes,
  which the recipe expresses as ``condition: {on: pass_rate, threshold: 1.0}``.

The two rewards share one execution: results are cached per (program, tests, settings). Malformed ground
truth raises ``ValueError`` (a data error); a failing sandbox raises ``SandboxError``; nothing in a
response raises. Run the examples (they execute code in the sandbox) with
``python -m pytest --doctest-modules gdpo_verl/rewards/code_tests.py`` (``python -m doctest`` would import the
standard library's ``code`` module instead of this file).
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import secrets
from collections.abc import Callable
from typing import Any, NamedTuple

from gdpo_verl.rewards.sandbox import Limits, run_tests

REWARD_KEYS = ("pass_rate", "bug_free")
_PYTHON_TAGS = ("python", "python3", "py")
_CALL_HARNESS = """import json, sys
request = json.loads(sys.stdin.readline())
namespace = {{"__name__": "solution"}}
exec(compile({code!r}, "solution.py", "exec"), namespace)
target = namespace.get({fn!r})
if target is None and "Solution" in namespace:
    target = getattr(namespace["Solution"](), {fn!r})
result = target(*request["args"])
sys.stdout.write("\\n" + request["nonce"] + json.dumps(result, default=repr) + "\\n")
"""


def extract_code(solution_str: str) -> str | None:
    """The last ```python block of the final answer, else its last untagged block; None without one.

    >>> extract_code("<think>```python\\ndraft()\\n```</think>Final:\\n```python\\nprint(1)\\n```")
    'print(1)\\n'
    """
    final = solution_str.rpartition("</think>")[2]
    parts = final.split("```")
    untagged = None
    for block in reversed(parts[1:-1:2]):  # the complete fenced blocks, last first
        tag, _, body = block.partition("\n")
        if tag.strip().lower() in _PYTHON_TAGS:
            return body
        if untagged is None and not tag.strip():
            untagged = body
    return untagged


def _lines_text(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def parse_tests(ground_truth: str | dict) -> tuple[list[Any], list[Any], str | None]:
    """(inputs, outputs, fn_name) of a ground truth; ``ValueError`` when it is malformed.

    >>> parse_tests('{"inputs": ["1 2\\\\n"], "outputs": ["3\\\\n"]}')
    (['1 2\\n'], ['3\\n'], None)
    """
    data = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    if not isinstance(data, dict):
        raise ValueError(f"code ground truth must be a JSON object, got {type(data).__name__}")
    inputs, outputs, fn_name = data.get("inputs"), data.get("outputs"), data.get("fn_name")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs) or not inputs:
        raise ValueError("code ground truth needs equally long, non-empty 'inputs' and 'outputs' lists")
    if fn_name is not None and not isinstance(fn_name, str):
        raise ValueError("code ground truth 'fn_name' must be a string")
    return inputs, outputs, fn_name or None


def _token_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6)


def stdout_matches(actual: str, expected: str) -> bool:
    """Non-blank lines with equal whitespace-separated tokens; numeric tokens within 1e-6.

    >>> stdout_matches("3 4\\n\\n5.0000001\\n", "3  4\\n5")
    True
    """
    got = [line.split() for line in actual.splitlines() if line.strip()]
    want = [line.split() for line in expected.splitlines() if line.strip()]
    if len(got) != len(want) or any(len(a) != len(b) for a, b in zip(got, want)):
        return False
    return all(_token_equal(a, b) for row_a, row_b in zip(got, want) for a, b in zip(row_a, row_b))


def _call_args(raw: Any) -> list[Any]:
    if isinstance(raw, list):
        return raw
    return [json.loads(line) for line in str(raw).strip().split("\n") if line.strip()]


def _call_result(stdout: str, nonce: str) -> tuple[bool, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(nonce):
            try:
                return True, json.loads(line[len(nonce) :])
            except ValueError:
                return False, None
    return False, None


@functools.lru_cache(maxsize=1024)
def _evaluate(code: str, tests_key: str, settings: tuple) -> tuple[int, int, int]:
    """(passed, buggy, total) of ``code`` on the first ``max_tests`` tests; cached for the sibling reward."""
    max_tests, cpu_s, wall_s, memory_mb, budget_s, sandbox_fusion_url = settings
    inputs, outputs, fn_name = parse_tests(tests_key)
    inputs, outputs = inputs[:max_tests], outputs[:max_tests]
    limits = Limits(cpu_s=cpu_s, wall_s=wall_s, memory_mb=memory_mb)
    if fn_name is None:
        program, stdins = code, [_lines_text(raw) for raw in inputs]
    else:
        nonce = "@gdpo-result-" + secrets.token_hex(8) + "@"
        program = _CALL_HARNESS.format(code=code, fn=fn_name)
        stdins = [json.dumps({"nonce": nonce, "args": _call_args(raw)}) + "\n" for raw in inputs]
    results = run_tests(program, stdins, limits, sandbox_fusion_url=sandbox_fusion_url, budget_s=budget_s)
    passed = buggy = 0
    for result, expected in zip(results, outputs):
        if not result.ok:
            buggy += 1
        elif fn_name is None:
            passed += stdout_matches(result.stdout, _lines_text(expected))
        else:
            found, value = _call_result(result.stdout, nonce)
            want = json.loads(expected) if isinstance(expected, str) else expected
            single = isinstance(want, list) and len(want) == 1 and value == want[0]
            passed += int(found and (value == want or single))
    return passed, buggy, len(results)


class Evaluation(NamedTuple):
    """Outcome of one program on its tests: counts, and the two rewards derived from them."""

    passed: int
    buggy: int
    total: int

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total

    @property
    def bug_free(self) -> float:
        return 1.0 - self.buggy / self.total


def evaluate(
    solution_str: str,
    ground_truth: str | dict,
    sandbox_fusion_url: str | None = None,
    max_tests: int = 16,
    cpu_s: int = 4,
    wall_s: float = 6.0,
    memory_mb: int = 1024,
    budget_s: float = 60.0,
) -> Evaluation:
    """(passed, buggy, total) of the response's program; (0, 1, 1) when the response has no program.

    ``max_tests`` tests at most, each with ``cpu_s`` CPU seconds, ``wall_s`` wall seconds and ``memory_mb`` of
    address space; ``budget_s`` bounds them all (tests it leaves no time for count as time-outs, i.e. bugs).
    """
    code = extract_code(solution_str)
    tests_key = ground_truth if isinstance(ground_truth, str) else json.dumps(ground_truth, sort_keys=True)
    parse_tests(tests_key)  # malformed ground truth is a data error even when the response has no program
    if code is None:
        return Evaluation(0, 1, 1)
    return Evaluation(*_evaluate(code, tests_key, (max_tests, cpu_s, wall_s, memory_mb, budget_s, sandbox_fusion_url)))


def _with_settings_of_evaluate(reward: Callable[..., float]) -> Callable[..., float]:
    """Give ``reward(solution_str, ground_truth, **settings)`` the signature of ``evaluate`` (one place for it):
    the multi-reward manager and the config checks read the settings a reward accepts from its signature."""
    reward.__signature__ = inspect.signature(evaluate).replace(return_annotation=float)
    return reward


@_with_settings_of_evaluate
def pass_rate_reward(solution_str: str, ground_truth: str | dict, **settings: Any) -> float:
    """Fraction of tests passed (settings: see ``evaluate``).

    >>> tests = '{"inputs": ["2\\\\n", "5\\\\n"], "outputs": ["4\\\\n", "10\\\\n"]}'
    >>> pass_rate_reward("```python\\nprint(int(input()) * 2)\\n```", tests)
    1.0
    >>> pass_rate_reward("```python\\nprint(4)\\n```", tests)  # right on the first test only
    0.5
    """
    return evaluate(solution_str, ground_truth, **settings).pass_rate


@_with_settings_of_evaluate
def bug_free_reward(solution_str: str, ground_truth: str | dict, **settings: Any) -> float:
    """1 minus the fraction of tests whose run crashed (settings: see ``evaluate``).

    >>> tests = '{"inputs": ["2\\\\n", "0\\\\n"], "outputs": ["5\\\\n", "0\\\\n"]}'
    >>> bug_free_reward("```python\\nprint(10 // int(input()))\\n```", tests)  # 10 // 0 raises on test 2
    0.5
    >>> bug_free_reward("```python\\nprint(7)\\n```", tests)  # wrong answers, but no crash
    1.0
    """
    return evaluate(solution_str, ground_truth, **settings).bug_free


_SETTINGS = tuple(inspect.signature(evaluate).parameters)[2:]


def compute_score(
    data_source: str, solution_str: str, ground_truth: str | dict, extra_info: dict | None = None, **kwargs: Any
) -> dict[str, float]:
    """verl custom reward: ``{"score": pass_rate + bug_free, "pass_rate": ..., "bug_free": ...}``.

    ``kwargs`` named like ``evaluate``'s settings are used; any other keyword verl passes is ignored.

    >>> compute_score("taco", "no code here", '{"inputs": ["1"], "outputs": ["1"]}')
    {'score': 0.0, 'pass_rate': 0.0, 'bug_free': 0.0}
    """
    settings = {key: value for key, value in kwargs.items() if key in _SETTINGS}
    result = evaluate(solution_str, ground_truth, **settings)
    scores = {"pass_rate": result.pass_rate, "bug_free": result.bug_free}
    return {"score": sum(scores.values()), **scores}
