"""The ``gdpo`` estimator through verl: oracle equivalence, upstream equivalence, config contract, errors.

Run: .venv/bin/python -m pytest tests/test_estimator_on_cpu.py
"""

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import compute_advantage

from gdpo_verl.core.contract import MAX_WEIGHT, SCORE_PREFIX, RewardSettings
from gdpo_verl.estimator import compute_gdpo_advantage

EXACT_VALUES = [-1.0, 0.0, 0.5, 1.0, 2.0, 3.0]  # exact in float32, so verl's float32 sums are exact too


def algo(**kw):
    return OmegaConf.create({"norm_adv_by_std_in_grpo": True, **kw})


@st.composite
def batches(draw, allow_missing=True, allow_empty=True):
    """Random GDPO inputs: K in 1..6, unequal and singleton groups, zero-std groups, empty responses."""
    k = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
    bs, t = sum(sizes), draw(st.integers(1, 6))
    uids = np.array([f"g{g}" for g, n in enumerate(sizes) for _ in range(n)], dtype=object)
    values = st.sampled_from(EXACT_VALUES + ([float("nan")] if allow_missing else []))
    scores = torch.tensor(draw(st.lists(st.lists(values, min_size=k, max_size=k), min_size=bs, max_size=bs)))
    lengths = draw(st.lists(st.integers(0 if allow_empty else 1, t), min_size=bs, max_size=bs))
    mask = (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(torch.int64)
    weights = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, -1.0]), min_size=k, max_size=k))
    return scores, uids, mask, weights


def well_conditioned(scores, uids, mask, weights, norm_by_std=True):
    """False when the weighted sum is (nearly) constant over the batch's tokens.

    The final whitening multiplies by rsqrt(var + 1e-8), up to 1e4: there verl's float32 rounding noise in
    A_sum (about 1e-7) becomes about 1e-3 in the output, while ours (float64 statistics) stays accurate,
    so the two can only be compared where the batch carries a signal (var >= 1e-6).
    """
    from gdpo_verl.core.advantage import group_index, group_normalize

    group, n = group_index(uids)
    a = group_normalize(scores, group, n, norm_by_std=norm_by_std) @ torch.tensor(weights, dtype=torch.float64)
    w = mask.sum(-1).to(torch.float64) * (~torch.isnan(scores).all(1))
    mean = (w * a).sum() / w.sum().clamp(min=1)
    return bool((w * (a - mean) ** 2).sum() / (w.sum() - 1).clamp(min=1) >= 1e-6)


def as_data(scores, uids, mask, keys):
    """A DataProto as a verl trainer holds it at advantage time, with per-reward token tensors."""
    bs, t = mask.shape
    last = (mask.sum(-1) - 1).clamp(min=0)
    tensors = {"response_mask": mask, "token_level_rewards": torch.zeros(bs, t)}
    for j, key in enumerate(keys):
        tok = torch.zeros(bs, t)
        tok[torch.arange(bs), last] = scores[:, j]
        tensors[SCORE_PREFIX + key] = tok
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": uids})


@given(batches(), st.sampled_from(["token", "sequence", "none"]), st.booleans())
def test_fast_path_equals_literal_verl_backend(batch, final_norm, norm_by_std):
    scores, uids, mask, weights = batch
    keys = [f"r{j}" for j in range(scores.shape[1])]
    present = ~torch.isnan(scores).all(1)
    if final_norm == "token":
        assume((mask.sum(-1) * present).sum() >= 2)  # verl's masked_var refuses fewer than two tokens
        assume(well_conditioned(scores, uids, mask, weights, norm_by_std))
    results = {}
    for backend in ("fast", "verl"):
        config = algo(
            gdpo_reward_keys=keys,
            gdpo_reward_weights=weights,
            gdpo_final_norm=final_norm,
            gdpo_backend=backend,
            norm_adv_by_std_in_grpo=norm_by_std,
        )
        data = compute_advantage(as_data(scores, uids, mask, keys), "gdpo", config=config)
        results[backend] = data.batch["advantages"]
    assert torch.isfinite(results["fast"]).all()
    assert torch.allclose(results["fast"], results["verl"], atol=1e-5), (results["fast"], results["verl"])


@given(batches(allow_missing=False, allow_empty=False))
def test_token_mode_equals_upstream_gdpo_on_inputs_upstream_accepts(batch):
    scores, uids, mask, weights = batch
    assume(mask.sum() >= 2 and well_conditioned(scores, uids, mask, weights))
    keys = [f"r{j}" for j in range(scores.shape[1])]
    config = algo(gdpo_reward_keys=keys, gdpo_reward_weights=weights)
    bs, t = mask.shape
    # upstream reads per-key scalars from non_tensor_batch and the response length from prompts/attention_mask
    non_tensor = {"uid": uids, **{key: scores[:, j].numpy().astype(object) for j, key in enumerate(keys)}}
    tensors = {
        "prompts": torch.zeros(bs, 2, dtype=torch.int64),
        "attention_mask": torch.cat([torch.ones(bs, 2, dtype=torch.int64), mask], dim=1),
    }
    upstream, _ = core_algos.compute_gdpo_outcome_advantage(
        token_level_rewards=torch.zeros(bs, t),
        response_mask=mask,
        index=uids,
        config=config,
        non_tensor_batch=non_tensor,
        batch=tensors,
    )
    ours, _ = compute_gdpo_advantage(
        torch.zeros(bs, t), mask, index=uids, config=config, non_tensor_batch=non_tensor, batch=tensors
    )
    assert torch.allclose(ours, upstream, atol=1e-5)


