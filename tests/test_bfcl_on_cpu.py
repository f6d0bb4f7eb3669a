"""BFCL scoring (gdpo_verl.tools.bfcl): the model's ``<tool_call>`` lines converted to BFCL's call format, and
verdicts of bfcl-eval's own AST checker on hand cases whose verdict is known from BFCL's rules, offline.

Skips only when bfcl-eval is not installed (``make install`` installs it: pip install --no-deps bfcl-eval).
Run: python -m pytest tests/test_bfcl_on_cpu.py
"""

import doctest
import json
import math

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval not installed: pip install --no-deps bfcl-eval==2026.3.23")

from gdpo_verl.tools import bfcl  # noqa: E402


def respond(*calls, think="t"):
    """A response in the training format with these (name, parameters) calls."""
    lines = "\n".join(json.dumps({"name": name, "parameters": params}) for name, params in calls)
    return f"<think>{think}</think>\n<tool_call>\n{lines}\n</tool_call>"


@pytest.fixture(scope="module")
def items():
    return {item.id: item for item in bfcl.load_items(limit=1)}


def test_doctests():
    assert doctest.testmod(bfcl).failed == 0


def test_the_checker_is_the_pinned_one():
    # The registry stub relies on the checker's import and convert_func_name as pinned: a new bfcl-eval fails here.
    assert bfcl.checker_source_sha256() == bfcl.PINNED_CHECKER_SHA256, "bfcl-eval changed its AST checker"


def test_every_category_loads_offline_with_its_possible_answers(items):
    assert {item.category for item in items.values()} == set(bfcl.CATEGORIES)
    for item in items.values():
        assert item.functions and item.messages
        assert (item.possible_answer is None) == (
            item.category in ("irrelevance", "live_irrelevance", "live_relevance")
        )
    full = bfcl.load_items(["simple_python"])
    assert len(full) == 400 and len({i.id for i in full}) == 400  # BFCL's simple_python set, whole
    with pytest.raises(ValueError, match="BFCL category='simple_java'.*valid values: simple_python"):
        bfcl.load_items(["simple_java"])


@pytest.mark.parametrize(
    ("response", "calls"),
    [
        (respond(("f", {"x": 1}), ("g", {})), [{"f": {"x": 1}}, {"g": {}}]),
        (respond(("math.factorial", {"number": 5})), [{"math.factorial": {"number": 5}}]),  # names kept as they are
        ("<think>t</think>\n<response>none fits</response>", None),  # no block: no call
        ("<think>t</think>\n<tool_call>\n\n</tool_call>", None),  # an empty block: no call (BFCL: empty output)
        ("<think>t</think>\n<tool_call>\n{bad json\n</tool_call>", None),  # decoding fails
        ('<think>t</think>\n<tool_call>\n{"name": "f"}\n</tool_call>', None),  # no parameters object
        ('<think>t</think>\n<tool_call>\n{"name": 3, "parameters": {}}\n</tool_call>', None),  # name not a string
        ('<think>t</think>\n<tool_call>\n{"name": "f", "parameters": {}}', None),  # block never closed
        ("<|im_start|>assistant\n" + respond(("f", {})) + "<|im_end|>", [{"f": {}}]),  # a chat transcript
    ],
)
def test_tool_call_lines_become_bfcl_calls(response, calls):
    assert bfcl.to_bfcl_calls(response) == calls


