"""Rewards of the code-reasoning task (Eurus-2-RL code problems): pass rate and bug-free, both in [0, 1].

Ground truth: JSON (a string or a dict) ``{"inputs": [...], "outputs": [...], "fn_name": optional}``:

- without ``fn_name`` (standard input): input ``i`` is the program's stdin, output ``i`` its expected stdout;
  outputs match as a contest judge compares them (testlib ``wcmp``/``rcmp6``, see ``stdout_matches``): the
  same ASCII-whitespace-separated tokens whatever the line layout, integers exactly, a tolerance of 1e-6 only
  where the expected token is a non-integer decimal; per-problem options ``strict_lines`` and
  ``yes_no_any_case`` (booleans beside ``inputs``);
- with ``fn_name`` (call-based): input ``i`` holds one JSON argument per line (or is the argument list) and
  output ``i`` the JSON result of ``fn_name`` (a top-level function, else a method of ``class Solution``);
  a result equal to the output, or to its only element, passes (as in verl's reference checker).

The program is the last fenced ```` ```python ```` block of the final answer (after the last ``</think>``),
else the last untagged fenced block. It runs ONLY through ``gdpo_verl.rewards.sandbox`` (local sandbox, or the
sandbox-fusion service when ``sandbox_fusion_url`` is set), at most ``max_tests`` tests of it.

- ``pass_rate_reward``: the fraction of those tests whose run succeeded with the expected output.
- ``bug_free_reward``: 1 minus the bug ratio, the fraction of tests whose run crashed (an exception, a syntax
  error, a non-zero exit, a time-out or a resource limit); a wrong answer is not a bug. As in the paper, a program
  that exits 0 doing nothing is bug-free: ``bug_free_needs_output=True`` also counts a silent run as a bug.
- Without a program both are 0.0 (nothing passes, and "no runnable program" is a bug).
- Length: use ``gdpo_verl.rewards.length.length_reward``; the paper counts it only when every test passes,
  which the recipe expresses as ``condition: {on: pass_rate, threshold: 1.0}``.

The two rewards share one execution: results are cached per (program, tests, settings), and a call that finds
the same key in flight waits for it (``EXECUTIONS`` counts the programs run). Malformed ground
truth raises ``ValueError`` (a data error); a failing sandbox raises ``SandboxError``; nothing in a
response raises. Run the examples (they execute code in the sandbox) with
``python -m pytest --doctest-modules gdpo_verl/rewards/code_tests.py`` (``python -m doctest`` would import the
standard library's ``code`` module instead of this file).
"""

from __future__ import annotations

import collections
import concurrent.futures
import inspect
import json
import re
import secrets
import threading
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any, NamedTuple

from gdpo_verl.rewards.inputs import as_text
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
    if fn_name:  # call-based: every input holds JSON arguments, every output a JSON value
        for i, (raw_in, raw_out) in enumerate(zip(inputs, outputs)):
            try:
                _call_args(raw_in)
                if isinstance(raw_out, str):
                    json.loads(raw_out)
            except (ValueError, RecursionError) as exc:
                raise ValueError(f"call-based test {i} is not JSON ({type(exc).__name__})") from None
    return inputs, outputs, fn_name or None


_FLOAT_TOL = Fraction(1, 10**6)
_MAX_DECIMAL_CHARS = 4096  # a longer non-integer literal is compared as text (integers: any length, exactly)
_MAX_EXPONENT = 4096  # a decimal literal with a larger exponent is compared as text (no huge exact value built)
_ASCII_SPACE = re.compile(r"[^ \t\n\r\v\f]+")  # tokens: runs of anything but ASCII whitespace
_INTEGER = re.compile(r"([+-]?)([0-9]+)")  # ASCII digits only: no "_", no other scripts' digits
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL = re.compile(r"([+-]?)(nan|inf|infinity)", re.IGNORECASE)
_YES_NO = ("yes", "no")
COMPARISON_OPTIONS = ("strict_lines", "yes_no_any_case")  # per-problem keys of the ground truth (booleans)


def _integer(token: str) -> str | None:
    """The canonical text of an integer literal (sign, no leading zeros; "-0" is "0"), None if not one."""
    match = _INTEGER.fullmatch(token)
    if match is None:
        return None
    digits = match[2].lstrip("0") or "0"
    return ("-" if match[1] == "-" and digits != "0" else "") + digits


