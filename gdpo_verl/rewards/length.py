"""Length-budget reward (DeepScaleR and code tasks): 1.0 when the response is within budget, else 0.0.

``length_reward`` compares the response's token count, ``response_length`` (the count of valid response tokens
that the project's reward manager passes to every reward function taking that argument), with ``max_tokens``;
or, when ``max_chars`` is given, the response's character count with ``max_chars``. No tokenizer is loaded: the
manager's count is exact (the tokens the policy generated). The paper counts the length only for correct
answers; that condition is the estimator's job (recipe: ``condition: {on: correctness, threshold: 1.0}``), not
this function's. Pure; never raises on a response string.
Run the examples: ``python -m doctest -v gdpo_verl/rewards/length.py``.
"""

from __future__ import annotations

import numbers

from gdpo_verl.rewards.inputs import text_inputs

DEFAULT_MAX_TOKENS = 4000  # the paper's budget for DeepScaleR


@text_inputs
def length_reward(
    solution_str: str,
    response_length: int | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_chars: int | None = None,
) -> float:
    """1.0 when the response fits the budget: ``max_chars`` characters if given, else ``max_tokens`` tokens.

    ``response_length`` is the response's token count (an int; numpy integers from verl work too).
    Raises ValueError only for a call that gives neither a token count nor ``max_chars`` (a configuration error).

    >>> length_reward("a" * 100, max_chars=100), length_reward("a" * 101, max_chars=100)
    (1.0, 0.0)
    >>> length_reward("long text", response_length=4001)  # over the paper's 4000-token budget
    0.0
    >>> length_reward("long text", response_length=4000)  # the budget is inclusive
    1.0
    """
    if max_chars is not None:
        return 1.0 if len(solution_str) <= max_chars else 0.0
    if not isinstance(response_length, numbers.Real) or isinstance(response_length, bool):
        raise ValueError(
            f"length_reward needs response_length (tokens, passed by the gdpo_multi reward manager) or max_chars; "
            f"got response_length={response_length!r}"
        )
    return 1.0 if int(response_length) <= max_tokens else 0.0