# (item id, response, BFCL's verdict) on the first entry of each category; the reasons follow BFCL's AST rules.
# simple_python_0: calculate_triangle_area(base=10, height=5, unit optional: "units" or absent).
TRIANGLE = "calculate_triangle_area"
HAND_CASES = [
    ("simple_python_0", respond((TRIANGLE, {"base": 10, "height": 5})), True),
    ("simple_python_0", respond((TRIANGLE, {"base": 10, "height": 5, "unit": "units"})), True),  # optional, allowed
    ("simple_python_0", respond((TRIANGLE, {"base": 11, "height": 5})), False),  # wrong value
    ("simple_python_0", respond((TRIANGLE, {"base": 10})), False),  # a required parameter missing
    ("simple_python_0", respond((TRIANGLE, {"base": "10", "height": 5})), False),  # string for an integer
    ("simple_python_0", respond((TRIANGLE, {"base": 10, "height": 5, "color": "red"})), False),  # unknown parameter
    ("simple_python_0", respond((TRIANGLE, {"base": 10, "height": 5}), (TRIANGLE, {"base": 1, "height": 1})), False),
    ("simple_python_0", respond(("triangle_area", {"base": 10, "height": 5})), False),  # wrong function
    ("simple_python_0", "<think>t</think>\n<response>The area is 25.</response>", False),  # no call
    # parallel_0: spotify.play for Taylor Swift (20) and Maroon 5 (15), in any order
    (
        "parallel_0",
        respond(
            ("spotify.play", {"artist": "Maroon 5", "duration": 15}),
            ("spotify.play", {"artist": "Taylor Swift", "duration": 20}),
        ),
        True,
    ),
    ("parallel_0", respond(("spotify.play", {"artist": "Taylor Swift", "duration": 20})), False),  # one of two
    # multiple_0: triangle_properties.get(side1=5, side2=4, side3=3) chosen among two functions
    ("multiple_0", respond(("triangle_properties.get", {"side1": 5, "side2": 4, "side3": 3})), True),
    ("multiple_0", respond(("circle_properties.get", {"radius": 5})), False),
    # irrelevance: no function fits; correct exactly when nothing is called
    ("irrelevance_0", "<think>t</think>\n<response>I cannot compute that with these tools.</response>", True),
    ("irrelevance_0", respond(("determine_body_mass_index", {"weight": 10, "height": 5})), False),
    # live_relevance: some call is expected
    ("live_relevance_0-0-0", respond(("generate_image", {"prompt": "a masked woman"})), True),
    ("live_relevance_0-0-0", "<think>t</think>\n<response>ok</response>", False),
    # live_simple_0: get_user_info(user_id=7890, special="black")
    ("live_simple_0-0-0", respond(("get_user_info", {"user_id": 7890, "special": "black"})), True),
    ("live_simple_0-0-0", respond(("get_user_info", {"user_id": 7890, "special": "white"})), False),
]


@pytest.mark.parametrize(("item_id", "response", "expected"), HAND_CASES)
def test_verdicts_of_bfcls_checker_on_hand_cases(items, item_id, response, expected):
    assert bfcl.verdict(items[item_id], response) is expected


def test_prompt_lists_the_functions_in_the_training_layout(items):
    item = items["multiple_0"]
    prompt = bfcl.chat_prompt(item)
    assert [turn["role"] for turn in prompt] == ["system", "user"]
    assert (
        "1. Name: triangle_properties.get" in prompt[0]["content"]
        and "2. Name: circle_properties.get" in prompt[0]["content"]
    )
    assert "<tool_call>" in prompt[0]["content"] and prompt[1]["content"] == item.messages[-1]["content"]


def test_missing_package_error_says_how_to_install(monkeypatch):
    import importlib.resources

    def absent(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(importlib.resources, "files", absent)
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps bfcl-eval==2026\.3\.23"):
        bfcl.load_items(["simple_python"])


def test_the_evaluator_scores_bfcl_per_category_with_the_summary_rows(items):
    from gdpo_verl.generation import Generation
    from gdpo_verl.tools import evaluate as ev

    chosen = [items["simple_python_0"], items["irrelevance_0"], items["live_simple_0-0-0"], items["parallel_0"]]
    responses = [
        respond((TRIANGLE, {"base": 10, "height": 5})),  # right
        "<think>t</think>\n<response>no tool fits</response>",  # right: nothing called
        respond(("get_user_info", {"user_id": 1})),  # wrong
        respond(("spotify.play", {"artist": "Taylor Swift", "duration": 20})),  # wrong: one call of two
    ]
    result = ev.score(ev.TASKS["bfcl"], [Generation(r, 10) for r in responses], chosen, budget=1024)
    assert (result["simple_python"], result["irrelevance"], result["parallel"]) == (100.0, 100.0, 0.0)
    assert result["live_simple"] == 0.0 and math.isnan(result["multiple"])  # not evaluated: NaN, left out
    assert result["non_live"] == pytest.approx(200 / 3)  # unweighted over simple_python, parallel, irrelevance
    assert result["live"] == 0.0 and result["overall"] == pytest.approx(100 / 3)
    assert result["format"] == 100.0 and result["n"] == 4.0  # every response has the layout its entry calls for
