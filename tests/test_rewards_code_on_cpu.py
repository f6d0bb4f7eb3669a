"""Code rewards (gdpo_verl.rewards.code_tests): pass rate and bug-free on programs run in the real sandbox.

Definitions (module docstring): pass rate = tests passed / tests run; bug-free = 1 - tests whose run crashed
(exception, syntax error, non-zero exit, time-out, limit) / tests run; a wrong answer is not a crash; no
program -> both 0. Each expected value below is derived in a comment. Run:
python -m pytest tests/test_rewards_code_on_cpu.py
"""

import json
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gdpo_verl.rewards import code_tests as code
from gdpo_verl.rewards.code_tests import bug_free_reward, compute_score, evaluate, extract_code, pass_rate_reward

FAST = {"cpu_s": 1, "wall_s": 2.0, "budget_s": 30.0}
DOUBLE = json.dumps({"inputs": ["2\n", "5\n", "0\n", "-4\n"], "outputs": ["4\n", "10\n", "0\n", "-8\n"]})


def fenced(program: str, tag: str = "python") -> str:
    return f"<think>plan</think>\nHere is my solution:\n```{tag}\n{program}\n```\n"


def scores(response, ground_truth=DOUBLE, **settings):
    settings = {**FAST, **settings}
    return pass_rate_reward(response, ground_truth, **settings), bug_free_reward(response, ground_truth, **settings)


def test_doctests():
    import doctest

    assert doctest.testmod(code).failed == 0


def test_stdin_problem():
    # All 4 tests print 2 * n: pass 4/4 = 1.0, no crash: bug-free 1.0.
    assert scores(fenced("print(2 * int(input()))")) == (1.0, 1.0)
    # Always prints 4: right only for input 2 -> pass 1/4 = 0.25; wrong answers are not crashes -> 1.0.
    assert scores(fenced("print(4)")) == (0.25, 1.0)
    # 20 // n - 6 ... crashes on n = 0 only (ZeroDivisionError): tests 2->4 right, 5->-2 wrong, 0 crash,
    # -4 -> -11 wrong. Pass 1/4 = 0.25; bug-free 1 - 1/4 = 0.75.
    assert scores(fenced("n = int(input())\nprint(20 // n - 6)")) == (0.25, 0.75)


def test_programs_that_never_work():
    # A syntax error crashes every test: pass 0, bug-free 1 - 4/4 = 0.
    assert scores(fenced("print(2 *")) == (0.0, 0.0)
    # An infinite loop runs into the wall-clock limit (0.5 s here): a time-out is a crash -> (0, 0).
    one = json.dumps({"inputs": ["1\n"], "outputs": ["2\n"]})
    assert scores(fenced("while True:\n    pass"), one, wall_s=0.5) == (0.0, 0.0)
    # No fenced program at all: pass 0 and bug-free 0 (no runnable program counts as a crash).
    assert scores("I would multiply the number by two.") == (0.0, 0.0)


def test_output_comparison_is_token_based():
    tests = json.dumps({"inputs": [""], "outputs": ["1 2\n3.0\n"]})
    # Extra spaces, blank lines and 3.0000001 vs 3.0 (within 1e-6) all pass.
    assert scores(fenced("print(' 1   2 ')\nprint()\nprint(3.0000001)"), tests) == (1.0, 1.0)
    # "1 2 3.0" on one line is the same token sequence (a judge's wcmp); 4 is wrong (not a crash).
    assert scores(fenced("print('1 2 3.0')"), tests) == (1.0, 1.0)
    assert scores(fenced("print('1 2 4.0')"), tests) == (0.0, 1.0)
    # Input given as a list of lines is joined with newlines.
    listed = json.dumps({"inputs": [["3", "4"]], "outputs": [["7"]]})
    assert scores(fenced("print(int(input()) + int(input()))"), listed) == (1.0, 1.0)


def test_call_based_problem():
    tests = {"fn_name": "add", "inputs": ["1\n2", "[1]\n[2]"], "outputs": ["3", "[1, 2]"]}
    # Each input line is one JSON argument: add(1, 2) = 3 and add([1], [2]) = [1, 2]: 2/2 pass, no crash.
    assert scores(fenced("def add(a, b):\n    return a + b"), tests) == (1.0, 1.0)
    # A method of class Solution is found too (LeetCode style).
    leet = "class Solution:\n    def add(self, a, b):\n        return a + b"
    assert scores(fenced(leet), tests) == (1.0, 1.0)
    # A function that raises on the list input: 1 pass, 1 crash -> (0.5, 0.5).
    strict = "def add(a, b):\n    assert isinstance(a, int)\n    return a + b"
    assert scores(fenced(strict), tests) == (0.5, 0.5)
    # No function of that name: every call fails, a crash -> (0, 0).
    assert scores(fenced("def plus(a, b):\n    return a + b"), tests) == (0.0, 0.0)


