"""Reward inputs as the data gives them: ``text_inputs`` makes a reward function take any response and ground truth.

verl hands reward functions the decoded response and ``reward_model.ground_truth`` as stored in the parquet file,
which may be a number (a GSM8K answer ``7``), None, or bytes. Decorated functions see both as text:

    >>> as_text(7), as_text(7.0), as_text(2.5), as_text(None), as_text(b"<a>7</a>"), as_text(True)
    ('7', '7', '2.5', '', '<a>7</a>', 'True')

Used by every reward function of ``gdpo_verl.rewards`` and the demo's; the signature seen by the manager is kept.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

TEXT_ARGS = ("solution_str", "ground_truth")


def as_text(value: Any) -> str:
    """``value`` as text: None -> "", bytes decoded (invalid bytes replaced), integral floats without ``.0``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    try:
        return str(value)
    except Exception:  # noqa: BLE001  (an object whose __str__ raises is no answer)
        return ""


def text_inputs(fn: Callable) -> Callable:
    """Decorator: ``solution_str`` and ``ground_truth`` (by keyword or position) reach ``fn`` as text."""
    import inspect

    names = list(inspect.signature(fn).parameters)
    positions = {name: names.index(name) for name in TEXT_ARGS if name in names}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = list(args)
        for name, index in positions.items():
            if name in kwargs:
                kwargs[name] = as_text(kwargs[name])
            elif index < len(args):
                args[index] = as_text(args[index])
        return fn(*args, **kwargs)

    return wrapper
