"""Tool-calling rewards (gdpo_verl.rewards.toolcall) on hand-computed cases, fuzzed, and timed on hostile text.

Every expected value is derived in a comment from the definitions in the module docstring:
R = 6 * S / S_max - 3, S_max = 1 + sum_gt (1 + |params|), S = match(names) + per-call best
[match(keys) + equal values], match(a, b) = |a & b| / (|a| + |b| - |a & b|).
Run: python -m pytest tests/test_rewards_toolcall_on_cpu.py
"""

import doctest
import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gdpo_verl.rewards import toolcall
from gdpo_verl.rewards.toolcall import compute_score, correctness_reward, format_reward, match_score


def call(name, **params):
    return {"name": name, "parameters": params}


def answer(*calls, think="reasoning", response=None):
    """A response/ground truth in the task's format with these calls (and an optional <response>)."""
    text = f"<think>{think}</think>"
    if calls:
        text += "\n<tool_call>\n" + "\n".join(json.dumps(c) for c in calls) + "\n</tool_call>"
    if response is not None:
        text += f"\n<response>{response}</response>"
    return text


def test_doctests():
    assert doctest.testmod(toolcall).failed == 0


# ---------------------------------------------------------------------------------------------- correctness


def test_no_tool_call_in_ground_truth_scores_zero():
    # The ground truth answers with <response> only: correctness is 0.0 whatever the model does.
    gt = answer(response="Hello")
    assert correctness_reward(answer(call("f", a=1)), gt) == 0.0
    assert correctness_reward("garbage", gt) == 0.0


@pytest.mark.parametrize(
    "response",
    [
        answer(response="no calls"),  # no <tool_call> block at all
        "<think>x</think>\n<tool_call>\n{not json}\n</tool_call>",  # a line that is not JSON
        "<think>x</think>\n<tool_call>\n" + json.dumps({"name": "f"}) + "\n</tool_call>",  # no parameters
        "<think>x</think>\n<tool_call>\n" + json.dumps({"name": 3, "parameters": {}}) + "\n</tool_call>",  # bad name
        "<think>x</think>\n<tool_call>\n" + json.dumps([1, 2]) + "\n</tool_call>",  # not an object
        "<think>x</think>\n<tool_call>\n"
        + json.dumps(call("f", a=1))
        + "\n\n"
        + json.dumps(call("f", a=1))
        + "\n</tool_call>",  # a blank line between calls is a line that is not JSON, as in the reference
    ],
)
def test_missing_or_malformed_block_scores_minus_three(response):
    assert correctness_reward(response, answer(call("f", a=1))) == -3.0


def test_exact_match_scores_three():
    gt = answer(call("f", a=1, b="x"), call("g"))
    assert correctness_reward(answer(call("f", a=1, b="x"), call("g"), think="other"), gt) == 3.0
    # Both sides without parameters: {"parameters": {}} equals {"parameters": {}}, an exact match.
    assert correctness_reward(answer(call("g")), answer(call("g"))) == 3.0


@pytest.mark.parametrize(
    ("gt_calls", "pred_calls", "expected"),
    [
        # One call, right name and key, wrong value.
        # S = match([f],[f]) 1 + match([a],[a]) 1 + equal values 0 = 2; S_max = 1 + (1 + 1) = 3; R = 6*2/3 - 3 = 1.
        ([call("f", a=1)], [call("f", a=2)], 1.0),
        # gt f(a=1, b=2), g(x="y"); predicted f(a=1, b=3) only.
        # names [f,g] vs [f]: |&| = 1, 1/(2+1-1) = 0.5; f: keys equal 1 + one equal value 1 = 2; g: no candidate.
        # S = 2.5; S_max = 1 + (1+2) + (1+1) = 6; R = 6*2.5/6 - 3 = -0.5.
        ([call("f", a=1, b=2), call("g", x="y")], [call("f", a=1, b=3)], -0.5),
        # The right call twice: names [f] vs [f,f]: 1/(1+2-1) = 0.5; f: 1 + 1 = 2 (the second copy stays unused).
        # S = 2.5; S_max = 1 + 2 = 3; R = 6*2.5/3 - 3 = 2.
        ([call("f", a=1)], [call("f", a=1), call("f", a=1)], 2.0),
        # Wrong name: names share nothing, 0/(1+1-0) = 0; no same-name call. S = 0; R = -3.
        ([call("f", a=1)], [call("g", a=1)], -3.0),
        # Same calls in another order: not an exact match (lists differ), but names match as multisets: 2/2 = 1;
        # f: 1 + 1 = 2; g: 1 + 1 = 2. S = 5 = S_max = 1 + 2 + 2; R = 3.
        ([call("f", a=1), call("g", b=2)], [call("g", b=2), call("f", a=1)], 3.0),
        # An extra parameter: keys [a] vs [a,c]: 1/(1+2-1) = 0.5; a equal: 1. S = 1 + 1.5 = 2.5; S_max = 3; R = 2.
        ([call("f", a=1)], [call("f", a=1, c=2)], 2.0),
        # gt f() without parameters, predicted f(x=1): keys [] vs [x] -> 0 (one side empty), no values -> 0, so
        # the call is not used. S = names 1; S_max = 1 + (1 + 0) = 2; R = 6*1/2 - 3 = 0.
        ([call("f")], [call("f", x=1)], 0.0),
        # Values compare as JSON values: 1 vs "1" differ. S = 1 + 1 + 0 = 2; S_max = 3; R = 1.
        ([call("f", a=1)], [call("f", a="1")], 1.0),
    ],
)
def test_partial_credit(gt_calls, pred_calls, expected):
    assert correctness_reward(answer(*pred_calls), answer(*gt_calls)) == pytest.approx(expected)


