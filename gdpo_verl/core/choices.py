"""Option checks used by every config of the project: each error names the option, the bad value and the fix.

``check_choice`` (a fixed set of values), ``real_number`` (a finite/positive/bounded number, not a bool or a
string), ``yaml_on`` (YAML 1.1 reads an unquoted ``on`` key as True), and ``first_of`` / ``clipped`` (messages stay a
few hundred characters, whatever the config holds).

>>> check_choice("algorithm.gdpo_final_norm", "token", ("token", "sequence", "none"))
'token'
>>> check_choice("algorithm.gdpo_final_norm", "tokens", ("token", "sequence", "none"))
Traceback (most recent call last):
...
ValueError: algorithm.gdpo_final_norm='tokens' is unknown; valid values: token, sequence, none
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def check_choice(what: str, value, valid: Sequence[str]):
    """Return ``value`` if it is one of ``valid``, else raise a ValueError naming ``what`` and the valid values."""
    if value not in valid:
        raise ValueError(f"{what}={value!r} is unknown; valid values: {', '.join(map(str, valid))}")
    return value


MESSAGE_ITEMS = 5  # names listed in an error message before "... and N more"
MESSAGE_CHARS = 120  # characters of a value's repr shown in an error message


def first_of(items, limit: int = MESSAGE_ITEMS) -> str:
    """The first ``limit`` of ``items`` (sorted as given), then how many more.

    >>> first_of(["a", "b"]), first_of(range(10_000), 3)
    ("['a', 'b']", '[0, 1, 2] and 9997 more')
    """
    items = list(items)
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return f"{items[:limit]!r}{more}"


def clipped(value, limit: int = MESSAGE_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001  (a hostile __repr__)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more chars]"


def real_number(
    value, where: str, *, finite: bool = True, positive: bool = False, at_most: float | None = None, why: str = ""
) -> float:
    """``value`` as a float if it is a real number (not a bool, not a string); ValueError naming ``where``.

    >>> real_number(2, "weight")
    2.0
    >>> real_number("1", "weight")
    Traceback (most recent call last):
    ...
    ValueError: weight='1' must be a number, not str
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}={clipped(value)} must be a number, not {type(value).__name__}")
    number = float(value)
    if finite and not math.isfinite(number):
        raise ValueError(f"{where}={value!r} must be a finite number")
    if positive and not number > 0:
        raise ValueError(f"{where}={value!r} must be a positive number")
    if at_most is not None and not abs(number) <= at_most:
        raise ValueError(f"{where}={value!r} is too large: its magnitude must be at most {at_most:g}{why}")
    return number


def yaml_on(condition):
    """YAML 1.1 reads an unquoted ``on`` key as the boolean True; take it back as ``"on"``.

    >>> yaml_on({True: "correctness", "threshold": 1.0})
    {'on': 'correctness', 'threshold': 1.0}
    """
    if isinstance(condition, Mapping) and True in condition and "on" not in condition:
        condition = {("on" if k is True else k): v for k, v in condition.items()}
    return condition