def test_call_based_quirks():
    # An expected output wrapped in a one-element list also accepts the bare value (verl's checker does so).
    wrapped = {"fn_name": "f", "inputs": [[2]], "outputs": [[4]]}
    assert scores(fenced("def f(x):\n    return 2 * x"), wrapped) == (1.0, 1.0)
    # Tuples come back as lists through JSON.
    pair = {"fn_name": "f", "inputs": ["5"], "outputs": ["[5, 6]"]}
    assert scores(fenced("def f(x):\n    return (x, x + 1)"), pair) == (1.0, 1.0)
    # A __main__ block does not run when the function is called, and cannot consume the harness's input.
    main_block = "def f(x):\n    return 2 * x\nif __name__ == '__main__':\n    print(f(int(input())))"
    assert scores(fenced(main_block), wrapped) == (1.0, 1.0)


def test_call_based_result_cannot_be_forged_by_printing():
    # The harness marks its result line with a random per-evaluation nonce; printing a guessed marker does not
    # count. f returns 0 (wrong) after printing a fake marker with the right value: pass 0, no crash.
    forged = "def f(x):\n    print('@gdpo-result-0000000000000000@4')\n    return 0"
    assert scores(fenced(forged), {"fn_name": "f", "inputs": ["2"], "outputs": ["4"]}) == (0.0, 1.0)


def test_extract_code_picks_the_final_python_block():
    response = "<think>```python\nprint('draft')\n```</think>\n```text\nnot code\n```\n```python\nprint(1)\n```"
    assert extract_code(response) == "print(1)\n"
    assert extract_code("```\nprint(2)\n```") == "print(2)\n"  # an untagged block when there is no python one
    assert extract_code("```cpp\nint main(){}\n```") is None  # another language is not run
    assert extract_code("```python\nprint(3)") is None  # unterminated fence


def test_max_tests_limits_the_tests_run():
    # Only the first 2 of 4 tests run: print(4) passes 1 of them -> 1/2.
    assert scores(fenced("print(4)"), max_tests=2) == (0.5, 1.0)


def test_both_rewards_share_one_execution():
    response = fenced("print(2 * int(input())) # shared")
    evaluate(response, DOUBLE, **FAST)
    runs = code.EXECUTIONS["programs"]
    started = time.perf_counter()
    assert scores(response) == (1.0, 1.0)
    assert code.EXECUTIONS["programs"] == runs  # both rewards came from the cache
    assert time.perf_counter() - started < 0.05


