"""Reward function of the CPU smoke run (loaded by verl through ``reward.custom_reward_function.path``).

A random tiny model almost never answers correctly, so a correctness-only reward would be constant, every GRPO
advantage zero and the run would prove nothing about learning. The score is therefore 1 for a response that
contains the ground-truth answer plus a length term in [0, 1) that differs between sampled responses.
"""

_LENGTH_SCALE = 64


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """``float(answer found) + min(len(response), 63) / 64``."""
    found = str(ground_truth) in solution_str
    return float(found) + min(len(solution_str), _LENGTH_SCALE - 1) / _LENGTH_SCALE
