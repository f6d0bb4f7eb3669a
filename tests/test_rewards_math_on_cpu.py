"""Math answer correctness (rewards.math_answer) and the length budget (rewards.length): cases, fuzz, hostile text.

Definitions (module docstring): correctness = the last \\boxed{} after the last </think> equals the ground
truth after normalization (or numerically); length = 1 when the response is within budget (characters, or
tokens from extra_info["response_length"] or a tokenizer). Run: python -m pytest tests/test_rewards_math_on_cpu.py
"""

import doctest
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gdpo_verl.rewards import length, math_answer
from gdpo_verl.rewards.length import length_reward
from gdpo_verl.rewards.math_answer import compute_score, correctness_reward, last_boxed


def final(answer: str) -> str:
    return f"<think>work it out</think>\nSo the answer is $\\boxed{{{answer}}}$."


@pytest.mark.parametrize("module", [length, math_answer])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize(
    ("response", "ground_truth", "expected"),
    [
        (final("42"), "42", 1.0),
        (final("41"), "42", 0.0),
        ("\\boxed{42}", "42", 0.0),  # no </think>: the reasoning never closed, score 0 (DeepScaleR's rule)
        ("<think>\\boxed{42}</think> no box after thinking", "42", 0.0),  # a box inside the thinking does not count
        ("<think>x</think> \\boxed{1} no wait \\boxed{42}", "42", 1.0),  # the last box counts
        (final("\\frac{1}{2}"), "0.5", 1.0),  # numeric: 1/2 = 0.5
        (final("\\dfrac{1}{2}"), "\\frac{1}{2}", 1.0),  # \dfrac -> \frac
        (final("1/2"), "\\frac{1}{2}", 1.0),  # a/b -> numeric 0.5
        (final("1,000"), "1000", 1.0),  # thousands separators
        (final("x = 5"), "5", 1.0),  # a leading "x =" is dropped
        (final("30^\\circ"), "30", 1.0),  # degrees
        (final("50\\%"), "50", 1.0),  # percent
        (final("10 \\text{ cm}"), "10cm", 1.0),  # \text{} unwrapped, spaces removed
        (final("\\left( 1, 2 \\right)"), "(1,2)", 1.0),  # \left \right dropped
        (final("\\sqrt{8}"), "2\\sqrt{2}", 0.0),  # no symbolic algebra: documented
        ("<think>x</think> \\boxed{42", "42", 0.0),  # unbalanced box: no answer
        (final("7"), "\\boxed{7}", 1.0),  # a boxed ground truth is unboxed first
        (final(""), "", 0.0),  # empty answers never match
    ],
)
def test_correctness(response, ground_truth, expected):
    assert correctness_reward(response, ground_truth) == expected


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


def test_length_by_reported_tokens():
    # extra_info["response_length"] (tokens) wins over re-tokenizing; the paper's budget is 4000 tokens.
    assert length_reward("x", {"response_length": 4000}) == 1.0
    assert length_reward("x", {"response_length": 4001}) == 0.0
    assert length_reward("x", {"response_length": np.int64(12)}, max_tokens=12) == 1.0  # numpy ints from verl


def test_length_by_tokenizer(tmp_path):
    # A whitespace word-level tokenizer built offline: "one two three" is 3 tokens, "one two three four" is 4.
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "one": 1, "two": 2, "three": 3, "four": 4}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(tmp_path)
    assert length_reward("one two three", tokenizer=str(tmp_path), max_tokens=3) == 1.0
    assert length_reward("one two three four", tokenizer=str(tmp_path), max_tokens=3) == 0.0


def test_length_without_a_budget_is_a_configuration_error():
    with pytest.raises(ValueError, match="max_chars"):
        length_reward("text")


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


TOKENS = ["<think>", "</think>", "\\boxed{", "\\fbox{", "{", "}", "\\frac", "1", "/", ",", "x=", "\\text{", " ", "$"]


@given(text=st.one_of(st.lists(st.sampled_from(TOKENS), max_size=60).map("".join), st.text(max_size=300)))
def test_never_raises_and_stays_in_range(text):
    assert correctness_reward(text, "\\frac{1}{2}") in (0.0, 1.0)
    assert correctness_reward(text, text) in (0.0, 1.0)
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
def test_hostile_input_is_fast(name):
    text = hostile_texts()[name]
    best = min(_timed(text) for _ in range(3))
    assert best < 0.05, f"correctness_reward took {best * 1000:.1f} ms on {name}"


def _timed(text):
    start = time.perf_counter()
    correctness_reward(text, "\\frac{1}{2}")
    return time.perf_counter() - start
