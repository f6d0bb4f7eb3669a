"""Reward functions that record what they return, for the end-to-end data-path tests (tests/test_e2e_on_cpu.py).

Each call returns fresh random values (so every value in a run is distinct) and appends one JSON line to
``<out_dir>/returned.jsonl``; the test then finds exactly those values in the per-reward tensors the estimator saw
(``algorithm.gdpo_dump_dir``). Calls run in several processes: each line is one ``O_APPEND`` write.
Run: used through tests/helpers/configs/e2e_recorded.yaml (python -m pytest tests/test_e2e_on_cpu.py).
"""

import json
import os
import random


def _record(out_dir: str, kind: str, value) -> None:
    os.makedirs(out_dir, exist_ok=True)
    line = (json.dumps({"kind": kind, "value": value}) + "\n").encode()
    fd = os.open(os.path.join(out_dir, "returned.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def outcome(solution_str: str, out_dir: str) -> float:
    """One random value in [0, 1) per response, exactly representable in float32 (a multiple of 2**-20)."""
    value = random.SystemRandom().randrange(2**20) / 2**20
    _record(out_dir, "outcome", value)
    return value


def per_token(response_length: int, out_dir: str) -> list[float]:
    """A process reward: one random value per response token, each a multiple of 2**-20 (exact in float32)."""
    rng = random.SystemRandom()
    values = [rng.randrange(2**20) / 2**20 for _ in range(response_length)]
    _record(out_dir, "per_token", values)
    return values
