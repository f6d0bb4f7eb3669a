"""Reward functions for ``bench/reward_calls.py --hang``: one that answers at once, and one that never returns.

``maybe_hang`` returns 1.0 unless the response is ``"hang"``, where it blocks for an hour (sleeping, as a call
stuck on I/O does, so hung calls do not take CPU from the rest of the benchmark).
"""

import time


def maybe_hang(solution_str: str) -> float:
    if solution_str == "hang":
        time.sleep(3600)
    return 1.0
