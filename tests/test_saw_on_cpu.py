"""SAW reward weighting (gdpo_verl/core/saw.py): hand-computed weights, the authors' values, hostile inputs.

The "authors' values" were computed by running a faithful re-implementation of the authors' ``gdpo-h`` and
``grpo-h`` code paths (correctness shifted by +3, batch CV, weights 2 CV / sum CV, verl's GRPO per reward or on the
weighted sum, ``masked_whiten``) on the batch below, outside this repository.

Run: .venv/bin/python -m pytest tests/test_saw_on_cpu.py -q
"""

import math

import pytest
import torch

from gdpo_verl.core.advantage import gdpo_advantages
from gdpo_verl.core.saw import saw_advantages, saw_metrics, saw_weights

NAN = float("nan")

# Two G=4 groups, correctness in [-3, 3] and format in {0, 1}; lengths 1..5.
SCORES = torch.tensor(
    [[3.0, 1.0], [-3.0, 0.0], [1.5, 1.0], [3.0, 1.0], [-1.5, 0.0], [0.0, 1.0], [3.0, 1.0], [3.0, 0.0]]
)
UIDS = ["a"] * 4 + ["b"] * 4
LENGTHS = torch.tensor([5, 3, 4, 2, 1, 5, 2, 3])
MASK = (torch.arange(5) < LENGTHS.unsqueeze(1)).long()
AUTHORS_WEIGHTS = [0.81959218, 1.18040776]
AUTHORS = {
    "gdpo": [0.649643, -2.242996, 0.343629, 0.649643, -1.548359, 0.282861, 1.055227, -0.38981],
    "grpo": [0.631118, -1.469795, 0.20756, 0.631118, -1.31469, -0.159125, 1.019927, 0.453888],
}


def first(adv: torch.Tensor) -> list[float]:
    return adv[:, 0].tolist()


@pytest.mark.parametrize("base", ["gdpo", "grpo"])
def test_agrees_with_the_authors_code(base):
    w, _ = saw_weights(SCORES, [3.0, 0.0])
    assert w.tolist() == pytest.approx(AUTHORS_WEIGHTS, abs=1e-6)
    adv = saw_advantages(SCORES, UIDS, MASK, offsets=[3.0, 0.0], base=base)
    assert first(adv) == pytest.approx(AUTHORS[base], abs=1e-4)
    assert (adv[MASK == 0] == 0).all()


def test_weights_by_hand():
    # r0 = (0, 2): mean 1, unbiased std sqrt(2) -> CV sqrt(2); r1 = (1, 3): mean 2, std sqrt(2) -> CV sqrt(2)/2.
    # w = 2 CV / sum CV = (4/3, 2/3).
    w, cv = saw_weights(torch.tensor([[0.0, 1.0], [2.0, 3.0]]))
    assert cv.tolist() == pytest.approx([math.sqrt(2), math.sqrt(2) / 2], rel=1e-7)
    assert w.tolist() == pytest.approx([4 / 3, 2 / 3], rel=1e-7)
    # an offset of +1 on r0 -> (1, 3): same CV as r1 -> equal weights
    w, _ = saw_weights(torch.tensor([[0.0, 1.0], [2.0, 3.0]]), [1.0, 0.0])
    assert w.tolist() == pytest.approx([1.0, 1.0], rel=1e-7)
    # three rewards: weights sum to K = 3; a constant reward gets 0
    w, _ = saw_weights(torch.tensor([[0.0, 1.0, 5.0], [2.0, 3.0, 5.0]]))
    assert w.tolist() == pytest.approx([2.0, 1.0, 0.0], rel=1e-7)


def test_cv_is_over_the_batch_not_the_group_and_the_group_scope_differs():
    # r0: group a (0, 2), group b (10, 12); r1: group a (1, 3), group b (11, 13).
    scores = torch.tensor([[0.0, 1.0], [2.0, 3.0], [10.0, 11.0], [12.0, 13.0]])
    uids = ["a", "a", "b", "b"]
    w_batch, cv_batch = saw_weights(scores)
    # batch: r0 mean 6, r1 mean 7, both unbiased std sqrt(((36+16+16+36))/3) = sqrt(104/3)
    s = math.sqrt(104 / 3)
    assert cv_batch.tolist() == pytest.approx([s / 6, s / 7], rel=1e-7)
    assert w_batch.tolist() == pytest.approx([2 * 7 / 13, 2 * 6 / 13], rel=1e-7)
    from gdpo_verl.core.advantage import group_index

    group, n = group_index(uids)
    w_group, _ = saw_weights(scores, group=group, num_groups=n)
    # group a: CVs sqrt(2)/1 and sqrt(2)/2 -> (4/3, 2/3); group b: sqrt(2)/11, sqrt(2)/12 -> 2*(12, 11)/23
    assert w_group.flatten().tolist() == pytest.approx([4 / 3, 2 / 3, 24 / 23, 22 / 23], rel=1e-7)
    mask = torch.ones(4, 1)
    per_group = saw_advantages(scores, uids, mask, scope="group", final_norm="none")
    r2 = 1 / math.sqrt(2)
    assert first(per_group) == pytest.approx([-2 * r2, 2 * r2, -2 * r2, 2 * r2], abs=1e-5)  # weights sum to 2


