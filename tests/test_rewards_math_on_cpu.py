"""Math answer correctness (rewards.math_answer, math-verify) and the length budget (rewards.length).

Definitions (module docstrings): correctness = the last \\boxed{} after the last </think> is mathematically equal
to the ground truth (math-verify parse + verify in a helper process with a hard time limit); length = 1 when the
response is within budget (tokens from the manager's response_length, or characters).
Run: python -m pytest tests/test_rewards_math_on_cpu.py
"""

import doctest
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gdpo_verl.rewards import length, math_answer
from gdpo_verl.rewards.length import length_reward
from gdpo_verl.rewards.math_answer import answers_match, compute_score, correctness_reward, last_boxed


def final(answer: str) -> str:
    return f"<think>work it out</think>\nSo the answer is $\\boxed{{{answer}}}$."


@pytest.mark.parametrize("module", [length, math_answer])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


# (predicted \boxed{} content, ground truth, equal?): the battery of answer forms DeepScaleR/AIME/MATH answers take
BATTERY = [
    # fractions
    ("\\frac12", "\\frac{1}{2}", True),
    ("-\\frac12", "-\\frac{1}{2}", True),
    ("\\dfrac{1}{2}", "\\frac12", True),
    ("0.5", "\\frac{1}{2}", True),
    ("1/3", "\\frac13", True),
    ("\\frac{2}{4}", "\\frac{1}{2}", True),
    ("\\frac12", "-\\frac12", False),
    ("0.333", "\\frac13", False),  # a rounded decimal is not the fraction
    ("\\frac{1}{3}", "\\frac{1}{2}", False),
    # roots
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", True),
    ("2\\sqrt2", "\\sqrt{8}", True),
    ("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}", True),
    ("\\sqrt{3}", "\\sqrt{2}", False),
    ("2\\sqrt{3}", "\\sqrt{6}", False),
    # powers and big numbers
    ("2^{10}", "1024", True),
    ("1,000", "1000", True),
    ("2^{10}", "1000", False),
    # intervals and sets
    ("[1,2)", "[1, 2)", True),
    ("(-\\infty, 2]", "(-\\infty,2]", True),
    ("\\{1,2\\}", "\\{2,1\\}", True),
    ("(1,2]", "[1,2]", False),  # open vs closed end
    ("(1,2)", "(1,3)", False),
    # multiple-choice letters
    ("\\text{(A)}", "A", True),
    ("(B)", "B", True),
    ("\\textbf{(C)}", "C", True),
    ("A", "B", False),
    ("\\text{(C)}", "D", False),
    # text and units
    ("10\\text{ cm}", "10", True),
    ("5\\text{ apples}", "5", True),
    ("\\frac{3}{4}\\text{ cm}", "0.75", True),
    ("\\text{Monday}", "\\text{monday}", True),
    ("\\text{yes}", "\\text{no}", False),
    ("12\\text{ cm}", "10", False),
    # percentages (the percent sign is dropped: 50% matches 50, not 0.5)
    ("50\\%", "50", True),
    ("12\\%", "12\\%", True),
    ("50\\%", "0.5", False),
    ("40\\%", "50", False),
    # negatives
    ("-3", "-3", True),
    ("-3", "3", False),
    ("-0.5", "-\\frac{1}{2}", True),
    # degrees
    ("30^\\circ", "30", True),
    ("30^{\\circ}", "30^\\circ", True),
    ("45^\\circ", "30", False),
    # equations, expressions, constants, money
    ("x = 5", "5", True),
    ("3x+2", "2+3x", True),
    ("x^2-1", "(x-1)(x+1)", True),
    ("x^2+1", "(x-1)(x+1)", False),
    ("\\$10", "10", True),
    ("\\pi", "3.14159", False),
    ("\\infty", "-\\infty", False),
    ("2", "\\frac{1}{2}", False),
    ("1024", "2^{11}", False),
    ("\\text{(A)}", "\\text{(B)}", False),
    ("x = 6", "5", False),
]


@pytest.mark.parametrize(("predicted", "ground_truth", "equal"), BATTERY)
def test_battery(predicted, ground_truth, equal):
    assert correctness_reward(final(predicted), ground_truth) == (1.0 if equal else 0.0)


def test_battery_is_large_and_balanced():
    assert len(BATTERY) >= 40
    assert sum(e for *_, e in BATTERY) >= 20 and sum(not e for *_, e in BATTERY) >= 20


@pytest.mark.parametrize(
    ("response", "ground_truth", "expected"),
    [
        (final("42"), "42", 1.0),
        (final("41"), "42", 0.0),
        ("\\boxed{42}", "42", 0.0),  # no </think>: the reasoning never closed, score 0 (DeepScaleR's rule)
        ("<think>\\boxed{42}</think> no box after thinking", "42", 0.0),  # a box inside the thinking does not count
        ("<think>x</think> \\boxed{1} no wait \\boxed{42}", "42", 1.0),  # the last box counts
        ("<think>x</think> \\boxed{42", "42", 0.0),  # unbalanced box: no answer
        (final("7"), "\\boxed{7}", 1.0),  # a boxed ground truth is unboxed first
        (final(""), "", 0.0),  # empty answers never match
        (final("\\left( 1, 2 \\right)"), "(1,2)", 1.0),  # \\left \\right
    ],
)
def test_correctness(response, ground_truth, expected):
    assert correctness_reward(response, ground_truth) == expected


