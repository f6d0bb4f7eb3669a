"""RVPO soft-minimum aggregation (gdpo_verl/core/rvpo.py): hand-computed values, limits, hostile inputs.

No code from the RVPO authors is public; the values below are computed by hand from the paper's equation.

Run: .venv/bin/python -m pytest tests/test_rvpo_on_cpu.py -q
"""

import math

import pytest
import torch

from gdpo_verl.core.advantage import gdpo_advantages
from gdpo_verl.core.rvpo import rvpo_advantages, rvpo_metrics

NAN = float("nan")
H = math.sqrt(3) / 2  # a G=4 column with two 1s and two 0s normalizes to +-H
SCORES = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])


def first(adv: torch.Tensor) -> list[float]:
    return adv[:, 0].tolist()


def test_soft_min_by_hand():
    # rows (H, -H): -(1/k) ln((e^{-kH} + e^{kH}) / 2) = -ln(cosh(kH)) / k; rows (H, H) and (-H, -H) unchanged.
    for k in (0.5, 1.0, 3.0):
        adv = first(rvpo_advantages(SCORES, ["p"] * 4, torch.ones(4, 2), risk=k, final_norm="none"))
        c = -math.log(math.cosh(k * H)) / k
        assert adv == pytest.approx([c, c, H, -H], abs=1e-5)
    # weights (3, 1): p = (3/4, 1/4): row 0 -(1/k) ln(3/4 e^{-kH} + 1/4 e^{kH})
    adv = first(rvpo_advantages(SCORES, ["p"] * 4, torch.ones(4, 2), [3.0, 1.0], risk=1.0, final_norm="none"))
    assert adv[0] == pytest.approx(-math.log(0.75 * math.exp(-H) + 0.25 * math.exp(H)), abs=1e-5)
    assert adv[1] == pytest.approx(-math.log(0.25 * math.exp(-H) + 0.75 * math.exp(H)), abs=1e-5)


def test_limits_mean_and_minimum():
    torch.manual_seed(1)
    scores = torch.randint(0, 3, (12, 3)).float()
    uids = [i // 4 for i in range(12)]
    mask = torch.ones(12, 2)
    tiny = rvpo_advantages(scores, uids, mask, risk=1e-6, final_norm="none")
    assert torch.allclose(tiny, gdpo_advantages(scores, uids, mask, final_norm="none") / 3, atol=1e-5)
    # with the final step the 1/K scale vanishes: token whitening of the mean equals GDPO's
    whitened = rvpo_advantages(scores, uids, mask, risk=1e-6)
    assert torch.allclose(whitened, gdpo_advantages(scores, uids, mask), atol=1e-4)
    huge = rvpo_advantages(scores, uids, mask, risk=1e4, final_norm="none")
    from gdpo_verl.core.advantage import group_index, group_normalize

    g, n = group_index(uids)
    z_min = group_normalize(scores, g, n).amin(dim=1)
    assert torch.allclose(huge[:, 0].double(), z_min, atol=1e-3)  # within ln(K)/k of the minimum


def test_abstentions_count_zero_and_all_missing_is_excluded():
    scores = torch.tensor([[1.0, NAN], [0.0, 1.0], [1.0, 0.0], [NAN, NAN]])
    mask = torch.ones(4, 3)
    adv = first(rvpo_advantages(scores, ["g"] * 4, mask, risk=2.0, final_norm="none"))
    # reward 0 over (1, 0, 1): (+a, -2a, +a) with a = (1/3)/sqrt(1/3); reward 1 over rows 1, 2: (+R2, -R2)
    a, r2 = (1 / 3) / math.sqrt(1 / 3), 1 / math.sqrt(2)

    def sm(z):
        return -math.log(sum(math.exp(-2.0 * v) for v in z) / len(z)) / 2.0

    assert adv == pytest.approx([sm([a, 0.0]), sm([-2 * a, r2]), sm([a, -r2]), 0.0], abs=1e-5)
    # the all-missing response is left out of the final statistics: same as dropping it from the batch
    full = rvpo_advantages(scores, ["g"] * 4, mask, risk=2.0)
    assert torch.allclose(full[:3], rvpo_advantages(scores[:3], ["g"] * 3, mask[:3], risk=2.0), atol=1e-6)
    assert full[3].abs().sum() == 0
    inf = scores.clone()
    inf[0, 1], inf[3, 0] = float("inf"), -float("inf")
    assert first(rvpo_advantages(inf, ["g"] * 4, mask, risk=2.0, final_norm="none")) == pytest.approx(adv, abs=1e-7)


@pytest.mark.parametrize("final_norm", ["token", "sequence", "none"])
def test_hostile_batches_give_finite_output(final_norm):
    mask = torch.ones(4, 3)
    cases = [
        torch.full((4, 2), NAN),
        torch.tensor([[1e300, -1e300], [-1e300, 1e300], [1e300, 1e300], [0.0, 0.0]], dtype=torch.float64),
        torch.tensor([[5.0, 1.0], [NAN, 0.0], [-float("inf"), 2.0], [1.0, NAN]]),  # singletons: Z = r / (1 + eps)
    ]
    for scores in cases:
        for risk in (1e-12, 1.0, 1e12):
            adv = rvpo_advantages(scores, [0, 0, 1, 1], mask, risk=risk, final_norm=final_norm,
                                  offset=torch.tensor([NAN, 1.0, float("inf"), 0.0]))  # fmt: skip
            assert adv.shape == (4, 3) and adv.dtype == torch.float32 and torch.isfinite(adv).all()
    assert rvpo_advantages(torch.zeros(0, 2), [], torch.zeros(0, 3), risk=1.0).shape == (0, 3)


def test_metrics_penalty_and_spread():
    m = rvpo_metrics(SCORES, ["p"] * 4, torch.ones(4, 2), risk=1.0)
    # rows 0, 1: mean 0, soft-min -ln cosh(H), spread H; rows 2, 3: no spread, no penalty
    assert m["gdpo/rvpo/penalty"] == pytest.approx(math.log(math.cosh(H)) / 2, abs=1e-5)
    assert m["gdpo/rvpo/spread"] == pytest.approx(H / 2, abs=1e-5)
    empty = rvpo_metrics(torch.full((2, 2), NAN), [0, 0], torch.ones(2, 1), risk=1.0)
    assert empty == {"gdpo/rvpo/penalty": 0.0, "gdpo/rvpo/spread": 0.0}


def test_bad_options_name_the_value():
    s, m = torch.zeros(2, 2), torch.ones(2, 1)
    for risk in (0.0, -1.0, NAN, float("inf"), True, "1"):
        with pytest.raises(ValueError, match=r"rvpo_risk=.* must be a finite number > 0"):
            rvpo_advantages(s, [0, 0], m, risk=risk)
    with pytest.raises(ValueError, match="positive per-reward weights"):
        rvpo_advantages(s, [0, 0], m, [1.0, 0.0], risk=1.0)


def test_module_docstring_example():
    import doctest

    import gdpo_verl.core.rvpo as module

    assert doctest.testmod(module).failed == 0
