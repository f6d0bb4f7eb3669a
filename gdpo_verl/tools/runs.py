"""Reading a training run back: verl's ``metrics.jsonl`` (file logger) as rows or as per-metric series.

verl's ``FileLogger`` writes one ``{"step": int, "data": {metric: value}}`` line per logged step (training and
validation steps alike). ``read_rows`` returns them as ``[{"step": n, **data}]`` in file order (every line checked,
a bad one named with its line number); ``training_rows`` keeps the training steps; ``read_series`` turns them into
``{metric: (steps (n,) int64, values (n,) float64)}`` for plotting. Used by ``gdpo_verl.tools.plot``,
``bench/demo.py`` and the end-to-end tests. Try: ``python -m gdpo_verl.tools.runs RUN/metrics.jsonl``.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import numpy as np

METRICS_FILE = "metrics.jsonl"
TRAINING_STEP_KEY = "training/global_step"
#: verl's validation means: ``val-{core,aux}/<data source, may hold "/">/<name>/mean@<samples>``
VAL_MEAN = re.compile(r"^val-(?:core|aux)/(?P<source>.+)/(?P<name>[^/]+)/mean@(?P<n>\d+)$")


def parse_row(line: str | bytes) -> dict:
    """One verl file-logger line -> ``{"step": n, **data}``; ValueError when it is not one."""
    try:
        record = json.loads(line)
        return {**record["data"], "step": int(record["step"])}
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"not a verl file-logger line ({err})") from None


def read_rows(path: str | Path) -> list[dict]:
    """Every line of a verl file-logger jsonl as ``{"step": n, **data}``; ValueError naming a bad line."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(parse_row(line))
            except ValueError as err:
                raise ValueError(f"{path}:{number}: {err}") from None
    return rows


def training_rows(path: str | Path) -> list[dict]:
    """The training steps of ``read_rows`` (validation-only lines left out); [] when the file does not exist."""
    if not Path(path).exists():
        return []
    return [row for row in read_rows(path) if TRAINING_STEP_KEY in row]


def read_series(path: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{metric: (steps (n,), values (n,))}``, steps ascending; non-numeric, null and non-finite values skipped.

    A step logged twice (a resumed run) keeps its last value.
    """
    series: dict[str, dict[int, float]] = {}
    for row in read_rows(path):
        for name, value in row.items():
            if name == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                series.setdefault(name, {})[row["step"]] = float(value)
    out = {}
    for name, points in series.items():
        steps = np.array(sorted(points), dtype=np.int64)
        out[name] = (steps, np.array([points[s] for s in steps.tolist()], dtype=np.float64))
    return out


if __name__ == "__main__":
    for row in training_rows(sys.argv[1]):
        print(row["step"], {k: v for k, v in row.items() if k.startswith("gdpo/") and k.endswith("/mean")})