def test_concurrent_rewards_run_the_program_once():
    # Two threads ask for the two rewards of the same fresh sample at the same moment: one execution.
    response = fenced("import time\ntime.sleep(0.3)\nprint(2 * int(input())) # concurrent")
    runs = code.EXECUTIONS["programs"]
    barrier = threading.Barrier(2)
    out = {}

    def call(name, reward):
        barrier.wait()
        out[name] = reward(response, DOUBLE, **FAST)

    threads = [threading.Thread(target=call, args=a) for a in (("p", pass_rate_reward), ("b", bug_free_reward))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert out == {"p": 1.0, "b": 1.0}
    assert code.EXECUTIONS["programs"] == runs + 1


BIG = "7" * 4096
# (actual output, expected output, options, verdict, the same verdict with the two swapped)
GRADER_CASES = [
    # A float close to an integer answer is wrong (a contest judge compares integers exactly) ...
    ("999999000.0", "999999937", {}, False, True),  # ... swapped, the expected float allows 1e-6 relative error
    ("5.000000005e+17", "500000000500000000", {}, False, True),
    ("1.0000005", "1", {}, False, True),
    ("1e-7", "0", {}, False, True),
    ("5.0", "5", {}, False, True),
    ("1000001", "1000000", {}, False, False),
    ("12345678901234567891", "12345678901234567890", {}, False, False),
    ("9" * 400, "1" + "0" * 400, {}, False, False),
    # Digits of other scripts, "_", and separators that are not ASCII whitespace are wrong ...
    ("\uff11\uff12\uff13", "123", {}, False, False),
    ("\u0661\u0662\u0663", "123", {}, False, False),
    ("1_000", "1000", {}, False, False),
    ("1\xa02", "1 2", {}, False, False),
    ("1\x1c2", "1 2", {}, False, False),
    ("1\u20282", "1 2", {}, False, False),
    ("1\x852", "1 2", {}, False, False),
    ("1 2", "1 2 3", {}, False, False),
    ("inf", "1e999", {}, False, False),
    ("nan", "0", {}, False, False),
    ("1e999999999", "1e999999998", {}, False, False),
    ("-inf", "inf", {}, False, False),
    ("yes", "YES", {}, False, False),
    # ... right answers pass: any line layout, nan/inf spellings by value, any number of digits.
    ("1 2 3", "1\n2\n3", {}, True, True),
    ("1\n2\n3\n", "1 2 3", {}, True, True),
    ("  1\t2\r\n\n3  ", "1 2 3", {}, True, True),
    ("NaN", "nan", {}, True, True),
    ("inf", "Infinity", {}, True, True),
    ("-INF", "-infinity", {}, True, True),
    ("0" + BIG, BIG, {}, True, True),
    ("007", "7", {}, True, True),
    ("-0", "0", {}, True, True),
    ("3.0000001", "3.0", {}, True, True),
    ("0.1", "0.1000000001", {}, True, True),
    ("2.5", "2.6", {}, False, False),
    ("1" + "0" * 400, "1" + "0" * 400 + ".0000000001", {}, True, False),
    # Options: lines compared one by one; YES/NO in any case.
    ("1 2 3", "1\n2\n3", {"strict_lines": True}, False, False),
    ("1 2\n\n3\n", "1 2\n3", {"strict_lines": True}, True, True),
    ("yes\nNo", "YES\nNO", {"yes_no_any_case": True}, True, True),
    ("yes", "YESS", {"yes_no_any_case": True}, False, False),
]


@pytest.mark.parametrize("actual, expected, options, verdict, swapped", GRADER_CASES)
def test_grader_compares_like_a_contest_judge(actual, expected, options, verdict, swapped):
    assert code.stdout_matches(actual, expected, **options) is verdict
    assert code.stdout_matches(expected, actual, **options) is swapped


def test_grader_options_come_from_the_ground_truth():
    tests = {"inputs": [""], "outputs": ["YES\n1\n2"]}
    program = fenced("print('yes')\nprint(1, 2)")
    assert scores(program, json.dumps(tests)) == (0.0, 1.0)
    assert scores(program, json.dumps({**tests, "yes_no_any_case": True})) == (1.0, 1.0)
    assert scores(program, json.dumps({**tests, "yes_no_any_case": True, "strict_lines": True})) == (0.0, 1.0)
    with pytest.raises(ValueError, match="'strict_lines' must be true or false, got 'yes'"):
        evaluate(program, {**tests, "strict_lines": "yes"})


def test_bug_free_variant_counts_silent_runs_as_bugs():
    tests = json.dumps({"inputs": ["1", "2"], "outputs": ["1", "2"]})
    silent = fenced("try:\n    raise ValueError\nexcept Exception:\n    pass")
    assert scores(silent, tests) == (0.0, 1.0)  # the paper's bug-free pays a program that does nothing
    assert scores(silent, tests, bug_free_needs_output=True) == (0.0, 0.0)
    assert scores(fenced("print(input())"), tests, bug_free_needs_output=True) == (1.0, 1.0)


def test_call_based_hostile_output_never_raises():
    # The program reads the nonce from the harness and prints it followed by 100000 '[' (json.loads would recurse
    # too deep), or by a 3 MB line: the test fails, nothing raises.
    for tail in ("'[' * 100000", "'1' * 3_000_000"):
        program = (
            "import __main__, sys\n"
            "nonce = __main__.request['nonce']  # the harness's request, read from its module\n"
            f"print(nonce + {tail})\n"
            "sys.exit(0)\n"
            "def f(x):\n    return x\n"
        )
        tests = {"fn_name": "f", "inputs": ["2"], "outputs": ["2"]}
        # The program runs inside the harness's exec, so its top level runs before f is called.
        assert compute_score("taco", fenced(program), tests, **FAST)["pass_rate"] == 0.0


def test_compute_score_ignores_unknown_keywords():
    # verl may pass extra keywords (e.g. reward_router_address); only the sandbox settings are used.
    result = compute_score("taco", fenced("print(4)"), DOUBLE, extra_info={}, reward_router_address=None, **FAST)
    assert result == {"score": 1.25, "pass_rate": 0.25, "bug_free": 1.0}


@pytest.mark.parametrize(
    "ground_truth",
    ["not json", json.dumps({"inputs": ["1"]}), json.dumps({"inputs": [], "outputs": []}), json.dumps([1])],
)
def test_malformed_ground_truth_is_a_data_error(ground_truth):
    with pytest.raises(ValueError):
        pass_rate_reward(fenced("print(1)"), ground_truth, **FAST)


@given(text=st.text(alphabet=st.characters(blacklist_characters="`"), max_size=300))
def test_text_without_a_program_never_runs_or_raises(text):
    assert scores(text) == (0.0, 0.0)


def test_extract_code_is_fast_on_hostile_text():
    for text in ("```" * 21000, "```python\n" * 6500, "</think>```" * 5900, "`" * 65536):
        started = time.perf_counter()
        extract_code(text)
        assert time.perf_counter() - started < 0.05
