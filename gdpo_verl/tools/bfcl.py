"""BFCL (Berkeley Function Calling Leaderboard) scoring for the tool-calling task, offline, with BFCL's own checker.

The paper reports tool-calling accuracy on BFCL-v3. The ``bfcl-eval`` package (2026.3.23) ships the leaderboard's
AST checker and its question and possible-answer files (BFCL v4 files, which keep v3's non-live and live
categories) inside the wheel, so nothing is downloaded. Install it without its dependencies, which are the
leaderboard's API clients and retrieval stack and none of which the checker needs:

    pip install --no-deps bfcl-eval==2026.3.23        (``make install`` does this)

Use (``python -m gdpo_verl.tools.evaluate --task bfcl CKPT`` runs it end to end):

    items = load_items(["simple_python", "irrelevance"])        # [BFCLItem], offline
    prompt = chat_prompt(items[0])                              # rlla-style system prompt + BFCL's user turn
    verdict(items[0], "<think>..</think>\\n<tool_call>\\n{...}\\n</tool_call>")   # True / False

The model answers as it was trained (``gdpo_verl.rewards.toolcall``): ``<tool_call>`` then one JSON object per
line, ``{"name": ..., "parameters": {...}}``. ``to_bfcl_calls`` turns those lines into BFCL's decoded call format
``[{name: {param: value}}]``; a response without a (well-formed) block has no call. Verdicts follow BFCL's runner:
AST categories (``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple`` and their ``live_`` twins):
the calls must decode and pass ``ast_checker`` against the possible answers; ``irrelevance`` and
``live_irrelevance``: correct when no call decodes; ``live_relevance``: correct when one does. Java and
JavaScript categories are left out (the checker reads their values as Java/JS source strings, not JSON).

One hook into bfcl-eval: its checker module imports the leaderboard's model registry only to ask, in
``convert_func_name``, whether a model's API renames ``a.b`` to ``a_b``; importing that registry pulls every API
client. The checker is imported with a one-entry registry in its place (this project's prompt keeps names as they
are), and the checker's source is pinned by sha256 (``PINNED_CHECKER_SHA256``; a test fails when it changes).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import sys
import types
from dataclasses import dataclass
from importlib import resources
from typing import Any

BFCL_VERSION = "2026.3.23"
INSTALL_HINT = f"pip install --no-deps bfcl-eval=={BFCL_VERSION}"
#: sha256 of inspect.getsource(bfcl_eval.eval_checker.ast_eval.ast_checker) in bfcl-eval 2026.3.23.
PINNED_CHECKER_SHA256 = "2aae7a68461a8f76c0be3894c8901b66b56967a1989d3ab066051e3fb97f1538"
MODEL_NAME = "gdpo-verl-toolcall"  # the registry entry the checker looks up (names kept as they are)

NON_LIVE = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance")
CATEGORIES = NON_LIVE + LIVE
NO_CALL_CATEGORIES = ("irrelevance", "live_irrelevance")  # correct when the model calls nothing
ANY_CALL_CATEGORIES = ("live_relevance",)  # correct when the model calls something

SYSTEM_PROMPT = """You are a helpful multi-turn dialogue assistant capable of leveraging tool calls to solve user \
tasks and provide structured chat responses.

**Available Tools**
In your response, you can use the following tools:
{tools}

**Steps for Each Turn**
1. **Think:** Recall relevant context and analyze the current user goal.
2. **Decide on Tool Usage:** If a tool is needed, specify the tool and its parameters.
3. **Respond Appropriately:** If a response is needed, generate one while maintaining consistency across user queries.

**Output Format**
```plaintext
<think> Your thoughts and reasoning </think>
<tool_call>
{{"name": "Tool name", "parameters": {{"Parameter name": "Parameter content", "... ...": "... ..."}}}}
{{"name": "... ...", "parameters": {{"... ...": "... ...", "... ...": "... ..."}}}}
...
</tool_call>
<response> AI's final response </response>
```

