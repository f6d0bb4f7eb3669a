"""GSM8K rewards (gdpo_verl.rewards.gsm8k) on hand-computed cases, fuzzed, and timed on hostile text.

Definitions (module docstring): answer = text after the LAST <answer> up to the next </answer>, stripped;
correctness = answer == ground truth (string); integer = answer.isdigit(); format = the whole response matches
^<think>.*?</think>\\n<answer>.*?</answer>$ with exactly one <answer> and one </answer>.
Run: python -m pytest tests/test_rewards_gsm8k_on_cpu.py
"""

import doctest
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gdpo_verl.rewards import gsm8k
from gdpo_verl.rewards.gsm8k import compute_score, correctness_reward, format_reward, integer_reward

GOOD = "<think>3 apples and 4 apples make 7.</think>\n<answer>7</answer>"


def test_doctests():
    assert doctest.testmod(gsm8k).failed == 0


@pytest.mark.parametrize(
    ("response", "ground_truth", "expected"),
    [
        (GOOD, "7", 1.0),
        (GOOD, "Janet has 3 + 4 = 7 apples.\n#### 7", 1.0),  # a raw GSM8K solution: the text after ####
        ("<think>x</think>\n<answer> 7 \n</answer>", "7", 1.0),  # the answer is stripped
        ("<think>x</think>\n<answer>7.0</answer>", "7", 0.0),  # string equality, not numeric
        ("<think>x</think>\n<answer>1,000</answer>", "1000", 0.0),  # no normalization of separators
        ("<answer>5</answer> then <answer>7</answer>", "7", 1.0),  # the LAST <answer> counts
        ("<answer>7", "7", 1.0),  # no closing tag: everything after the last <answer>
        ("7", "7", 1.0),  # no tag at all: the whole response, stripped (as in the reference)
        ("the answer is 7", "7", 0.0),
    ],
)
def test_correctness(response, ground_truth, expected):
    assert correctness_reward(response, ground_truth) == expected


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (GOOD, 1.0),
        ("<answer>-3</answer>", 0.0),  # "-3".isdigit() is False: a sign is not a digit
        ("<answer>3.5</answer>", 0.0),
        ("<answer></answer>", 0.0),  # "".isdigit() is False
        ("<answer> 42 </answer>", 1.0),  # stripped first
    ],
)
def test_integer(response, expected):
    assert integer_reward(response, "0") == expected


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (GOOD, 1.0),
        (GOOD + "\n", 1.0),  # Python's $ also matches before one final newline, as in the reference
        (GOOD + "\n\n", 0.0),
        ("<think>a</think> <answer>7</answer>", 0.0),  # a space where the newline belongs
        ("<think>a</think>\n<answer>7</answer>\n<answer>7</answer>", 0.0),  # two <answer> tags
        ("<answer>7</answer>", 0.0),  # no think block
        ("x<think>a</think>\n<answer>7</answer>", 0.0),  # text before <think>
        ("<think>a\nb</think>\n<answer>7\n</answer>", 1.0),  # newlines inside both blocks (DOTALL)
        ("<think>a</think><think>b</think>\n<answer>7</answer>", 1.0),  # extra think tags are allowed (reference)
    ],
)
def test_format(response, expected):
    assert format_reward(response, "7") == expected


def test_compute_score():
    # correctness 0 (8 != 7), integer 1 ("8" is digits), format 1: score 2.
    response = "<think>x</think>\n<answer>8</answer>"
    assert compute_score("openai/gsm8k", response, "7") == {
        "score": 2.0,
        "correctness": 0.0,
        "integer": 1.0,
        "format": 1.0,
    }


TOKENS = ["<think>", "</think>", "<answer>", "</answer>", "\n", "7", "-", " ", "x", "#### ", "\u00b2"]


@given(text=st.one_of(st.lists(st.sampled_from(TOKENS), max_size=50).map("".join), st.text(max_size=300)))
def test_never_raises_and_stays_in_range(text):
    for fn in (correctness_reward, integer_reward, format_reward):
        assert fn(text, "7") in (0.0, 1.0)


def hostile_texts(size=64 * 1024):
    def fill(unit, prefix="", suffix=""):
        return prefix + unit * ((size - len(prefix) - len(suffix)) // len(unit)) + suffix

    return {
        "open answers": fill("<answer>"),
        "close thinks": fill("</think>", "<think>", "\n<answer>7</answer>"),
        "separators": fill("</think>\n<answer>", "<think>", "</answer>"),
        "almost format": fill("</think>\n", "<think>", "<answer>7</answer>x"),
        "digits": "<answer>" + "9" * (size - 20) + "</answer>",
        "newlines": "\n" * size,
    }


@pytest.mark.parametrize("name", list(hostile_texts()))
def test_hostile_input_is_fast(name):
    text = hostile_texts()[name]
    for fn in (correctness_reward, integer_reward, format_reward):
        best = min(_timed(fn, text) for _ in range(3))
        assert best < 0.05, f"{fn.__name__} took {best * 1000:.1f} ms on {name}"


def _timed(fn, text):
    start = time.perf_counter()
    fn(text, "7")
    return time.perf_counter() - start
