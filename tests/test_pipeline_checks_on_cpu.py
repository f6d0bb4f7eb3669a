"""Configs that would train on nothing, and estimator inputs that would slip through: each refused with a short
error naming the field, the value seen and the one expected; each followed by a healthy call that must succeed.

Run: .venv/bin/python -m pytest tests/test_pipeline_checks_on_cpu.py
"""

import logging
import os
import uuid

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from gdpo_verl.components import PROCESSES_PER_CORE, parse_spec, resolve
from gdpo_verl.core.contract import MAX_WEIGHT, SCORE_PREFIX, RewardSettings
from gdpo_verl.core.metrics import step_metrics
from gdpo_verl.estimator import compute_gdpo_advantage

HEALTHY = {"name": "f", "path": "gdpo_verl.demo.rewards", "fn": "format_reward"}


def spec(**kw):
    return parse_spec({"components": [HEALTHY], **kw})


def algo(**kw):
    return OmegaConf.create({"norm_adv_by_std_in_grpo": True, "gdpo_reward_keys": ["r"], **kw})


# ------------------------------------------------------------------------------------------------ configs
@pytest.mark.parametrize(
    "weights, match",
    [
        ([1e308], r"gdpo_reward_weights\[0\]=1e\+308 is too large: its magnitude must be at most 1e\+06"),
        ([-2e6], r"gdpo_reward_weights\[0\]=-2000000.0 is too large"),
        ([float("nan")], r"gdpo_reward_weights\[0\]=nan must be a finite number"),
    ],
)
def test_weights_must_be_finite_and_bounded(weights, match):
    with pytest.raises(ValueError, match=match):
        RewardSettings.from_algorithm(algo(gdpo_reward_weights=weights))
    with pytest.raises(ValueError, match=r"components\[0\] \(f\)\.weight=.* (too large|finite)"):
        parse_spec({"components": [{**HEALTHY, "weight": weights[0]}]})
    assert RewardSettings.from_algorithm(algo(gdpo_reward_weights=[MAX_WEIGHT])).weights == (MAX_WEIGHT,)


@pytest.mark.parametrize("epsilon", [float("nan"), float("inf"), 0.0, -1e-6])
def test_epsilon_must_be_finite_and_positive(epsilon):
    with pytest.raises(ValueError, match="algorithm.gdpo_epsilon="):
        RewardSettings.from_algorithm(algo(gdpo_epsilon=epsilon))
    assert RewardSettings.from_algorithm(algo(gdpo_epsilon=1e-4)).epsilon == 1e-4


def test_processes_are_bounded_by_the_cores():
    most = (os.cpu_count() or 1) * PROCESSES_PER_CORE
    with pytest.raises(ValueError, match=rf"processes=100000 is more than {PROCESSES_PER_CORE} x .* \({most}\)"):
        spec(processes=100000)
    assert spec(processes=most).processes == most


def test_error_messages_stay_short_and_name_the_first_offending_keys():
    kwargs = {f"unknown_{i:05d}": i for i in range(10_000)}
    with pytest.raises(ValueError) as caught:
        resolve(parse_spec({"components": [{**HEALTHY, "kwargs": kwargs}]}))  # bound to the function's signature
    message = str(caught.value)
    assert len(message) < 400, len(message)
    assert (
        "['unknown_00000', 'unknown_00001', 'unknown_00002', 'unknown_00003', 'unknown_00004'] and 9995 more" in message
    )
    with pytest.raises(ValueError) as caught:
        parse_spec({"components": [{**HEALTHY, **{f"k{i}": 1 for i in range(10_000)}}]})
    assert len(str(caught.value)) < 400 and "and 9995 more" in str(caught.value)
    with pytest.raises(ValueError) as caught:
        RewardSettings.from_algorithm(algo(gdpo_reward_keys=["a"] * 10_000))
    assert len(str(caught.value)) < 400
    assert spec().names == ["f"]


# ------------------------------------------------------------------------------------------------ estimator inputs
def call(mask, tensors=None, uids=("a", "a"), **config):
    mask = torch.as_tensor(mask)
    tensors = tensors if tensors is not None else {SCORE_PREFIX + "r": torch.tensor([[0.0, 1.0], [0.0, 0.0]])}
    return compute_gdpo_advantage(torch.zeros(2, 2), mask, index=uids, config=algo(**config), batch=tensors)


