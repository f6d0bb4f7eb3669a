"""Hand-computed and property tests of the framework-free GDPO math (gdpo_verl/core/advantage.py).

Run: .venv/bin/python -m pytest tests/test_advantage_on_cpu.py
"""

import math

import pytest
import torch
from helpers.oracles import verl_grpo_on_sum

from gdpo_verl.core.advantage import (
    Condition,
    apply_conditions,
    final_normalize,
    gdpo_advantages,
    group_index,
)

EPS = 1e-6
R2 = 1 / math.sqrt(2)  # a G=2 group with two different values normalizes to -+1/sqrt(2), see below


def per_response(adv: torch.Tensor) -> list[float]:
    """(bs, T) advantages -> the per-response value (first token; rows are constant over valid tokens)."""
    return adv[:, 0].tolist()


def test_g2_toy_separates_under_gdpo_and_collapses_under_grpo():
    # Paper's toy, two G=2 groups with rewards (r1, r2):
    #   group a: (0,0), (0,1) -> sums 0, 1     group b: (0,0), (1,1) -> sums 0, 2
    # GRPO on sums, G=2 values (lo, hi): mean (lo+hi)/2, unbiased std |hi-lo|/sqrt(2), so the
    #   advantages are -+ (|hi-lo|/2) / (|hi-lo|/sqrt(2)) = -+1/sqrt(2) whatever the gap: both groups collapse.
    # GDPO: group a: r1 constant -> 0; r2 (0,1) -> -+1/sqrt(2); total -+0.707.
    #       group b: r1 (0,1) and r2 (0,1) -> -+1/sqrt(2) each; total -+1.414. Distinct.
    scores = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
    uids = ["a", "a", "b", "b"]
    mask = torch.ones(4, 3)
    grpo = verl_grpo_on_sum(scores, uids).tolist()
    gdpo = per_response(gdpo_advantages(scores, uids, mask, final_norm="none"))
    assert grpo == pytest.approx([-R2, R2, -R2, R2], abs=1e-5)
    assert gdpo == pytest.approx([-R2, R2, -2 * R2, 2 * R2], abs=1e-5)


def test_constant_sum_group_is_zero_under_both_methods():
    # Responses (1,0) and (0,1): the sum is 1 for both, so GRPO gives 0. GDPO: r1 (1,0) -> (+.707, -.707),
    # r2 (0,1) -> (-.707, +.707); with equal weights they cancel: 0 too. GDPO does NOT separate them.
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    mask = torch.ones(2, 2)
    assert verl_grpo_on_sum(scores, [0, 0]).tolist() == [0.0, 0.0]
    assert per_response(gdpo_advantages(scores, [0, 0], mask, final_norm="none")) == pytest.approx([0, 0], abs=1e-9)


def test_singleton_and_zero_std_groups_follow_verl():
    # verl's rules: a singleton group has mean 0, std 1 -> A = r / (1 + eps); an all-equal group -> 0.
    # 0.1 is not exact in float32; three of them must still give exactly 0, not rounding noise / eps.
    scores = torch.tensor([[3.0], [0.1], [0.1], [0.1]])
    adv = per_response(gdpo_advantages(scores, ["s", "z", "z", "z"], torch.ones(4, 1), final_norm="none"))
    assert adv[0] == pytest.approx(3.0 / (1 + EPS), rel=1e-7)
    assert adv[1:] == [0.0, 0.0, 0.0]


def test_without_std_is_mean_centering():
    # Group (1, 2, 6): mean 3 -> centered (-2, -1, 3) when the std division is off ("GRPO w/o std").
    adv = gdpo_advantages(
        torch.tensor([[1.0], [2.0], [6.0]]), [7, 7, 7], torch.ones(3, 2), norm_by_std=False, final_norm="none"
    )
    assert per_response(adv) == pytest.approx([-2.0, -1.0, 3.0])


def test_reward_scale_is_irrelevant_and_weights_act_after_normalization():
    scores = torch.tensor([[0.0, 1.0], [1.0, 3.0], [1.0, 2.0], [0.0, 0.0]])
    uids = [0, 0, 1, 1]
    mask = torch.ones(4, 2)
    base = gdpo_advantages(scores, uids, mask, final_norm="none")
    scaled = gdpo_advantages(scores * torch.tensor([100.0, 1.0]), uids, mask, final_norm="none")
    assert torch.allclose(base, scaled, atol=1e-5)
    # weight 2 on reward 0 equals doubling its normalized column
    a0 = gdpo_advantages(scores[:, :1], uids, mask, final_norm="none")
    a1 = gdpo_advantages(scores[:, 1:], uids, mask, final_norm="none")
    weighted = gdpo_advantages(scores, uids, mask, weights=[2.0, 1.0], final_norm="none")
    assert torch.allclose(weighted, 2 * a0 + a1, atol=1e-6)