def test_registered_gdpo_is_ours_and_returns_advantages_through_verl():
    assert core_algos.get_adv_estimator_fn("gdpo") is compute_gdpo_advantage
    scores = torch.tensor([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    mask = torch.ones(4, 3, dtype=torch.int64)
    data = compute_advantage(
        as_data(scores, np.array(["a", "a", "b", "b"], dtype=object), mask, ["f", "c"]),
        "gdpo",
        config=algo(gdpo_reward_keys=["f", "c"]),
    )
    adv = data.batch["advantages"]
    assert adv.shape == (4, 3) and torch.equal(data.batch["returns"], adv)
    assert adv.mean().item() == pytest.approx(0.0, abs=1e-6)


def test_token_tensor_is_preferred_over_non_tensor_scalars_and_weights_apply():
    scores = torch.tensor([[0.0], [1.0], [1.0], [3.0]])
    uids = np.array([0, 0, 1, 1], dtype=object)
    mask = torch.ones(4, 2, dtype=torch.int64)
    data = as_data(scores, uids, mask, ["c"])
    data.non_tensor_batch["c"] = np.array([5.0, 5.0, 5.0, 5.0], dtype=object)  # would give all zeros
    out = compute_advantage(
        data, "gdpo", config=algo(gdpo_reward_keys=["c"], gdpo_final_norm="none", gdpo_reward_weights=[3.0])
    )
    # groups (0,1) and (1,3): each -> -+1/sqrt(2), times weight 3
    assert out.batch["advantages"][:, 0].tolist() == pytest.approx([-3 / 2**0.5, 3 / 2**0.5] * 2, abs=1e-5)


def test_missing_non_tensor_scalars_abstain_instead_of_poisoning_the_batch():
    mask = torch.ones(4, 2, dtype=torch.int64)
    non_tensor = {"uid": np.array(["a"] * 4, dtype=object), "f": np.array([1.0, None, 0.0, 1.0], dtype=object)}
    adv, _ = compute_gdpo_advantage(
        torch.zeros(4, 2),
        mask,
        index=non_tensor["uid"],
        config=algo(gdpo_reward_keys=["f"]),
        non_tensor_batch=non_tensor,
        batch=None,
    )
    assert torch.isfinite(adv).all() and adv[1].abs().sum() == 0


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        ({"gdpo_reward_keys": []}, ValueError, "at least one reward component"),
        ({"gdpo_reward_keys": ["a", "b"], "gdpo_reward_weights": [1.0]}, ValueError, "one weight per key"),
        ({"gdpo_reward_keys": ["a"], "gdpo_final_norm": "batch"}, ValueError, "valid values: token, sequence, none"),
        ({"gdpo_reward_keys": ["a"], "gdpo_backend": "numba"}, ValueError, "valid values: fast, verl"),
        (
            {"gdpo_reward_keys": ["a"], "gdpo_reward_conditions": {"a": {"on": "zz", "threshold": 1}}},
            ValueError,
            "must name two different components",
        ),
        ({"gdpo_reward_keys": ["a", "a"]}, ValueError, "distinct"),
    ],
)
def test_config_errors_name_the_bad_value(overrides, error, match):
    with pytest.raises(error, match=match):
        RewardSettings.from_algorithm(algo(**overrides))


def test_missing_component_error_lists_what_is_there():
    data = as_data(torch.zeros(2, 1), np.array([0, 0], dtype=object), torch.ones(2, 2, dtype=torch.int64), ["f"])
    data.non_tensor_batch["acc"] = np.array([1.0, 0.0], dtype=object)
    with pytest.raises(KeyError, match=r"'correctness'.*token_level_scores_f.*'acc'"):
        compute_advantage(data, "gdpo", config=algo(gdpo_reward_keys=["correctness"]))


# --- hostile inputs: the estimator never emits NaN or inf ---------------------------------------------------------
HOSTILE = [float("nan"), float("inf"), float("-inf"), 1e39, -1e39, 1e300, -1e300, 1e-300, 5e-324, 0.0, 1.0, -3.0]