def healthy():
    adv, _ = call(torch.ones(2, 2))
    assert torch.isfinite(adv).all() and adv.abs().sum() > 0


def test_a_per_reward_tensor_must_have_the_masks_shape():
    with pytest.raises(
        ValueError, match=r"token_level_scores_r'\] must be \(2, 2\) \(response_mask's shape\); got \(2, 7\)"
    ):
        call(torch.ones(2, 2), {SCORE_PREFIX + "r": torch.zeros(2, 7)})
    healthy()


@pytest.mark.parametrize("bad, seen", [(2, "2"), (-1, "-1"), (0.5, "0.5"), (float("nan"), "nan")])
def test_the_mask_must_hold_0_and_1(bad, seen):
    mask = torch.ones(2, 2, dtype=torch.float32 if isinstance(bad, float) else torch.int64)
    mask[1, 0] = bad
    with pytest.raises(ValueError, match=rf"response_mask must hold only 0 and 1; found {seen}.* at \[1, 0\]"):
        call(mask)
    healthy()


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.int32, torch.int64, torch.float16, torch.float64])
def test_a_0_1_mask_in_any_int_bool_or_float_dtype_is_accepted(dtype):
    adv, _ = call(torch.tensor([[1, 1], [1, 0]]).to(dtype))
    assert torch.isfinite(adv).all() and adv[1, 1] == 0


def test_meta_tensors_are_refused_by_name():
    with pytest.raises(ValueError, match=r"response_mask is on the meta device \(shape \(2, 2\), no values\)"):
        call(torch.ones(2, 2, device="meta"))
    with pytest.raises(ValueError, match=r"batch\['token_level_scores_r'\] is on the meta device"):
        call(torch.ones(2, 2), {SCORE_PREFIX + "r": torch.zeros(2, 2, device="meta")})
    healthy()


@pytest.mark.parametrize(
    "uids, match",
    [
        (np.array([{"a": 1}, {"a": 1}], dtype=object), r"uid must hold hashable scalars .*found dict \{'a': 1\}"),
        ([["a"], ["b"]], r"uid must have shape \(2,\) \(one group id per response\); got shape \(2, 1\)"),
        (np.array([["a", "b"], ["c", "d"]]), r"uid must have shape \(2,\).*got shape \(2, 2\)"),
        (np.array([["a"], ["b", "c"]], dtype=object), r"uid must hold hashable scalars .*found list \['a'\]"),
        (["a", "a", "b"], r"uid must have shape \(2,\).*got shape \(3,\)"),
    ],
)
def test_uids_must_be_hashable_scalars(uids, match):
    with pytest.raises(ValueError, match=match):
        call(torch.ones(2, 2), uids=uids)
    healthy()


@pytest.mark.parametrize("uids", [["a", "a"], np.array([3, 3]), torch.tensor([1, 1]), [uuid.UUID(int=1)] * 2, [7, 7]])
def test_scalar_uids_of_any_kind_are_accepted(uids):
    adv, _ = call(torch.ones(2, 2), uids=uids)
    assert adv.abs().sum() > 0


# ------------------------------------------------------------------------------------------------ run time
def test_a_step_whose_advantages_are_all_zero_while_rewards_vary_is_loud(caplog):
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0]])  # both vary inside group a
    uids = np.array(["a", "a", "b", "b"], dtype=object)
    with caplog.at_level(logging.WARNING, logger="gdpo_verl.core.metrics"):
        out = step_metrics(scores, uids, ["x", "y"], [0.0, 0.0])
    assert out["gdpo/zero_advantage_step"] == 1.0
    assert "every advantage of this step is 0 although rewards ['x', 'y'] vary inside groups" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gdpo_verl.core.metrics"):
        cancelling = step_metrics(scores, uids, ["x", "y"], [1.0, 1.0])  # x and y cancel in group a
        assert cancelling["gdpo/zero_advantage_step"] == 1.0
        flat = step_metrics(torch.ones(4, 2), uids, ["x", "y"], [1.0, 1.0])  # nothing varies: a result
        fine = step_metrics(scores, uids, ["x", "y"], [1.0, 2.0])
    assert flat["gdpo/zero_advantage_step"] == 0.0 and fine["gdpo/zero_advantage_step"] == 0.0
