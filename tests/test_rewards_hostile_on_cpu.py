"""Every reward function on hostile input: any response (non-strings included) and the ground truth as the data
gives it (string or number) -> a float, never an exception, in linear time.

Run: .venv/bin/python -m pytest tests/test_rewards_hostile_on_cpu.py
"""

import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gdpo_verl.demo import rewards as toy
from gdpo_verl.demo import scale_rewards
from gdpo_verl.rewards import gsm8k, length, math_answer, toolcall

TOOL_TRUTH = '<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {"x": 1}}\n</tool_call>'
# (function, a ground truth as a string, the same as a number where the data may store one)
REWARDS = [
    (toy.format_reward, "7", 7),
    (toy.correctness_reward, "7", 7),
    (toy.brevity_reward, "7", 7),
    (scale_rewards.partial_correctness_reward, "7", 7),
    (gsm8k.correctness_reward, "x #### 72", 72),
    (gsm8k.integer_reward, "x #### 72", 72),
    (gsm8k.format_reward, "x #### 72", 72),
    (toolcall.format_reward, TOOL_TRUTH, None),
    (toolcall.correctness_reward, TOOL_TRUTH, None),
    (math_answer.correctness_reward, "\\frac{1}{2}", 0.5),
    (lambda solution_str, ground_truth: length.length_reward(solution_str, max_chars=100), "", None),
]
IDS = [f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}" for f, _, _ in REWARDS[:-1]] + ["length.length_reward"]
HOSTILE_RESPONSES = [None, 5, 2.5, float("nan"), b"<a>7</a>", b"\xff\xfe", ["<a>7</a>"], {"a": 1}, "", "\x00" * 10,
                     "<a>" + "9" * 5000 + "</a>"]  # fmt: skip


@pytest.mark.parametrize(("fn", "truth", "number"), REWARDS, ids=IDS)
@pytest.mark.parametrize("response", HOSTILE_RESPONSES, ids=repr)
def test_non_string_responses_never_raise(fn, truth, number, response):
    value = fn(solution_str=response, ground_truth=truth)
    assert isinstance(value, float) and math.isfinite(value)


@pytest.mark.parametrize(("fn", "truth", "number"), [r for r in REWARDS if r[2] is not None], ids=repr)
def test_a_numeric_ground_truth_scores_like_its_string(fn, truth, number):
    answer = {
        "7": "<a>7</a>",
        "x #### 72": "<think>\nok\n</think>\n<answer>72</answer>",
        "\\frac{1}{2}": "<think>ok</think> \\boxed{\\frac{1}{2}}",
    }[truth]
    assert fn(answer, number) == fn(answer, truth) == fn(answer, float(number))


@pytest.mark.parametrize(("fn", "truth", "number"), REWARDS, ids=IDS)
@given(response=st.text(max_size=200))
def test_any_text_gives_a_finite_float(fn, truth, number, response):
    value = fn(response, truth)
    assert isinstance(value, float) and math.isfinite(value)


def _seconds(fn, response, truth) -> float:
    start = time.perf_counter()
    fn(response, truth)
    return time.perf_counter() - start


@pytest.mark.parametrize(("fn", "truth", "number"), REWARDS, ids=IDS)
@pytest.mark.parametrize("unit", ["<a>", "<answer>", "<tool_call>", "<think>", "{", "</a><a>", "####"])
def test_parsers_are_linear_time(fn, truth, number, unit):
    # 20x more input must cost well under 400x the time (quadratic); the bound leaves room for noise.
    small, large = unit * 500, unit * 10000
    t_small = min(_seconds(fn, small, truth) for _ in range(3))
    t_large = min(_seconds(fn, large, truth) for _ in range(3))
    assert t_large < max(60 * t_small, 0.02), (t_small, t_large)
