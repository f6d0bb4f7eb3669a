"""Tool-calling rewards (gdpo_verl.rewards.toolcall) on hand-computed cases, fuzzed, and timed on hostile text.

Every expected value is derived in a comment from the definitions in the module docstring (the reference's ToolRL
``rlla`` values by default, ``strict=True`` where a case says so):
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
        "<think>x</think>\n<tool_call>\n" + json.dumps([1, 2]) + "\n</tool_call>",  # not an object
        "<think>x</think>\n<tool_call>\n"
        + json.dumps(call("f", a=1))
        + "\n\n"
        + json.dumps(call("f", a=1))
        + "\n</tool_call>",  # a blank line between calls is a line that is not JSON, as in the reference
    ],
)
@pytest.mark.parametrize("strict", [False, True])
def test_missing_or_malformed_block_scores_minus_three(response, strict):
    assert correctness_reward(response, answer(call("f", a=1)), strict=strict) == -3.0


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
@pytest.mark.parametrize("strict", [False, True])
def test_partial_credit(gt_calls, pred_calls, expected, strict):
    # valid calls only: both modes score alike
    assert correctness_reward(answer(*pred_calls), answer(*gt_calls), strict=strict) == pytest.approx(expected)


def block(*lines):
    """A response whose tool-call block holds these raw lines (JSON-encoded unless already text)."""
    body = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    return f"<think>x</think>\n<tool_call>\n{body}\n</tool_call>"


# (ground truth, response, reference value, strict value): every branch of the reference's correctness reward
# (ToolRL rlla ``customize_correctness_reward_tool``: its catch-all gives -3 wherever its code raises).
GT_F, F_A1 = answer(call("f", a=1)), call("f", a=1)  # ground truth f(a=1), and that call
CORRECTNESS_BRANCHES = {
    "ground truth calls no tool": (answer(response="hi"), block(F_A1), 0.0, 0.0),
    "no block": (GT_F, answer(response="hi"), -3.0, -3.0),
    "unclosed block": (GT_F, "<think>x</think>\n<tool_call>\n" + json.dumps(F_A1), -3.0, -3.0),
    "a line is not JSON": (GT_F, block(F_A1, "{oops"), -3.0, -3.0),
    "a line is a JSON string": (GT_F, block(F_A1, '"f"'), -3.0, -3.0),
    "a line without a name": (GT_F, block(F_A1, {"parameters": {}}), -3.0, -3.0),
    "an unhashable name": (GT_F, block(F_A1, {"name": ["f"], "parameters": {}}), -3.0, -3.0),
    "exact match": (GT_F, block(F_A1), 3.0, 3.0),
    # names [f] vs [f, x]: 1/(1+2-1) = 0.5; f: keys 1 + value 1 = 2. S = 2.5, S_max = 3: R = 6*2.5/3 - 3 = 2.
    "an extra line without parameters": (GT_F, block(F_A1, {"name": "x"}), 2.0, -3.0),
    "an extra line with non-object parameters": (
        GT_F,
        block(F_A1, {"name": "x", "parameters": "a=1"}),
        2.0,
        -3.0,
    ),
    # a number as name is counted like any other (names [f] vs [f, 3]): as above, 2.0; strict wants a string.
    "an extra line with a numeric name": (GT_F, block(F_A1, {"name": 3, "parameters": {}}), 2.0, -3.0),
    # a call to a ground-truth tool without parameters: the reference reads them and fails.
    "a same-name line without parameters": (GT_F, block(F_A1, {"name": "f"}), -3.0, -3.0),
    "a same-name line with list parameters": (
        GT_F,
        block({"name": "f", "parameters": ["a"]}),
        -3.0,
        -3.0,
    ),
    # the only line names another tool, without parameters: names [f] vs [x] = 0, nothing matched: S = 0, R = -3.
    "only a line without parameters": (GT_F, block({"name": "x"}), -3.0, -3.0),
}


@pytest.mark.parametrize("case", list(CORRECTNESS_BRANCHES))
def test_correctness_branches_pin_the_reference_and_strict_values(case):
    gt, response, reference, strict = CORRECTNESS_BRANCHES[case]
    assert correctness_reward(response, gt) == pytest.approx(reference)
    assert correctness_reward(response, gt, strict=True) == pytest.approx(strict)


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


# (ground truth, response, reference value, strict value): every branch of the reference's format reward
# (ToolRL rlla ``customize_format_reward_func``: the layout regex, and the layout's tool_call/response tags once).
FORMAT_BRANCHES = {
    "think + tool_call": (answer(call("f")), answer(call("f", a=1)), 1.0, 1.0),
    "an extra <response>": (answer(call("f")), answer(call("f"), response="hi"), 0.0, 0.0),
    "no newline after </think>": (answer(call("f")), "<think>a</think><tool_call>\n{}\n</tool_call>", 0.0, 0.0),
    "block not on its own lines": (answer(call("f")), "<think>a</think>\n<tool_call>{}</tool_call>", 0.0, 0.0),
    "two tool_call blocks": (answer(call("f")), answer(call("f")) + "\n<tool_call>\n{}\n</tool_call>", 0.0, 0.0),
    # the lazy <think>.*?</think> spans a second think block / a stray </think>: the reference gives 1
    "two think blocks": (
        answer(call("f")),
        "<think>a</think><think>b</think>\n<tool_call>\n{}\n</tool_call>",
        1.0,
        0.0,
    ),
    "text after a stray </think>": (
        answer(call("f")),
        "<think>a</think> free text </think>\n<tool_call>\n{}\n</tool_call>",
        1.0,
        0.0,
    ),
    "think + response": (answer(response="x"), answer(response="hello"), 1.0, 1.0),
    "two responses": (
        answer(response="x"),
        "<think>a</think>\n<response>b</response>\n<response>c</response>",
        0.0,
        0.0,
    ),
    # only the layout's own tags are counted: a <tool_call> inside the reasoning of a response-only answer passes
    "a tool_call tag inside think": (
        answer(response="x"),
        "<think>a <tool_call></think>\n<response>b</response>",
        1.0,
        1.0,
    ),
    "all three in order": (answer(call("f"), response="x"), answer(call("g"), response="done"), 1.0, 1.0),
    "all three out of order": (
        answer(call("f"), response="x"),
        "<think>a</think>\n<response>b</response>\n<tool_call>\n{}\n</tool_call>",
        0.0,
        0.0,
    ),
    "think only": (answer(), "<think>only thinking</think>", 1.0, 1.0),
    "think only, twice": (answer(), "<think>a</think>\n<think>b</think>", 1.0, 0.0),
    "think only, trailing text": (answer(), "<think>a</think>\ntrailing text", 0.0, 0.0),
    "surrounding whitespace": (answer(response="x"), "  \n" + answer(response="hello") + "\n\n", 1.0, 1.0),
    "chat transcript": (
        answer(response="x"),
        "<|im_start|>assistant\n" + answer(response="y") + "<|im_end|>",
        1.0,
        1.0,
    ),
    "empty": (answer(response="x"), "", 0.0, 0.0),
}


@pytest.mark.parametrize("case", list(FORMAT_BRANCHES))
def test_format_branches_pin_the_reference_and_strict_values(case):
    gt, response, reference, strict = FORMAT_BRANCHES[case]
    assert format_reward(response, gt) == reference
    assert format_reward(response, gt, strict=True) == strict


def test_compute_score_sums_the_two_rewards():
    gt = answer(call("f", a=1))
    # format 1 (think + tool_call) and correctness 1 (value wrong: see test_partial_credit) -> score 2.
    assert compute_score("rlla", answer(call("f", a=2)), gt) == {"score": 2.0, "format": 1.0, "correctness": 1.0}
    # strict reaches both rewards: a second </think> and a padding line cost format 1 and correctness 5 (2 -> -3)
    hacked = "<think>a</think>b</think>\n<tool_call>\n" + json.dumps(call("f", a=1)) + '\n{"name": "x"}\n</tool_call>'
    assert compute_score("rlla", hacked, gt) == {"score": 3.0, "format": 1.0, "correctness": 2.0}
    assert compute_score("rlla", hacked, gt, strict=True) == {"score": -3.0, "format": 0.0, "correctness": -3.0}


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
    for strict in (False, True):
        assert format_reward(text, gt, strict=strict) in (0.0, 1.0)
        assert -3.0 <= correctness_reward(text, gt, strict=strict) <= 3.0
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
    for gt in (answer(call("f", a=1), response="y"), answer(call("f", a=1)), answer(response="y"), answer()):
        for fn in (format_reward, correctness_reward):
            for strict in (False, True):
                best = min(_timed(fn, text, gt, strict) for _ in range(3))  # best of 3: the machine may be busy
                assert best < 0.05, f"{fn.__name__} (strict={strict}) took {best * 1000:.1f} ms on {name}"


def _timed(fn, text, gt, strict):
    start = time.perf_counter()
    fn(text, gt, strict=strict)
    return time.perf_counter() - start