**Important Notes**
1. You must always include the `<think>` field to outline your reasoning. Provide at least one of `<tool_call>` or \
`<response>`. Decide whether to use `<tool_call>` (possibly multiple times), `<response>`, or both.
2. You can invoke multiple tool calls simultaneously in the `<tool_call>` fields. Each tool call should be a JSON \
object with a "name" field and a "parameters" field containing a dictionary of parameters. If no parameters are \
needed, leave the "parameters" field an empty dictionary.
3. If none of the tools fits the request, do not call any tool: answer in `<response>`."""


@dataclass(frozen=True)
class BFCLItem:
    """One BFCL test entry: its id and category, the chat turns of the question, the function docs, and the
    possible answers (``[{name: {param: [allowed values]}}]``; None for the (ir)relevance categories)."""

    id: str
    category: str
    messages: tuple[dict, ...]
    functions: tuple[dict, ...]
    possible_answer: tuple[dict, ...] | None


def _require_bfcl():
    try:
        return resources.files("bfcl_eval")
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"BFCL scoring needs the bfcl-eval package: {INSTALL_HINT}") from None


def _read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_items(categories=CATEGORIES, limit: int | None = None) -> list[BFCLItem]:
    """The test entries of ``categories`` from the files inside bfcl-eval (``limit``: the first N of each)."""
    from gdpo_verl.core.choices import check_choice

    root = _require_bfcl() / "data"
    items = []
    for category in categories:
        check_choice("BFCL category", category, CATEGORIES)
        entries = _read_jsonl(root / f"BFCL_v4_{category}.json")[:limit]
        answers = {}
        if category not in NO_CALL_CATEGORIES + ANY_CALL_CATEGORIES:
            answers = {
                a["id"]: a["ground_truth"] for a in _read_jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")
            }
        for entry in entries:
            if len(entry["question"]) != 1:
                raise ValueError(f"BFCL entry {entry['id']} has {len(entry['question'])} turns; single-turn only")
            items.append(
                BFCLItem(
                    id=entry["id"],
                    category=category,
                    messages=tuple(entry["question"][0]),
                    functions=tuple(entry["function"]),
                    possible_answer=tuple(answers[entry["id"]]) if answers else None,
                )
            )
    return items


def chat_prompt(item: BFCLItem) -> list[dict]:
    """The chat turns for the model: the training prompts' system layout listing the item's functions, then
    BFCL's own turns (a system turn of BFCL's is appended to ours)."""
    tools = "\n".join(
        f"{i}. Name: {f['name']}\nDescription: {f.get('description', '')}\n"
        f"Parameters: {json.dumps(f.get('parameters', {}))}"
        for i, f in enumerate(item.functions, 1)
    )
    system = SYSTEM_PROMPT.format(tools=tools)
    turns = [dict(m) for m in item.messages]
    extra = [m["content"] for m in turns if m.get("role") == "system"]
    return [
        {"role": "system", "content": "\n\n".join([system, *extra])},
        *(m for m in turns if m.get("role") != "system"),
    ]


def to_bfcl_calls(response: str) -> list[dict[str, dict]] | None:
    """BFCL's decoded call list ``[{name: {param: value}}]`` from the ``<tool_call>`` block of a response; None when
    there is no block or a line is not ``{"name": <string>, "parameters": <object>}`` (BFCL: decoding failed).

    >>> to_bfcl_calls('<think>t</think>\\n<tool_call>\\n{"name": "f", "parameters": {"x": 1}}\\n</tool_call>')
    [{'f': {'x': 1}}]
    >>> to_bfcl_calls('<think>t</think>\\n<response>no tool fits</response>') is None
    True
    """
    from gdpo_verl.rewards.toolcall import _assistant_text

    text = _assistant_text(response)
    if "<tool_call>" not in text or "</tool_call>" not in text.split("<tool_call>", 1)[1]:
        return None
    block = text.split("<tool_call>", 1)[1].split("</tool_call>", 1)[0].strip()
    calls = []
    for line in block.splitlines():
        if not line.strip():
            continue
        try:
            call = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not (
            isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("parameters"), dict)
        ):
            return None
        calls.append({call["name"]: call["parameters"]})
    return calls or None


@contextlib.contextmanager
def _registry_stub():
    """While the checker is imported: a one-entry model registry in place of bfcl-eval's (which imports every
    API client); removed afterwards so nothing else sees it."""
    name = "bfcl_eval.constants.model_config"
    if name in sys.modules:  # the real registry is loaded already (a full bfcl-eval install): nothing to do
        yield
        return
    stub = types.ModuleType(name)
    stub.MODEL_CONFIG_MAPPING = {MODEL_NAME: types.SimpleNamespace(underscore_to_dot=False)}
    sys.modules[name] = stub
    try:
        yield
    finally:
        del sys.modules[name]


def checker_module():
    """bfcl-eval's AST checker module (imported once; see the module docstring for the registry stub)."""
    _require_bfcl()
    with _registry_stub():
        from bfcl_eval.eval_checker.ast_eval import ast_checker
    mapping = ast_checker.MODEL_CONFIG_MAPPING
    if MODEL_NAME not in mapping:  # the real registry: add this project's entry (names kept as they are)
        mapping[MODEL_NAME] = types.SimpleNamespace(underscore_to_dot=False)
    return ast_checker


def checker_source_sha256() -> str:
    """sha256 of the installed checker's source (compared with ``PINNED_CHECKER_SHA256`` by the tests)."""
    return hashlib.sha256(inspect.getsource(checker_module()).encode()).hexdigest()


def verdict(item: BFCLItem, response: str) -> bool:
    """True when BFCL counts ``response`` correct for ``item`` (module docstring)."""
    calls = to_bfcl_calls(response)
    if item.category in NO_CALL_CATEGORIES:
        return calls is None
    if item.category in ANY_CALL_CATEGORIES:
        return calls is not None
    if calls is None:
        return False
    module = checker_module()
    from bfcl_eval.constants.enums import Language

    result: dict[str, Any] = module.ast_checker(
        list(item.functions), calls, list(item.possible_answer), Language.PYTHON, item.category, MODEL_NAME
    )
    return bool(result["valid"])


__all__ = [
    "CATEGORIES",
    "LIVE",
    "NON_LIVE",
    "BFCLItem",
    "chat_prompt",
    "checker_module",
    "load_items",
    "to_bfcl_calls",
    "verdict",
]