def test_pathological_answer_is_cut_at_the_time_limit_and_the_next_call_works():
    # A tower of powers makes SymPy compute for a long time. The hard limit kills the helper process: 0.0 on time.
    start = time.monotonic()
    assert answers_match("2^{2^{34}}-1", "7", timeout_s=0.5) is False
    assert time.monotonic() - start < 0.5 + 1.0
    assert answers_match("\\frac{1}{2}", "0.5") is True  # a fresh helper answers the next call
    start = time.monotonic()
    assert correctness_reward(final("9^{9^{9^{9}}}"), "1", timeout_s=2.0) == 0.0
    assert time.monotonic() - start < 2.0 + 1.0


def test_time_limit_holds_in_worker_threads():
    # verl calls reward functions from threads, where math-verify's own signal-based time-outs cannot work.
    assert threading.current_thread() is threading.main_thread()
    start = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda a: answers_match(a, "1", timeout_s=1.0), ["2^{2^{34}}-1", "1.0"]))
    assert results == [False, True]
    assert time.monotonic() - start < 1.0 + 1.5


def test_correctness_without_think_requirement():
    assert correctness_reward("\\boxed{42}", "42", require_think_end=False) == 1.0


def test_last_boxed_balances_braces():
    assert last_boxed("\\boxed{\\frac{a}{b}} tail") == "\\frac{a}{b}"
    assert last_boxed("\\fbox{3}") == "3"
    assert last_boxed("no box") is None


def test_length_by_characters():
    # The budget is inclusive: exactly max_chars characters still counts.
    assert length_reward("a" * 4000, max_chars=4000) == 1.0
    assert length_reward("a" * 4001, max_chars=4000) == 0.0


def test_length_by_response_tokens():
    # response_length (tokens, from the reward manager) against the paper's 4000-token budget, inclusive.
    assert length_reward("x", response_length=4000) == 1.0
    assert length_reward("x", response_length=4001) == 0.0
    assert length_reward("x", response_length=np.int64(12), max_tokens=12) == 1.0  # numpy ints from verl
    assert length_reward("x" * 10, response_length=3, max_chars=5) == 0.0  # max_chars wins when given


def test_length_without_a_budget_is_a_configuration_error():
    with pytest.raises(ValueError, match="max_chars"):
        length_reward("text")
    with pytest.raises(ValueError, match="response_length"):
        length_reward("text", response_length="12")


def test_compute_score_applies_the_condition():
    # correct and short: 1 + 1 = 2
    assert compute_score("deepscaler", final("7"), "7", max_chars=1000)["score"] == 2.0
    # wrong and short: correctness 0, and the length reward does not count without a correct answer: 0
    assert compute_score("deepscaler", final("8"), "7", max_chars=1000) == {
        "score": 0.0,
        "correctness": 0.0,
        "length": 1.0,
    }
    # correct but too long: 1 + 0 = 1
    assert compute_score("deepscaler", final("7"), "7", max_chars=5)["score"] == 1.0
    # token budget from response_length, or from extra_info["response_length"]
    assert compute_score("deepscaler", final("7"), "7", response_length=4001)["score"] == 1.0
    assert compute_score("deepscaler", final("7"), "7", extra_info={"response_length": 10})["score"] == 2.0


TOKENS = ["<think>", "</think>", "\\boxed{", "\\fbox{", "{", "}", "\\frac", "1", "/", ",", "x=", "\\text{", " ", "$"]


@given(text=st.one_of(st.lists(st.sampled_from(TOKENS), max_size=60).map("".join), st.text(max_size=300)))
def test_never_raises_and_stays_in_range(text):
    assert correctness_reward(text, "\\frac{1}{2}", timeout_s=2.0) in (0.0, 1.0)
    assert correctness_reward(text, text, timeout_s=2.0) in (0.0, 1.0)
    assert length_reward(text, max_chars=100) in (0.0, 1.0)


def hostile_texts(size=64 * 1024):
    def fill(unit, prefix="", suffix=""):
        return prefix + unit * ((size - len(prefix) - len(suffix)) // len(unit)) + suffix

    return {
        "boxes": fill("\\boxed{", "</think>"),
        "open braces": fill("{", "</think>\\boxed"),
        "digits": "</think>\\boxed{" + "9" * (size - 20) + "}",
        "slash": "</think>\\boxed{" + "1" * (size // 2 - 20) + "/" + "2" * (size // 2 - 20) + "}",
        "separators": "</think>\\boxed{" + "1,000" * (size // 5 - 10) + "}",
        "text wrappers": "</think>\\boxed{" + "\\text{" * (size // 6 - 10) + "}",
        "thinks": fill("</think>"),
    }


@pytest.mark.parametrize("name", list(hostile_texts()))
def test_hostile_input_is_bounded(name):
    # 64 KiB of hostile text: the box scan is linear and math-verify is cut at the time limit.
    text = hostile_texts()[name]
    start = time.perf_counter()
    assert correctness_reward(text, "\\frac{1}{2}", timeout_s=2.0) == 0.0
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0 + 1.0, f"correctness_reward took {elapsed:.2f} s on {name}"
