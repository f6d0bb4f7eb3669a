"""GD2PO advantage math (gdpo_verl/core/gd2po.py): hand-computed batches, the authors' values, hostile inputs.

The "authors' values" were computed by running a faithful re-implementation of the authors' code path (GDPO's
per-reward verl GRPO, ``_get_mixed_sign_conflict_mask``, the SNR ratio, ``_compute_gdpo_group_keep_ratio`` and
``_apply_gdpo_keep_mask`` with verl's ``masked_whiten``) on the batches below, outside this repository.

Run: .venv/bin/python -m pytest tests/test_gd2po_on_cpu.py -q
"""

import math

import pytest
import torch

from gdpo_verl.core.advantage import gdpo_advantages
from gdpo_verl.core.gd2po import gd2po_advantages, gd2po_metrics

R2 = 1 / math.sqrt(2)
NAN = float("nan")


def first(adv: torch.Tensor) -> list[float]:
    """(bs, T) -> the per-response value (first token; constant over the response's valid tokens)."""
    return adv[:, 0].tolist()


def mask_of(lengths) -> torch.Tensor:
    lengths = torch.tensor(lengths)
    return (torch.arange(int(lengths.max())) < lengths.unsqueeze(1)).long()


# Batch A: two G=4 groups, rewards (correctness, format), lengths 1..5.
SCORES_A = torch.tensor(
    [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [2.0, 1.0], [0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]
)
UIDS_A = ["a"] * 4 + ["b"] * 4
MASK_A = mask_of([5, 3, 4, 2, 1, 5, 2, 3])
# Batch B: two G=3 groups, three rewards (correctness in [-3, 3], length, format).
SCORES_B = torch.tensor(
    [[1.0, 0.2, 1.0], [0.0, 0.9, 1.0], [1.0, 0.5, 0.0], [3.0, 0.1, 1.0], [-3.0, 0.8, 1.0], [0.0, 0.3, 0.0]]
)
UIDS_B = ["x"] * 3 + ["y"] * 3
MASK_B = mask_of([4, 2, 3, 4, 4, 2])
BATCHES = {"A": (SCORES_A, UIDS_A, MASK_A), "B": (SCORES_B, UIDS_B, MASK_B)}

# (batch, filter, tau, final_norm, group_reweight) -> per-response advantage computed by the authors' code path.
AUTHORS = {
    ("A", "sign", 0.8, "token", True): [0.0, 0.0, 1.074103, -0.495628, 1.841261, -0.938042, -0.228104, 0.0],
    ("A", "sign", 0.8, "token", False): [0.0, 0.0, 1.19767, -0.801679, 1.515859, -0.84412, -0.241292, 0.0],
    ("A", "sign", 0.8, "none", True): [0.0, 0.0, 0.866024, -0.866024, 1.712509, -1.354185, -0.570836, 0.0],
    ("A", "sign", 0.8, "none", False): [0.0, 0.0, 1.732048, -1.732048, 2.283346, -1.80558, -0.761115, 0.0],
    ("A", "snr", 0.2, "token", True): [0.0, 0.0, 0.950634, -0.421009, 2.073039, -1.165061, -0.337929, 0.489203],
    ("A", "snr", 0.2, "token", False): [0.0, 0.0, 1.242578, -0.948456, 1.591272, -0.994965, -0.334343, 0.326279],
    ("A", "snr", 0.2, "none", True): [0.0, 0.0, 0.866024, -0.866024, 2.283346, -1.80558, -0.761115, 0.28335],
    ("A", "snr", 0.2, "none", False): [0.0, 0.0, 1.732048, -1.732048, 2.283346, -1.80558, -0.761115, 0.28335],
    ("A", "snr", 0.8, "token", True): [0.0, 0.0, 1.074103, -0.495628, 1.841261, -0.938042, -0.228104, 0.0],
    ("A", "snr", 0.8, "none", False): [0.0, 0.0, 1.732048, -1.732048, 2.283346, -1.80558, -0.761115, 0.0],
    ("B", "sign", 0.8, "token", True): [0.0] * 6,
    ("B", "sign", 0.8, "none", True): [0.0, 0.0, 0.0, 0.0, 0.0, -0.477349],
    ("B", "sign", 0.8, "none", False): [0.0, 0.0, 0.0, 0.0, 0.0, -1.432048],
    ("B", "snr", 0.2, "token", True): [0.0, 0.0, -0.481217, 0.706706, 0.634952, -1.961492],
    ("B", "snr", 0.2, "token", False): [0.0, 0.0, -0.828356, 0.763972, 0.698199, -1.681807],
    ("B", "snr", 0.2, "none", True): [0.0, 0.0, -0.224088, 0.745301, 0.686747, -1.432048],
    ("B", "snr", 0.2, "none", False): [0.0, 0.0, -0.672265, 0.745301, 0.686747, -1.432048],
    ("B", "snr", 0.8, "none", True): [0.0, 0.0, 0.0, 0.0, 0.0, -0.477349],
}


@pytest.mark.parametrize("case", sorted(AUTHORS), ids=lambda c: "-".join(map(str, c)))
def test_agrees_with_the_authors_code(case):
    name, filt, tau, final_norm, reweight = case
    scores, uids, mask = BATCHES[name]
    adv = gd2po_advantages(scores, uids, mask, filter=filt, tau=tau, final_norm=final_norm, group_reweight=reweight)
    assert first(adv) == pytest.approx(AUTHORS[case], abs=1e-4)
    assert (adv[mask == 0] == 0).all()  # padding stays 0
    rows = adv * mask  # constant over each response's valid tokens
    assert torch.allclose(rows, adv[:, :1] * mask)


def test_sign_filter_by_hand():
    # One G=4 group, rewards (1,0) (0,1) (1,1) (0,0). Each reward's column has two 1s and two 0s: mean 1/2, unbiased
    # std sqrt(1/3) -> +-sqrt(3)/2 = +-0.866. Rows 0 and 1 get (+,-) and (-,+): mixed signs, masked. Rows 2, 3 agree:
    # A_sum = +-1.732; kappa = 2 kept / 4 = 1/2 -> +-0.866. With the final step the kept pair whitens to +-1/sqrt(2)
    # (two equal-length responses: token mean 0, unbiased token variance over 4 tokens of +-0.866 = 1).
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    mask = torch.ones(4, 2)
    h = math.sqrt(3) / 2
    assert first(gd2po_advantages(scores, ["p"] * 4, mask, final_norm="none")) == pytest.approx([0, 0, h, -h], abs=1e-5)
    no_kappa = gd2po_advantages(scores, ["p"] * 4, mask, final_norm="none", group_reweight=False)
    assert first(no_kappa) == pytest.approx([0, 0, 2 * h, -2 * h], abs=1e-5)
    var = 4 * h * h / 3  # tokens (+h, +h, -h, -h): mean 0, unbiased variance 4 h^2 / 3 = 1
    whitened = first(gd2po_advantages(scores, ["p"] * 4, mask))
    assert whitened == pytest.approx([0, 0, h / math.sqrt(var + 1e-8), -h / math.sqrt(var + 1e-8)], abs=1e-5)


def test_snr_filter_by_hand_with_three_rewards():
    # G=2, rewards (1,1,0) and (0,0,1): every column is (1,0) or (0,1) -> +-1/sqrt(2). Response 0 has advantages
    # (+,+,-) r2: s = r2 / (3 r2) = 1/3; response 1: s = -1/3. Both conflict. tau 0.3 keeps both (|s| >= tau),
    # tau 0.4 masks both.
    scores = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    mask = torch.ones(2, 3)
    kept = gd2po_advantages(scores, [0, 0], mask, filter="snr", tau=0.3, final_norm="none")
    assert first(kept) == pytest.approx([R2, -R2], abs=1e-5)
    masked = gd2po_advantages(scores, [0, 0], mask, filter="snr", tau=0.4, final_norm="none")
    assert first(masked) == [0.0, 0.0]
    assert first(gd2po_advantages(scores, [0, 0], mask, filter="sign", final_norm="none")) == [0.0, 0.0]


def test_code_keeps_zero_advantage_rollouts_and_the_paper_rule_drops_them():
    # Group p: (1,0) and (0,1) cancel exactly: s = 0. Group q: constant rewards, all-zero advantages (s = 0, no
    # conflict).
    # Group r: (1,1) and (0,0): agree, s = +-1.
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    uids = ["p", "p", "q", "q", "r", "r"]
    mask = torch.ones(6, 2)
    # code, tau 0: |s| < 0 never holds -> everything kept; kappa 1 everywhere
    code = gd2po_advantages(scores, uids, mask, filter="snr", tau=0.0, final_norm="none")
    assert first(code) == pytest.approx([0, 0, 0, 0, 2 * R2, -2 * R2], abs=1e-5)
    m = gd2po_metrics(scores, uids, mask, filter="snr", tau=0.0)
    assert m["gdpo/gd2po/masked_frac"] == 0.0 and m["gdpo/gd2po/prompt_weight/min"] == 1.0
    # paper: drops |s| <= tau -> groups p and q fully dropped (kappa 0), group r kept (kappa 1)
    paper = gd2po_metrics(scores, uids, mask, filter="snr", tau=0.0, rule="paper")
    assert paper["gdpo/gd2po/masked_frac"] == pytest.approx(4 / 6)
    assert paper["gdpo/gd2po/prompt_weight/mean"] == pytest.approx(1 / 3)
    # sign filter: the code keeps group q (no mixed signs) and counts it; the paper rule drops it
    sign_code = gd2po_metrics(scores, uids, mask, filter="sign")
    sign_paper = gd2po_metrics(scores, uids, mask, filter="sign", rule="paper")
    assert sign_code["gdpo/gd2po/masked_frac"] == pytest.approx(2 / 6)
    assert sign_paper["gdpo/gd2po/masked_frac"] == pytest.approx(4 / 6)
    assert sign_code["gdpo/gd2po/conflict_frac"] == pytest.approx(2 / 6)


def test_one_reward_never_conflicts_and_equals_gdpo():
    torch.manual_seed(0)
    scores = torch.randint(0, 4, (12, 1)).float()
    uids = [i // 4 for i in range(12)]
    mask = mask_of([1 + i % 5 for i in range(12)])
    for final_norm in ("token", "sequence", "none"):
        ours = gd2po_advantages(scores, uids, mask, filter="snr", tau=1.0, final_norm=final_norm)
        assert torch.allclose(ours, gdpo_advantages(scores, uids, mask, final_norm=final_norm), atol=1e-6)


def test_weights_scale_the_terms_that_are_judged():
    # G=2 group (1,0), (0,1): advantages (+R2, -R2) and (-R2, +R2) cancel (SNR 0); weights (1, 3) make the terms
    # (R2, -3 R2) and (-R2, 3 R2): SNR -+1/2.
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    mask = torch.ones(2, 1)
    m_equal = gd2po_metrics(scores, [0, 0], mask, filter="snr", tau=0.2)
    assert m_equal["gdpo/gd2po/snr_abs_mean_in_conflict"] == pytest.approx(0.0, abs=1e-6)
    m_weighted = gd2po_metrics(scores, [0, 0], mask, [1.0, 3.0], filter="snr", tau=0.2)
    assert m_weighted["gdpo/gd2po/snr_abs_mean_in_conflict"] == pytest.approx(0.5, abs=1e-6)  # (3-1)/(3+1)
    adv = gd2po_advantages(scores, [0, 0], mask, [1.0, 3.0], filter="snr", tau=0.2, final_norm="none")
    assert first(adv) == pytest.approx([-2 * R2, 2 * R2], abs=1e-5)  # both kept: (R2 - 3 R2), (-R2 + 3 R2)


def test_abstentions_leave_the_vote_and_the_query_weight():
    # Group of 4: response 3 abstains on everything -> 0, not counted in kappa (denominator 3).
    # Response 1 abstains on reward 1 only: its reward-1 advantage is 0, so it cannot conflict.
    scores = torch.tensor([[1.0, 0.0], [0.0, NAN], [1.0, 1.0], [NAN, NAN]])
    mask = torch.ones(4, 2)
    adv = first(gd2po_advantages(scores, ["g"] * 4, mask, final_norm="none"))
    # reward 0 over (1, 0, 1): mean 2/3, std sqrt(1/3): (+0.577, -1.155, +0.577); reward 1 over (0, 1): -+R2.
    # Response 0: (+0.577, -R2) conflict -> masked. Responses 1, 2 kept -> kappa 2/3.
    a0 = [(1 - 2 / 3) / math.sqrt(1 / 3), (0 - 2 / 3) / math.sqrt(1 / 3)]
    assert adv == pytest.approx([0.0, 2 / 3 * a0[1], 2 / 3 * (a0[0] + R2), 0.0], abs=1e-5)
    m = gd2po_metrics(scores, ["g"] * 4, mask)
    assert m["gdpo/gd2po/masked_frac"] == pytest.approx(1 / 3)
    assert m["gdpo/gd2po/prompt_weight/mean"] == pytest.approx(2 / 3)
    # non-finite values abstain exactly like NaN
    inf = scores.clone()
    inf[1, 1], inf[3] = float("inf"), torch.tensor([-float("inf"), NAN])
    assert first(gd2po_advantages(inf, ["g"] * 4, mask, final_norm="none")) == pytest.approx(adv, abs=1e-7)


@pytest.mark.parametrize("final_norm", ["token", "sequence", "none"])
def test_hostile_batches_give_finite_output(final_norm):
    mask = torch.ones(4, 3)
    cases = [
        torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]),  # everything conflicts: nothing kept
        torch.full((4, 2), NAN),  # everything abstains
        torch.tensor(
            [[1e300, -1e300], [-1e300, 1e300], [1e300, 1e300], [0.0, 0.0]], dtype=torch.float64
        ),  # astronomically large
        torch.tensor([[float("inf"), 1.0], [NAN, 0.0], [-float("inf"), 2.0], [1.0, NAN]]),
    ]
    for scores in cases:
        for filt in ("sign", "snr"):
            adv = gd2po_advantages(scores, [0, 0, 1, 1], mask, filter=filt, final_norm=final_norm, offset=torch.tensor(
                [NAN, float("inf"), 1.0, 0.0]))  # fmt: skip
            assert adv.shape == (4, 3) and adv.dtype == torch.float32 and torch.isfinite(adv).all()
    everything_conflicts = gd2po_advantages(cases[0], [0, 0, 1, 1], mask, final_norm=final_norm)
    assert (everything_conflicts == 0).all()