def test_saw_on_gdpo_is_gdpo_with_the_saw_weights_times_the_configured_ones():
    w, _ = saw_weights(SCORES, [3.0, 0.0])
    for final_norm in ("token", "sequence", "none"):
        ours = saw_advantages(SCORES, UIDS, MASK, [2.0, 0.5], offsets=[3.0, 0.0], final_norm=final_norm)
        ref = gdpo_advantages(SCORES, UIDS, MASK, (w * torch.tensor([2.0, 0.5])).tolist(), final_norm=final_norm)
        assert torch.allclose(ours, ref, atol=1e-6)


def test_abstentions_leave_the_cv_and_too_few_values_weigh_zero():
    # r0 present on rows 0 and 2 only: (0, 2) -> CV sqrt(2); r1 has a single present value -> CV 0, weight 0.
    scores = torch.tensor([[0.0, NAN], [NAN, 4.0], [2.0, NAN], [float("inf"), -float("inf")]])
    w, cv = saw_weights(scores)
    assert cv.tolist() == pytest.approx([math.sqrt(2), 0.0]) and w.tolist() == pytest.approx([2.0, 0.0], rel=1e-7)
    # every CV 0 (constant rewards): all weights 0, all advantages 0 (as the code); finite
    const = torch.tensor([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]])
    assert saw_weights(const)[0].tolist() == [0.0, 0.0]
    for base in ("gdpo", "grpo"):
        assert (saw_advantages(const, [0, 0, 1], torch.ones(3, 2), base=base) == 0).all()


@pytest.mark.parametrize("base", ["gdpo", "grpo"])
@pytest.mark.parametrize("scope", ["batch", "group"])
def test_hostile_batches_give_finite_output(base, scope):
    mask = torch.ones(4, 3)
    cases = [
        torch.full((4, 2), NAN),
        torch.tensor([[1e300, -1e300], [-1e300, 1e300], [1e300, 1e300], [0.0, 0.0]], dtype=torch.float64),
        torch.tensor(
            [[1e-300, 0.0], [-1e-300, 0.0], [0.0, 1e-300], [0.0, 0.0]], dtype=torch.float64
        ),  # mean ~ 0: CV huge, finite
        torch.tensor([[float("inf"), 1.0], [NAN, 0.0], [-float("inf"), 2.0], [1.0, NAN]]),
    ]
    for scores in cases:
        w, cv = saw_weights(scores)
        assert torch.isfinite(w).all() and torch.isfinite(cv).all()
        adv = saw_advantages(scores, [0, 0, 1, 1], mask, base=base, scope=scope, offset=torch.full((4,), NAN))
        assert adv.shape == (4, 3) and adv.dtype == torch.float32 and torch.isfinite(adv).all()
    assert saw_advantages(torch.zeros(0, 2), [], torch.zeros(0, 3), base=base, scope=scope).shape == (0, 3)


def test_metrics_report_weights_and_cvs_per_reward():
    m = saw_metrics(SCORES, ["correctness", "format"], [3.0, 0.0])
    assert m["gdpo/saw/correctness/weight"] == pytest.approx(AUTHORS_WEIGHTS[0], abs=1e-6)
    assert m["gdpo/saw/format/weight"] == pytest.approx(AUTHORS_WEIGHTS[1], abs=1e-6)
    assert set(m) == {f"gdpo/saw/{n}/{s}" for n in ("correctness", "format") for s in ("weight", "cv")}


def test_bad_options_name_the_value_and_the_fix():
    s, m = torch.zeros(2, 2), torch.ones(2, 1)
    for offsets in ([3.0], [3.0, NAN], [True, 0.0], ["3", 0.0]):
        with pytest.raises(ValueError, match=r"gdpo_saw_offsets=.* must be 2 finite numbers, one per reward"):
            saw_advantages(s, [0, 0], m, offsets=offsets)
    with pytest.raises(ValueError, match="saw base='gdpo-h' is unknown; valid values: gdpo, grpo"):
        saw_advantages(s, [0, 0], m, base="gdpo-h")
    with pytest.raises(ValueError, match="saw scope='prompt' is unknown; valid values: batch, group"):
        saw_advantages(s, [0, 0], m, scope="prompt")


def test_module_docstring_example():
    import doctest

    import gdpo_verl.core.saw as module

    assert doctest.testmod(module).failed == 0
