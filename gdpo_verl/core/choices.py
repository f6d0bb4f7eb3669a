"""The one check for options with a fixed set of values: the error names the option, the bad value and the valid ones.

>>> check_choice("algorithm.gdpo_final_norm", "token", ("token", "sequence", "none"))
'token'
>>> check_choice("algorithm.gdpo_final_norm", "tokens", ("token", "sequence", "none"))
Traceback (most recent call last):
...
ValueError: algorithm.gdpo_final_norm='tokens' is unknown; valid values: token, sequence, none
"""

from __future__ import annotations

from collections.abc import Sequence


def check_choice(what: str, value, valid: Sequence[str]):
    """Return ``value`` if it is one of ``valid``, else raise a ValueError naming ``what`` and the valid values."""
    if value not in valid:
        raise ValueError(f"{what}={value!r} is unknown; valid values: {', '.join(map(str, valid))}")
    return value
