"""GDPO's V1 sampler (gdpo_verl.verl_glue.replay_buffer) and its keep/drop rule (gdpo_verl.core.group_filter).

Hand cases of the rule (constant total but varying components kept, all components constant dropped, missing
values ignored, singletons kept), the sampler's filter hook against a stand-in TransferQueue, its options and their
errors, and its construction from the composed config. Run with
``.venv/bin/python -m pytest tests/test_replay_buffer_on_cpu.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from gdpo_verl.core.group_filter import REASONS, classify_groups
from gdpo_verl.verl_glue import replay_buffer as replay_filter

NAN = math.nan


def _verdict(rows, uids, weights=(1.0, 1.0)):
    v = classify_groups(torch.tensor(rows, dtype=torch.float32), uids, weights)
    return {
        u: (bool(k), ["kept_total_varies", "kept_any_component", "dropped_all_constant", "kept_singleton"][r])
        for u, k, r in zip(v.uids, v.keep, v.reason, strict=True)
    }


def test_constant_total_with_varying_components_is_kept():
    # (1,0) and (0,1): the sum is 1 for both, so a filter on the sum drops the group; GDPO sees signal in both.
    assert _verdict([[1, 0], [0, 1], [1, 0]], ["a", "a", "a"]) == {"a": (True, "kept_any_component")}


def test_all_components_constant_is_dropped_and_a_varying_total_is_kept():
    rows = [[1, 1], [1, 1], [0, 0], [1, 0], [0.5, 2], [0.5, 2]]
    got = _verdict(rows, ["a", "a", "b", "b", "c", "c"])
    assert got == {
        "a": (False, "dropped_all_constant"),
        "b": (True, "kept_total_varies"),
        "c": (False, "dropped_all_constant"),
    }


def test_missing_values_abstain():
    rows = [
        [1, NAN],
        [1, 0],  # a: component 2 has one present value, component 1 constant -> dropped
        [0, 1],
        [NAN, 1],  # b: NaN is not "different" -> dropped
        [1, 1],
        [NAN, NAN],  # c: a response with everything missing changes nothing -> dropped
        [0, NAN],
        [1, NAN],  # d: component 1 varies among present values -> kept
    ]
    got = _verdict(rows, list("aabbccdd"))
    assert got == {
        "a": (False, "dropped_all_constant"),
        "b": (False, "dropped_all_constant"),
        "c": (False, "dropped_all_constant"),
        "d": (True, "kept_total_varies"),
    }


def test_weights_decide_the_total_and_singletons_are_never_filtered():
    # (2,0) vs (0,1): the weighted total 2*w0 vs w1 is constant only for w = (0.5, 1).
    assert _verdict([[2, 0], [0, 1]], ["a", "a"], (0.5, 1.0)) == {"a": (True, "kept_any_component")}
    assert _verdict([[2, 0], [0, 1]], ["a", "a"], (1.0, 1.0)) == {"a": (True, "kept_total_varies")}
    assert _verdict([[3, 3]], ["s"]) == {"s": (True, "kept_singleton")}


def test_group_order_and_totals_of_dropped_groups():
    v = classify_groups(torch.tensor([[0.0, 2.0], [1.0, 1.0], [0.0, 2.0]]), ["z", "y", "z"], [1.0, 1.0])
    assert list(v.uids) == ["z", "y"] and v.total.tolist() == [2.0, 2.0]
    assert dict(zip(REASONS, np.bincount(v.reason, minlength=len(REASONS)).tolist())) == {
        "kept_total_varies": 0,
        "kept_any_component": 0,
        "dropped_all_constant": 1,
        "kept_singleton": 1,
    }


def test_component_scores_reads_reward_extra_info_and_refuses_absent_components():
    fields = [{"reward_extra_info": {"format": 1.0, "correctness": None}}, {"reward_extra_info": {"format": 0.0}}]
    scores = replay_filter.component_scores(fields, ["format", "correctness"])
    assert scores[:, 0].tolist() == [1.0, 0.0] and torch.isnan(scores[:, 1]).all()
    with pytest.raises(RuntimeError, match=r"\['brevity'\] are in no trajectory"):
        replay_filter.component_scores(fields, ["format", "brevity"])


# --- the sampler ------------------------------------------------------------------------------------------------------

ALGORITHM = {
    "filter_groups": {"enable": True, "metric": None, "max_inflight_gen_batches": 2},
    "gdpo_reward_keys": ["format", "correctness"],
    "gdpo_reward_weights": [1.0, 1.0],
}


def _sampler(mode="sync", **kwargs):
    sampler_kwargs = {
        "poll_interval": 0.05,
        "group_filter": "any_component",
        "algorithm": ALGORITHM,
        "train_batch_size": 4,
        "gen_batch_size": None,
        "sync_refill_failed_groups": False,
        **kwargs,
    }
    return replay_filter.GDPOReplayBuffer(
        trainer_mode=mode,
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create(sampler_kwargs),
        refill_fn=lambda n: n,
    )


def test_sampler_filters_on_every_component_and_counts_reasons(monkeypatch):
    import transfer_queue as tq

    infos = {  # uid -> per-trajectory (format, correctness)
        "u1": [(1.0, 0.0), (0.0, 1.0)],  # constant total, varying components -> kept
        "u2": [(1.0, 1.0), (1.0, 1.0)],  # nothing varies -> dropped
        "u3": [(0.0, 0.0), (1.0, 1.0)],  # total varies -> kept
    }
    store = {
        f"{u}_{i}_0": {"reward_extra_info": {"format": f, "correctness": c}}
        for u, rows in infos.items()
        for i, (f, c) in enumerate(rows)
    }
    calls = []

    def kv_batch_get(keys, partition_id, select_fields):
        calls.append(list(keys))
        assert select_fields == ["extra_fields"]
        return {"extra_fields": [store[k] for k in keys]}

    monkeypatch.setattr(tq, "kv_batch_get", kv_batch_get)
    buffer = _sampler()
    assert buffer.poll_interval == 0.05 and buffer.filter_groups_metric == replay_filter.ANY_COMPONENT_METRIC
    assert buffer.gen_batch_size == 1 and buffer.max_inflight_gen_batches == 2 and buffer.train_batch_size == 4
    buffer.finished_keys["train"] = set(infos)
    buffer.partitions["train"] = {k: {} for k in store}
    dropped, collapsed_to = buffer._dapo_filtered_keys("train")
    assert dropped == {"u2"} and collapsed_to == {2.0: 1}
    assert buffer.take_filter_metrics() == {
        "gdpo/filter/kept_total_varies": 1,
        "gdpo/filter/kept_any_component": 1,
        "gdpo/filter/dropped_all_constant": 1,
        "gdpo/filter/kept_singleton": 0,
    }
    # classified groups are cached: a second poll reads nothing new and counts nothing again
    assert buffer._dapo_filtered_keys("train")[0] == {"u2"} and len(calls) == 1
    assert set(buffer.take_filter_metrics().values()) == {0}
    assert buffer._dapo_filtered_keys("val") == (set(), {})


def test_conditions_apply_before_the_rule(monkeypatch):
    import transfer_queue as tq

    # brevity varies only where correctness is 0; conditioned on correctness >= 1 it is constant (0) there.
    store = {
        "u_0_0": {"reward_extra_info": {"correctness": 0.0, "brevity": 1.0}},
        "u_1_0": {"reward_extra_info": {"correctness": 0.0, "brevity": 0.0}},
    }
    monkeypatch.setattr(tq, "kv_batch_get", lambda keys, **_: {"extra_fields": [store[k] for k in keys]})
    algorithm = {
        **ALGORITHM,
        "gdpo_reward_keys": ["correctness", "brevity"],
        "gdpo_reward_conditions": {"brevity": {"on": "correctness", "threshold": 1.0}},
    }
    buffer = _sampler(algorithm=algorithm)
    buffer.finished_keys["train"] = {"u"}
    buffer.partitions["train"] = {k: {} for k in store}
    assert buffer._dapo_filtered_keys("train")[0] == {"u"}


def test_options_are_validated_and_defaults_are_verls():
    with pytest.raises(ValueError, match=r"group_filter='sum' is unknown; valid values: metric, any_component"):
        _sampler(group_filter="sum")
    with pytest.raises(ValueError, match="poll_interval=0.0 must be a positive"):
        _sampler(poll_interval=0)
    metric_rule = {**ALGORITHM, "filter_groups": {"enable": True, "metric": None}}
    with pytest.raises(ValueError, match="algorithm.filter_groups.metric must be set"):
        _sampler(group_filter="metric", algorithm=metric_rule)
    off = _sampler(group_filter="metric", algorithm={"filter_groups": {"enable": False}}, poll_interval=None)
    assert off.filter_groups_metric is None and off.poll_interval == 2.0 and off.gen_batch_size == 4
    acc = _sampler(group_filter="metric", algorithm={"filter_groups": {"enable": True, "metric": "acc"}})
    assert acc.filter_groups_metric == "acc" and acc.gen_batch_size == 1


def test_async_trainer_modes_get_the_async_sampler():
    from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

    buffer = _sampler(mode="separate_async")
    assert isinstance(buffer, replay_filter.GDPOReplayBufferAsync) and isinstance(buffer, ReplayBufferAsync)
    assert buffer.filter_groups_metric == replay_filter.ANY_COMPONENT_METRIC
    assert buffer.train_batch_size is None  # the sync sampler's batch sizing is not passed to verl's async one
    assert type(buffer).wait_for_sampleable is ReplayBufferAsync.wait_for_sampleable  # verl's async waiting
    mro = type(buffer).__mro__
    assert mro.index(ReplayBufferAsync) < mro.index(replay_filter.ReplayBuffer)  # super().sample is the async one


def test_verl_builds_it_from_the_composed_demo_config():
    """verl's own _build_replay_buffer, on the config python -m gdpo_verl.main composes (CPU preset + demo)."""
    from types import SimpleNamespace

    from helpers.compose import compose_config
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    config = compose_config(
        "demo",
        [
            "algorithm.filter_groups.enable=true",
            "trainer.v1.sampler.sampler_kwargs.group_filter=any_component",
            "+algorithm.gdpo_reward_keys=[format,correctness,brevity]",
        ],
    )
    OmegaConf.resolve(config)
    fake = SimpleNamespace(config=config, trainer_mode="sync", _add_prompts_to_generate=lambda n: n)
    buffer = PPOTrainer._build_replay_buffer(fake)
    assert type(buffer) is replay_filter.GDPOReplayBuffer
    assert buffer.poll_interval == 0.05 and buffer.filter_settings.keys == ("format", "correctness", "brevity")
    assert buffer.train_batch_size == config.data.train_batch_size == 16 and buffer.gen_batch_size == 1
