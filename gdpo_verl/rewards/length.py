"""Length-budget reward (DeepScaleR and code tasks): 1.0 when the response is within budget, else 0.0.

``length_reward`` counts at most ``max_tokens`` tokens (from ``extra_info["response_length"]`` when the reward
manager provides it, else with the ``tokenizer`` named by the recipe, e.g. ``${actor_rollout_ref.model.path}``),
or at most ``max_chars`` characters when that is given instead. The paper counts the length only for correct
answers; that condition is the estimator's job (recipe: ``condition: {on: correctness, threshold: 1.0}``), not
this function's. Pure (the tokenizer is loaded once and cached); never raises on a response string.
Run the examples: ``python -m doctest -v gdpo_verl/rewards/length.py``.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any

DEFAULT_MAX_TOKENS = 4000  # the paper's budget for DeepScaleR


@functools.lru_cache(maxsize=4)
def _load_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer  # imported on first use: only token budgets need it

    return AutoTokenizer.from_pretrained(name)


def response_tokens(solution_str: str, extra_info: dict | None = None, tokenizer: str | None = None) -> int | None:
    """Token count of the response: ``extra_info["response_length"]`` if present, else the tokenizer's count.

    >>> response_tokens("ignored", {"response_length": 1234})
    1234
    """
    length = (extra_info or {}).get("response_length")
    if isinstance(length, numbers.Real) and not isinstance(length, bool):
        return int(length)
    if tokenizer:
        return len(_load_tokenizer(tokenizer).encode(solution_str, add_special_tokens=False))
    return None


def length_reward(
    solution_str: str,
    extra_info: dict | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    tokenizer: str | None = None,
    max_chars: int | None = None,
) -> float:
    """1.0 when the response fits the budget: ``max_chars`` characters if given, else ``max_tokens`` tokens.

    >>> length_reward("a" * 100, max_chars=100), length_reward("a" * 101, max_chars=100)
    (1.0, 0.0)
    >>> length_reward("long text", {"response_length": 4001})  # over the paper's 4000-token budget
    0.0
    """
    if max_chars is not None:
        return 1.0 if len(solution_str) <= max_chars else 0.0
    tokens = response_tokens(solution_str, extra_info, tokenizer)
    if tokens is None:
        raise ValueError("length_reward needs max_chars, a tokenizer, or extra_info['response_length']")
    return 1.0 if tokens <= max_tokens else 0.0