@st.composite
def hostile_batches(draw):
    """Batches mixing NaN, +-inf, values that overflow float32 or square past float64, tiny values, singleton
    and ragged groups, empty responses, and huge KL offsets."""
    k = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=6))
    bs, t = sum(sizes), draw(st.integers(1, 5))
    uids = np.array([f"g{g}" for g, n in enumerate(sizes) for _ in range(n)], dtype=object)
    values = st.one_of(st.sampled_from(HOSTILE), st.floats(allow_nan=True, allow_infinity=True))
    scores = draw(st.lists(st.lists(values, min_size=k, max_size=k), min_size=bs, max_size=bs))
    lengths = draw(st.lists(st.integers(0, t), min_size=bs, max_size=bs))
    mask = (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(torch.int64)
    weights = draw(st.lists(st.sampled_from([0.5, 1.0, MAX_WEIGHT, -2.0]), min_size=k, max_size=k))  # the largest
    offsets = draw(st.lists(st.sampled_from([0.0, float("nan"), float("inf"), 1e300, -1.0]), min_size=bs, max_size=bs))
    return np.array(scores, dtype=np.float64), uids, mask, weights, torch.tensor(offsets, dtype=torch.float64)


@given(
    hostile_batches(), st.sampled_from(["token", "sequence", "none"]), st.booleans(), st.sampled_from(["fast", "verl"])
)
def test_every_advantage_is_finite_on_hostile_batches(batch, final_norm, norm_by_std, backend):
    scores, uids, mask, weights, offsets = batch
    keys = [f"r{j}" for j in range(scores.shape[1])]
    columns = {key: scores[:, j] for j, key in enumerate(keys)}  # float64 columns: -1e39 must not overflow
    config = algo(gdpo_reward_keys=keys, gdpo_reward_weights=weights, gdpo_final_norm=final_norm,
                  gdpo_backend=backend, norm_adv_by_std_in_grpo=norm_by_std)  # fmt: skip
    adv, _ = compute_gdpo_advantage(torch.zeros(mask.shape), mask, index=uids, config=config, non_tensor_batch=columns)
    assert torch.isfinite(adv).all(), adv
    if backend == "fast":  # the KL offset path (fast backend only)
        config = algo(gdpo_reward_keys=keys, gdpo_reward_weights=weights, gdpo_final_norm=final_norm,
                      use_kl_in_reward=True)  # fmt: skip
        rewards = -offsets.unsqueeze(-1).expand(mask.shape).to(torch.float32) / max(mask.shape[1], 1)
        data = DataProto.from_dict(tensors={"token_level_scores": torch.zeros(mask.shape)}, non_tensors=columns)
        adv, _ = compute_gdpo_advantage(rewards, mask, index=uids, config=config, batch=data.batch,
                                        non_tensor_batch=columns)  # fmt: skip
        assert torch.isfinite(adv).all(), adv


def test_non_finite_scores_abstain_like_missing_ones():
    # -inf in one response of a group: that response abstains for that reward (as NaN would), nothing else changes.
    mask = torch.ones(4, 2, dtype=torch.int64)
    uids = np.array(["a", "a", "a", "b"], dtype=object)
    config = algo(gdpo_reward_keys=["r"])
    with_inf, _ = compute_gdpo_advantage(mask, mask, index=uids, config=config,
                                         non_tensor_batch={"r": np.array([1.0, 0.0, -np.inf, 2.0])})  # fmt: skip
    with_nan, _ = compute_gdpo_advantage(mask, mask, index=uids, config=config,
                                         non_tensor_batch={"r": np.array([1.0, 0.0, np.nan, 2.0])})  # fmt: skip
    assert torch.isfinite(with_inf).all() and torch.equal(with_inf, with_nan) and (with_inf[2] == 0).all()


@pytest.mark.parametrize(
    "columns, match",
    [
        (
            {"r": np.array(["1.0", "0.0"], dtype=object)},
            r"non_tensor_batch\['r'\] must hold numbers or None; found str",
        ),
        ({"r": np.array([1.0, {"x": 1}], dtype=object)}, r"must hold numbers or None; found dict"),
        ({"r": np.array([1.0, 0.0, 1.0])}, r"non_tensor_batch\['r'\] must have shape \(2,\).*got \(3,\)"),
    ],
)
def test_non_numeric_and_misshaped_scores_raise_naming_the_field(columns, match):
    mask = torch.ones(2, 3, dtype=torch.int64)
    with pytest.raises(ValueError, match=match):
        compute_gdpo_advantage(mask, mask, index=np.array(["a", "a"]), config=algo(gdpo_reward_keys=["r"]),
                               non_tensor_batch=columns)  # fmt: skip


@pytest.mark.parametrize(
    "uids, mask, match",
    [
        (np.array(["a", "a", "b"]), torch.ones(2, 3), r"uids \(group ids\) must have one entry per response: 3 for "),
        (np.array(["a", "a"]), torch.ones(2, 3, 1), r"response_mask must be \(bs, T\); got shape \(2, 3, 1\)"),
    ],
)
def test_shape_mismatches_raise_naming_both_shapes(uids, mask, match):
    from gdpo_verl.core.advantage import gdpo_advantages

    with pytest.raises(ValueError, match=match):
        gdpo_advantages(torch.ones(2, 1), uids, mask)


def test_out_of_range_condition_is_refused():
    from gdpo_verl.core.advantage import Condition, gdpo_advantages

    with pytest.raises(ValueError, match=r"must name two different rewards in \[0, 2\)"):
        gdpo_advantages(torch.ones(2, 2), ["a", "a"], torch.ones(2, 1), conditions=[Condition(0, 5, 1.0)])