def _special(token: str) -> str | None:
    """ "nan", "inf" or "-inf" for any spelling of them (case-insensitive, "infinity", a sign), else None."""
    match = _SPECIAL.fullmatch(token)
    if match is None:
        return None
    if match[2].lower() == "nan":
        return "nan"
    return "-inf" if match[1] == "-" else "inf"


def _decimal(token: str) -> Fraction | None:
    """The exact value of a decimal literal (ASCII), None if not one or its exponent is out of range."""
    if len(token) > _MAX_DECIMAL_CHARS or _DECIMAL.fullmatch(token) is None:
        return None
    value = Decimal(token)
    if abs(value.adjusted()) > _MAX_EXPONENT:
        return None
    return Fraction(value)


def _token_equal(got: str, want: str, yes_no_any_case: bool = False) -> bool:
    """One token against the expected one, by what the EXPECTED token is (see ``stdout_matches``)."""
    if got == want:
        return True
    expected_int = _integer(want)
    if expected_int is not None:
        return _integer(got) == expected_int
    expected_special = _special(want)
    if expected_special is not None:
        return _special(got) == expected_special
    expected = _decimal(want)
    if expected is not None:
        actual = _decimal(got)
        if actual is None:
            return False
        error = abs(actual - expected)
        return error <= _FLOAT_TOL or error <= _FLOAT_TOL * abs(expected)
    return yes_no_any_case and want.lower() in _YES_NO and got.lower() == want.lower()


def stdout_matches(actual: str, expected: str, strict_lines: bool = False, yes_no_any_case: bool = False) -> bool:
    """Contest-judge comparison of a program's output with the expected one (testlib's ``wcmp``/``rcmp6``).

    Tokens are runs of non-whitespace, whitespace being ASCII only (space, ``\\t \\n \\r \\v \\f``: a no-break
    space, ``\\x1c`` or ``\\u2028`` is part of a token). The two token sequences must have equal length and match
    pairwise, whatever the line layout (``strict_lines``: the same tokens on each non-blank line). A token
    matches the expected one when the text is equal, or by the expected token's kind:

    - an integer (``[+-]?[0-9]+``, any size): the actual token is an integer of the same value, exactly;
    - ``nan`` / ``inf`` / ``infinity`` in any case and sign: the actual token is a spelling of the same value;
    - a non-integer decimal literal (``2.5``, ``1e-3``): the actual token is a decimal literal within 1e-6 of
      it, absolute or relative to the expected value (computed exactly);
    - anything else: equal text (``yes_no_any_case``: ``YES``/``NO`` in any case).

    >>> stdout_matches("3 4\\n\\n5.0000001\\n", "3  4\\n5.0"), stdout_matches("1 2 3", "1\\n2\\n3")
    (True, True)
    >>> stdout_matches("1 2 3", "1\\n2\\n3", strict_lines=True)
    False
    >>> stdout_matches("999999000.0", "999999937"), stdout_matches("1.0000005", "1"), stdout_matches("1e-7", "0")
    (False, False, False)
    >>> stdout_matches("007", "7"), stdout_matches("NaN", "nan"), stdout_matches("Infinity", "inf")
    (True, True, True)
    >>> stdout_matches("１２３", "123"), stdout_matches("1_000", "1000"), stdout_matches("1\\xa02", "1 2")
    (False, False, False)
    >>> stdout_matches("yes", "YES"), stdout_matches("yes", "YES", yes_no_any_case=True)
    (False, True)
    """
    if strict_lines:
        got = [line for line in map(_ASCII_SPACE.findall, actual.split("\n")) if line]
        want = [line for line in map(_ASCII_SPACE.findall, expected.split("\n")) if line]
        if len(got) != len(want) or any(len(a) != len(b) for a, b in zip(got, want)):
            return False
        pairs = ((a, b) for row_a, row_b in zip(got, want) for a, b in zip(row_a, row_b))
    else:
        tokens_got, tokens_want = _ASCII_SPACE.findall(actual), _ASCII_SPACE.findall(expected)
        if len(tokens_got) != len(tokens_want):
            return False
        pairs = zip(tokens_got, tokens_want)
    return all(_token_equal(a, b, yes_no_any_case) for a, b in pairs)


