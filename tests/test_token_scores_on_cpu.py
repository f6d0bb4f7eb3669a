"""``gdpo_verl.core.token_scores``: the layout of the per-reward tensors and each response's value.

Run: .venv/bin/python -m pytest tests/test_token_scores_on_cpu.py
"""

import math

import pytest
import torch

from gdpo_verl.core.contract import TOKENS_PREFIX, without_token_lists
from gdpo_verl.core.token_scores import per_response, token_score_tensors


def test_outcome_values_sit_on_the_last_valid_token_and_abstentions_are_nan_there():
    infos = [{"r": 2.0}, {"r": None}, {}, {"r": float("nan")}, {"r": -1.5}]
    t = token_score_tensors(infos, ["r"], torch.tensor([3, 2, 1, 4, 0]), width=4)["token_level_scores_r"]
    assert t.dtype == torch.float32 and t.shape == (5, 4)
    assert t[0].tolist() == [0.0, 0.0, 2.0, 0.0]
    assert all(math.isnan(t[i, n - 1]) for i, n in ((1, 2), (2, 1), (3, 4)))
    assert t[4].tolist() == [-1.5, 0.0, 0.0, 0.0]  # an empty response keeps its value on position 0
    assert torch.isnan(per_response(t)[1:4]).all() and per_response(t)[[0, 4]].tolist() == [2.0, -1.5]


def test_a_value_that_is_not_a_number_is_refused_not_silently_dropped():
    with pytest.raises(ValueError, match=r"reward_extra_info\['r'\] must hold numbers or None; found str 'x'"):
        token_score_tensors([{"r": 1.0}, {"r": "x"}], ["r"], torch.tensor([1, 1]), width=1)


def test_a_process_reward_lands_on_its_tokens_and_counts_by_its_sum():
    infos = [{"r": 0.75, TOKENS_PREFIX + "r": [0.5, 0.0, 0.25]}, {"r": 1.0, TOKENS_PREFIX + "r": [1.0]}]
    t = token_score_tensors(infos, ["r"], torch.tensor([3, 2]), width=3)["token_level_scores_r"]
    assert t[0].tolist() == [0.5, 0.0, 0.25]
    assert t[1].tolist() == [0.0, 1.0, 0.0]  # a list of another length (a session's earlier output): its sum
    assert per_response(t).tolist() == [0.75, 1.0]
    assert without_token_lists(infos[0]) == {"r": 0.75}


def test_a_float32_sum_that_overflows_is_taken_again_in_float64():
    t = torch.tensor([[3e38, 3e38, 0.0], [1.0, 2.0, 0.0], [float("inf"), 1.0, 0.0]], dtype=torch.float32)
    total = per_response(t)
    assert total.dtype == torch.float64 and total[0].item() == float(torch.tensor(3e38)) * 2
    assert total[1].item() == 3.0 and math.isinf(total[2].item())