def test_empty_batch_and_empty_responses():
    adv = gd2po_advantages(torch.zeros(0, 2), [], torch.zeros(0, 4))
    assert adv.shape == (0, 4)
    # a response without tokens stays 0 and moves no statistic (the code counts it as kept: no advantage at all)
    scores = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    mask = torch.tensor([[1, 1], [1, 0], [0, 0]])
    adv = gd2po_advantages(scores, [0, 0, 0], mask)
    assert adv[2].abs().sum() == 0 and torch.isfinite(adv).all()


def test_bad_options_name_the_value_and_the_valid_ones():
    s, m = torch.zeros(2, 2), torch.ones(2, 1)
    with pytest.raises(ValueError, match="gd2po_filter='hard' is unknown; valid values: sign, snr"):
        gd2po_advantages(s, [0, 0], m, filter="hard")
    with pytest.raises(ValueError, match="gd2po_rule='figure' is unknown; valid values: code, paper"):
        gd2po_advantages(s, [0, 0], m, rule="figure")
    for tau in (-0.1, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match=r"gd2po_tau=.* must be a number in \[0, 1\]"):
            gd2po_advantages(s, [0, 0], m, filter="snr", tau=tau)
    with pytest.raises(ValueError, match="token, sequence, none"):
        gd2po_advantages(s, [0, 0], m, final_norm="batch")
    with pytest.raises(ValueError, match="scores must be"):
        gd2po_advantages(torch.zeros(3, 2), [0, 0], m)


def test_module_docstring_example():
    import doctest

    import gdpo_verl.core.gd2po as module

    assert doctest.testmod(module).failed == 0