def comparison_options(ground_truth: str | dict) -> dict[str, bool]:
    """The per-problem comparison options of a ground truth (``COMPARISON_OPTIONS``, default False).

    >>> comparison_options({"inputs": [""], "outputs": ["YES"], "yes_no_any_case": True})
    {'strict_lines': False, 'yes_no_any_case': True}
    """
    data = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    options = {}
    for key in COMPARISON_OPTIONS:
        value = data.get(key, False)
        if not isinstance(value, bool):
            raise ValueError(f"code ground truth {key!r} must be true or false, got {value!r}")
        options[key] = value
    return options


def _call_args(raw: Any) -> list[Any]:
    if isinstance(raw, list):
        return raw
    return [json.loads(line) for line in str(raw).strip().split("\n") if line.strip()]


_MAX_RESULT_CHARS = 1_000_000  # a call's JSON result line longer than this fails the test


def _call_result(stdout: str, nonce: str) -> tuple[bool, Any]:
    """(found, value) of the harness's result line; anything unparsable (too long, too deep) is not found."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(nonce):
            text = line[len(nonce) :]
            if len(text) > _MAX_RESULT_CHARS:
                return False, None
            try:
                return True, json.loads(text)
            except (ValueError, RecursionError):
                return False, None
    return False, None


_CACHE_SIZE = 1024
_CACHE_LOCK = threading.Lock()
_CACHE: collections.OrderedDict[tuple, concurrent.futures.Future] = collections.OrderedDict()
EXECUTIONS: collections.Counter[str] = collections.Counter()  # "programs": programs run (one per key)


def _evaluate(code: str, tests_key: str, settings: tuple) -> tuple[int, int, int]:
    """(passed, buggy, total), computed once per key: a concurrent caller with the same key waits for the first
    one's future instead of running the program again; the last ``_CACHE_SIZE`` results are kept."""
    key = (code, tests_key, settings)
    with _CACHE_LOCK:
        future = _CACHE.get(key)
        owner = future is None
        if owner:
            future = _CACHE[key] = concurrent.futures.Future()
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        else:
            _CACHE.move_to_end(key)
    if not owner:
        return future.result()
    try:
        EXECUTIONS["programs"] += 1
        future.set_result(_run_and_count(code, tests_key, settings))
    except BaseException as exc:
        with _CACHE_LOCK:
            _CACHE.pop(key, None)  # a sandbox failure is not cached: the next call tries again
        future.set_exception(exc)
    return future.result()


def _run_and_count(code: str, tests_key: str, settings: tuple) -> tuple[int, int, int]:
    """(passed, buggy, total) of ``code`` on the first ``max_tests`` tests."""
    max_tests, cpu_s, wall_s, memory_mb, budget_s, sandbox_fusion_url, bug_free_needs_output = settings
    inputs, outputs, fn_name = parse_tests(tests_key)
    options = comparison_options(tests_key)
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
        if not result.ok or (bug_free_needs_output and not result.stdout.strip()):
            buggy += 1
        elif fn_name is None:
            passed += stdout_matches(result.stdout, _lines_text(expected), **options)
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
    bug_free_needs_output: bool = False,
) -> Evaluation:
    """(passed, buggy, total) of the response's program; (0, 1, 1) when the response has no program.

    ``max_tests`` tests at most, each with ``cpu_s`` CPU seconds, ``wall_s`` wall seconds and ``memory_mb`` of
    address space; ``budget_s`` bounds them all (tests it leaves no time for count as time-outs, i.e. bugs).
    ``bug_free_needs_output``: a run that exits 0 without printing anything also counts as a bug (the paper's
    bug-free reward pays any program that exits 0, ``pass`` or everything in ``try/except`` included: a
    policy can farm it; this variant cannot be farmed that way).
    """
    code = extract_code(as_text(solution_str))
    tests_key = ground_truth if isinstance(ground_truth, str) else json.dumps(ground_truth, sort_keys=True)
    parse_tests(tests_key)  # malformed ground truth is a data error even when the response has no program
    comparison_options(tests_key)
    if code is None:
        return Evaluation(0, 1, 1)
    settings = (max_tests, cpu_s, wall_s, memory_mb, budget_s, sandbox_fusion_url, bug_free_needs_output)
    return Evaluation(*_evaluate(code, tests_key, settings))


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
