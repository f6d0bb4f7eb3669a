"""The demo's toy rewards (gdpo_verl.demo.rewards): hand-computed cases, fuzzing, docstring examples.

Run with ``.venv/bin/python -m pytest tests/test_demo_rewards_on_cpu.py``.
"""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gdpo_verl.demo.rewards
from gdpo_verl.demo.rewards import (
    REWARD_KEYS,
    brevity_reward,
    compute_score,
    correctness_reward,
    extract_answer,
    format_reward,
)
from gdpo_verl.demo.task import DATA_SOURCE

# (response, ground truth) -> (format, correctness, brevity), computed by hand.
CASES = [
    ("<a>7</a>", "7", (1.0, 1.0, 1.0)),
    ("  <a>7</a>\n", "7", (1.0, 1.0, 1.0)),
    ("<a>18</a>", 18, (1.0, 1.0, 1.0)),
    ("3+4=7 <a>7</a>", "7", (1.0, 1.0, 0.0)),
    ("<a>8</a>", "7", (1.0, 0.0, 1.0)),
    ("3+4=8 <a>8</a>", "7", (1.0, 0.0, 0.0)),
    ("7", "7", (0.0, 0.0, 1.0)),
    ("<a>7", "7", (0.0, 0.0, 1.0)),
    ("7</a>", "7", (0.0, 0.0, 1.0)),
    ("<a>7</a>.", "7", (0.0, 1.0, 1.0)),
    ("<a>1</a><a>7</a>", "7", (0.0, 1.0, 0.0)),
    ("<a> 7 </a>", "7", (0.0, 1.0, 1.0)),
    ("<a>seven</a>", "7", (0.0, 0.0, 0.0)),
    ("", "7", (0.0, 0.0, 1.0)),
    ("the answer is <a>7</a>", "7", (1.0, 1.0, 0.0)),
]


@pytest.mark.parametrize(("response", "truth", "expected"), CASES)
def test_rewards_on_hand_computed_cases(response, truth, expected):
    got = (format_reward(response, truth), correctness_reward(response, truth), brevity_reward(response, truth))
    assert got == expected
    score = compute_score(DATA_SOURCE, response, truth, extra_info={"split": "train", "index": 0})
    assert score == {"score": sum(expected), **dict(zip(REWARD_KEYS, expected))}


@given(st.text(), st.one_of(st.text(), st.integers()))
def test_rewards_never_raise_and_stay_binary(response, truth):
    score = compute_score(DATA_SOURCE, response, truth)
    assert list(score) == ["score", *REWARD_KEYS]
    assert all(score[key] in (0.0, 1.0) for key in REWARD_KEYS)
    assert score["score"] == sum(score[key] for key in REWARD_KEYS)
    assert extract_answer(response) is None or isinstance(extract_answer(response), str)


def test_docstring_examples():
    result = doctest.testmod(gdpo_verl.demo.rewards)
    assert result.attempted > 0 and result.failed == 0


# --- the reward-scale demo (gdpo_verl.demo.scale_rewards): format {0,1}, partial-credit correctness [-3,3] ---------

SCALE_CASES = [
    ("<a>7</a>", "7", (1.0, 3.0)),
    ("<a>8</a>", "7", (1.0, 2.0)),
    ("<a>4</a>", 7, (1.0, 0.0)),
    ("<a>1</a>", "7", (1.0, -3.0)),
    ("<a>18</a>", "0", (1.0, -3.0)),
    ("<a> 7 </a>", "7", (0.0, 3.0)),  # correct but badly formatted: format is not implied by correctness
    ("<a>1</a><a>7</a>", "7", (0.0, 3.0)),
    ("<a>7</a>.", "7", (0.0, 3.0)),
    ("<a>-1</a>", "0", (1.0, 2.0)),
    ("7", "7", (0.0, -3.0)),
    ("<a>seven</a>", "7", (0.0, -3.0)),
    ("<a>7", "7", (0.0, -3.0)),
    ("", "7", (0.0, -3.0)),
]


@pytest.mark.parametrize(("response", "truth", "expected"), SCALE_CASES)
def test_scale_rewards_on_hand_computed_cases(response, truth, expected):
    from gdpo_verl.demo.scale_rewards import format_reward as scale_format
    from gdpo_verl.demo.scale_rewards import partial_correctness_reward

    assert (scale_format(response, truth), partial_correctness_reward(response, truth)) == expected


@given(st.text(max_size=40), st.integers(min_value=0, max_value=18))
def test_partial_correctness_never_raises_and_stays_in_range(response, truth):
    from gdpo_verl.demo.scale_rewards import partial_correctness_reward

    assert -3.0 <= partial_correctness_reward(response, truth) <= 3.0
    assert partial_correctness_reward(f"<a>{truth}</a>", truth) == 3.0


def test_scale_rewards_docstring_examples():
    import gdpo_verl.demo.scale_rewards

    result = doctest.testmod(gdpo_verl.demo.scale_rewards)
    assert result.attempted >= 3 and result.failed == 0