def test_match_score_definition():
    assert match_score(["a", "b"], ["a", "b"]) == 1.0  # equal lists
    assert match_score([], ["a"]) == 0.0 and match_score(["a"], []) == 0.0  # one side empty
    # multiset: [a,a,b] & [a,b,b] = {a, b}: 2 / (3 + 3 - 2) = 0.5
    assert match_score(["a", "a", "b"], ["a", "b", "b"]) == 0.5


def test_predicted_block_is_first_tool_call_block():
    # As in the reference: the block between the first <tool_call> and the next </tool_call> is scored.
    gt = answer(call("f", a=1))
    first_right = answer(call("f", a=1)) + "\n<tool_call>\n{bad}\n</tool_call>"
    assert correctness_reward(first_right, gt) == 3.0


def test_malformed_ground_truth_is_a_data_error():
    with pytest.raises(ValueError):
        correctness_reward(answer(call("f")), "<think>x</think>\n<tool_call>\n{oops\n</tool_call>")


# --------------------------------------------------------------------------------------------------- format


@pytest.mark.parametrize(
    ("gt", "response", "expected"),
    [
        (answer(call("f")), answer(call("f", a=1)), 1.0),  # think + tool_call layout, any calls
        (answer(call("f")), answer(call("f"), response="hi"), 0.0),  # a <response> the layout does not have
        (answer(call("f")), "<think>a</think><tool_call>\n{}\n</tool_call>", 0.0),  # no newline after </think>
        (answer(call("f")), "<think>a</think>\n<tool_call>{}</tool_call>", 0.0),  # block not on its own lines
        (answer(call("f")), "<think>a</think><think>b</think>\n<tool_call>\n{}\n</tool_call>", 0.0),  # 2 thinks
        (answer(response="x"), answer(response="hello"), 1.0),  # think + response
        (answer(response="x"), "<think>a</think>\n<response>b</response>\n<response>c</response>", 0.0),
        (answer(call("f"), response="x"), answer(call("g"), response="done"), 1.0),  # all three, in order
        (
            answer(call("f"), response="x"),
            "<think>a</think>\n<response>b</response>\n<tool_call>\n{}\n</tool_call>",
            0.0,
        ),
        (answer(), "<think>only thinking</think>", 1.0),  # think only
        (answer(), "<think>a</think>\ntrailing text", 0.0),
        (answer(response="x"), "  \n" + answer(response="hello") + "\n\n", 1.0),  # surrounding whitespace stripped
        (answer(response="x"), "<|im_start|>assistant\n" + answer(response="y") + "<|im_end|>", 1.0),  # transcript
        (answer(response="x"), "", 0.0),
    ],
)
def test_format(gt, response, expected):
    assert format_reward(response, gt) == expected


def test_compute_score_sums_the_two_rewards():
    gt = answer(call("f", a=1))
    # format 1 (think + tool_call) and correctness 1 (value wrong: see test_partial_credit) -> score 2.
    assert compute_score("rlla", answer(call("f", a=2)), gt) == {"score": 2.0, "format": 1.0, "correctness": 1.0}


# ---------------------------------------------------------------------------------------------- robustness

TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<response>", "</response>", "\n", "{", "}", "[", "]"]
TOKENS += ['"name"', '"parameters"', ":", ",", '"f"', "1", " ", "<|im_start|>assistant", "<|im_end|>", "\\"]
tag_soup = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)
GROUND_TRUTHS = [
    answer(call("f", a=1)),
    answer(response="x"),
    answer(call("f"), call("g", b=[1]), response="y"),
    answer(),
]


@given(text=st.one_of(tag_soup, st.text(max_size=300)), gt=st.sampled_from(GROUND_TRUTHS))
def test_never_raises_and_stays_in_range(text, gt):
    assert format_reward(text, gt) in (0.0, 1.0)
    assert -3.0 <= correctness_reward(text, gt) <= 3.0
    assert set(compute_score("rlla", text, gt)) == {"score", "format", "correctness"}


def hostile_texts(size=64 * 1024):
    """Inputs that make naive regexes or parsers blow up, each about ``size`` characters."""

    def fill(unit, prefix="", suffix=""):
        return prefix + unit * ((size - len(prefix) - len(suffix)) // len(unit)) + suffix

    head = "<think>a</think>\n<tool_call>\n"
    return {
        "open tags": fill("<think>"),
        "close tags": fill("</think>", "<think>"),
        "separators": fill("</think>\n<response>", "<think>"),
        "tool_call lines": fill("<tool_call>\n", "<think>a</think>\n"),
        "nested arrays": head + "[" * (size // 2 - 40) + "]" * (size // 2 - 40) + "\n</tool_call>",
        "nested objects": head + fill('{"name": "f", "parameters": ', suffix="\n</tool_call>"),
        "many calls": head + fill(json.dumps(call("f", a=1)) + "\n", suffix="</tool_call>"),
        "huge number": head + '{"name": "f", "parameters": {"a": ' + "9" * (size - 80) + "}}\n</tool_call>",
        "tag mix": fill("<think><tool_call><response></response></tool_call></think>\n"),
    }


@pytest.mark.parametrize("name", list(hostile_texts()))
def test_hostile_input_is_fast(name):
    text = hostile_texts()[name]
    gt = answer(call("f", a=1), response="y")
    for fn in (format_reward, correctness_reward):
        best = min(_timed(fn, text, gt) for _ in range(3))  # best of 3: the machine may be busy
        assert best < 0.05, f"{fn.__name__} took {best * 1000:.1f} ms on {name}"


def _timed(fn, *args):
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start