def test_token_mode_matches_verl_masked_whiten():
    from verl.utils.torch_functional import masked_whiten

    torch.manual_seed(0)
    adv = torch.randn(6, dtype=torch.float64)
    mask = torch.zeros(6, 5)
    for i, n in enumerate([5, 1, 3, 2, 4, 5]):
        mask[i, :n] = 1
    ours = final_normalize(adv, mask, "token")
    ref = masked_whiten(adv.float().unsqueeze(-1) * mask, mask) * mask
    assert torch.allclose(ours, ref, atol=1e-5)


def test_sequence_mode_gives_zero_mean_unit_std_per_response():
    adv = torch.tensor([1.0, 2.0, 4.0, 8.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 1, 1]])
    out = final_normalize(adv, mask, "sequence")[:, 0]  # one value per response, token counts ignored
    assert out.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert out.std().item() == pytest.approx(1.0, abs=1e-5)


def test_missing_component_abstains_and_all_missing_response_is_excluded():
    nan = float("nan")
    # Reward 0 of response 1 is missing: group stats of reward 0 use responses 0, 2 only -> (1, 0) -> -+1/sqrt2
    # and response 1 contributes 0 for it. Response 3 (group b) is missing everything -> advantage 0.
    scores = torch.tensor([[1.0, 0.0], [nan, 1.0], [0.0, 1.0], [nan, nan], [2.0, 2.0]])
    uids = ["a", "a", "a", "b", "b"]
    mask = torch.ones(5, 4)
    adv = per_response(gdpo_advantages(scores, uids, mask, final_norm="none"))
    # reward 1 in group a: (0, 1, 1): mean 2/3, unbiased std sqrt(1/3) -> (-2/3, 1/3, 1/3) / 0.57735
    r1 = [(-2 / 3) / math.sqrt(1 / 3), (1 / 3) / math.sqrt(1 / 3), (1 / 3) / math.sqrt(1 / 3)]
    assert adv[:3] == pytest.approx([R2 + r1[0], r1[1], -R2 + r1[2]], abs=1e-5)
    # group b: reward 0 has one valid value (2.0): verl's singleton rule -> 2/(1+eps); same for reward 1
    assert adv[3] == 0.0 and adv[4] == pytest.approx(4.0, abs=1e-4)
    # final statistics ignore the all-missing response: same as dropping it from the batch
    full = gdpo_advantages(scores, uids, mask)
    keep = [0, 1, 2, 4]
    dropped = gdpo_advantages(scores[keep], [uids[i] for i in keep], mask[keep])
    assert torch.allclose(full[keep], dropped, atol=1e-6) and full[3].abs().sum() == 0
    assert torch.isfinite(full).all()


def test_empty_response_writes_nothing_and_does_not_move_statistics():
    scores = torch.tensor([[1.0], [0.0], [1.0], [0.5]])
    mask = torch.tensor([[1, 1, 1], [0, 0, 0], [1, 1, 0], [1, 0, 0]])
    adv = gdpo_advantages(scores, [0, 0, 1, 1], mask)
    assert adv[1].abs().sum() == 0  # nothing at index -1 or anywhere else
    assert (adv[mask == 0] == 0).all()
    tokens = adv[mask.bool()]
    assert tokens.mean().item() == pytest.approx(0.0, abs=1e-6)  # whitened over valid tokens only


def test_conditioned_reward_counts_only_above_threshold():
    nan = float("nan")
    scores = torch.tensor([[1.0, 1.0], [0.0, 1.0], [nan, 1.0]])  # (correctness, length)
    out = apply_conditions(scores, [Condition(target=1, on=0, threshold=1.0)])
    assert out[:2].tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert math.isnan(out[2, 1])  # undecidable gate -> the conditioned reward is missing too
    assert scores[1, 1] == 1.0  # input untouched


def test_group_ids_may_be_arbitrary_objects():
    codes, n = group_index([("p", 1), 5, "x", ("p", 1), 5])
    assert n == 3 and codes.tolist() == [0, 1, 2, 0, 1]
    with pytest.raises(ValueError, match="uid"):
        group_index(["a", None])


def test_unknown_final_norm_lists_valid_values():
    with pytest.raises(ValueError, match="token, sequence, none"):
        gdpo_advantages(torch.zeros(2, 1), [0, 0], torch.ones(2, 1), final_norm="batch")
