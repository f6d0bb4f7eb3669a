"""Per-reward scores reach the ``gdpo`` estimator in both verl trainers; KL in reward; step metrics.

The legacy trainer hands the estimator ``non_tensor_batch`` with the manager's columns; the V1 trainer hands it
only uid/mask/rm_scores, so ``GDPOAdvantageMixin`` fetches ``extra_fields`` from TransferQueue. Here the V1
parent's ``_compute_advantage`` is reproduced in a few lines (same inputs as verl's) and TransferQueue is a
stub; the real path runs in the end-to-end tests.
Run: .venv/bin/python -m pytest tests/test_verl_glue_on_cpu.py
"""

import sys
import types

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.trainer.ppo.v1 import get_trainer_cls

from gdpo_verl.core.advantage import gdpo_advantages
from gdpo_verl.verl_glue import GDPOAdvantageMixin, columns_from_extra_fields, reward_metrics

NAN = float("nan")
# manager output for 4 samples in 2 groups; sample 3 comes from a data source without "correctness"
INFOS = [
    {"format": 1.0, "correctness": 1.0, "gdpo_error_format": 0.0},
    {"format": 0.0, "correctness": 0.0, "gdpo_error_format": 1.0},
    {"format": 1.0, "correctness": 0.0, "gdpo_error_format": 0.0},
    {"format": 0.0, "gdpo_error_format": 0.0},
]
SOURCES = ["math", "math", "chat", "chat"]
UIDS = np.array(["a", "a", "b", "b"], dtype=object)


def algo(**kw):
    return OmegaConf.create(
        {
            "adv_estimator": "gdpo",
            "gdpo_reward_keys": ["format", "correctness"],
            "gdpo_reward_weights": [1.0, 2.0],
            "norm_adv_by_std_in_grpo": True,
            "use_kl_in_reward": False,
            **kw,
        }
    )


def expected(mask):
    scores = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, NAN]])
    return gdpo_advantages(scores, UIDS, mask, weights=[1.0, 2.0])


def legacy_data(mask):
    columns = columns_from_extra_fields([{"reward_extra_info": i} for i in INFOS], SOURCES)
    tensors = {
        "response_mask": mask,
        "token_level_rewards": torch.zeros(mask.shape),
        "token_level_scores": torch.zeros(mask.shape),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": UIDS, **columns})


def test_columns_from_extra_fields_keeps_every_key_of_every_sample():
    cols = columns_from_extra_fields([{"reward_extra_info": {"a": 1.0}}, {"reward_extra_info": {"b": 2.0}}, {}])
    assert cols["a"].tolist() == [1.0, None, None] and cols["b"].tolist() == [None, 2.0, None]


def test_legacy_path_uses_non_tensor_columns_with_weights_and_mixed_keys():
    mask = torch.ones(4, 3, dtype=torch.int64)
    out = compute_advantage(legacy_data(mask), "gdpo", config=algo())
    assert torch.allclose(out.batch["advantages"], expected(mask), atol=1e-6)


def test_reward_metrics_per_component_errors_sources_and_collapse_for_any_estimator():
    data = legacy_data(torch.ones(4, 3, dtype=torch.int64))
    for adv_estimator in ("gdpo", "grpo"):
        metrics = reward_metrics(data.non_tensor_batch, UIDS, algo(adv_estimator=adv_estimator))
        assert metrics["gdpo/format/errors"] == 1.0
        assert metrics["gdpo/format/mean"] == pytest.approx(0.5)
        assert metrics["gdpo/correctness/missing_frac"] == pytest.approx(0.25)
        assert metrics["gdpo/source/chat/format/mean"] == pytest.approx(0.5)
        # group a: format (1,0) and correctness (1,0) -> both vary; group b: format (1,0) varies
        assert metrics["gdpo/format/zero_var_group_frac"] == 0.0
        assert {"gdpo/collapse/distinct_gdpo", "gdpo/collapse/distinct_grpo"} <= set(metrics)
    assert reward_metrics(data.non_tensor_batch, UIDS, algo(gdpo_reward_keys=None)) == {}


def test_legacy_trainer_metrics_hook_is_installed_once():
    from verl.trainer.ppo import ray_trainer

    from gdpo_verl.verl_glue import WRAPPED_MARK, install

    install()
    once, fit_once = ray_trainer.compute_data_metrics, ray_trainer.RayPPOTrainer.fit
    install()  # a second install (plugin loaded again) must not wrap the wrappers
    assert ray_trainer.compute_data_metrics is once and ray_trainer.RayPPOTrainer.fit is fit_once
    assert getattr(once, WRAPPED_MARK) is True
    original = once.__wrapped__  # functools.wraps copies __module__, so look at the object itself
    assert not getattr(original, WRAPPED_MARK, False) and original.__code__.co_filename.endswith("metric_utils.py")


def test_kl_in_reward_is_added_before_the_final_normalization_not_dropped():
    mask = torch.ones(4, 3, dtype=torch.int64)
    data = legacy_data(mask)
    kl = torch.tensor([[0.0, -0.1, -0.1], [0.0, 0.0, -0.3], [0.0, 0.0, 0.0], [-0.2, 0.0, 0.0]])
    data.batch["token_level_rewards"] = data.batch["token_level_scores"] + kl  # verl: rewards = scores - beta*kl
    with_kl = compute_advantage(data, "gdpo", config=algo(use_kl_in_reward=True)).batch["advantages"]
    scores = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, NAN]])
    ref = gdpo_advantages(scores, UIDS, mask, weights=[1.0, 2.0], offset=kl.sum(-1))
    assert torch.allclose(with_kl, ref, atol=1e-6) and not torch.allclose(with_kl, expected(mask), atol=1e-3)


class FakeV1Parent:
    """verl's V1 ``_compute_advantage`` inputs: only uid, response_mask, rm_scores from TransferQueue."""

    def __init__(self, config):
        self.config = config

    def _compute_advantage(self, batch, metrics):
        data = DataProto.from_dict(
            tensors={
                "response_mask": batch.mask,
                "token_level_scores": batch.rm_scores,
                "token_level_rewards": batch.rm_scores,
            },
            non_tensors={"uid": UIDS},
        )
        return compute_advantage(data, self.config.algorithm.adv_estimator, config=self.config.algorithm)


class Trainer(GDPOAdvantageMixin, FakeV1Parent):
    pass


@pytest.mark.parametrize("adv_estimator", ["gdpo", "grpo"])
def test_v1_mixin_fetches_extra_fields_supplies_them_and_logs_metrics(monkeypatch, adv_estimator):
    mask = torch.ones(4, 3, dtype=torch.int64)
    stored = {
        "extra_fields": np.array([{"reward_extra_info": i} for i in INFOS], dtype=object),
        "data_source": np.array(SOURCES, dtype=object),
        "uid": UIDS,
    }
    fetched = []

    def kv_batch_get(keys, partition_id, select_fields):
        fetched.append(select_fields)
        return {f: stored[f] for f in select_fields}

    monkeypatch.setitem(sys.modules, "transfer_queue", types.SimpleNamespace(kv_batch_get=kv_batch_get))
    batch = types.SimpleNamespace(
        keys=["k0", "k1", "k2", "k3"], partition_id="train", mask=mask, rm_scores=torch.zeros(4, 3)
    )
    metrics = {}
    out = Trainer(OmegaConf.create({"algorithm": algo(adv_estimator=adv_estimator)}))._compute_advantage(batch, metrics)
    assert fetched == [["uid", "extra_fields", "data_source"]]
    if adv_estimator == "gdpo":
        assert torch.allclose(out.batch["advantages"], expected(mask), atol=1e-6)
    assert metrics["gdpo/format/errors"] == 1.0 and "gdpo/source/math/correctness/mean" in metrics


def test_v1_mixin_stays_out_of_the_way_without_components(monkeypatch):
    monkeypatch.setitem(sys.modules, "transfer_queue", types.SimpleNamespace(kv_batch_get=None))  # never called
    mask = torch.ones(4, 3, dtype=torch.int64)
    batch = types.SimpleNamespace(keys=[], partition_id="train", mask=mask, rm_scores=torch.rand(4, 3))
    config = OmegaConf.create({"algorithm": algo(adv_estimator="grpo", gdpo_reward_keys=None)})
    metrics = {}
    out = Trainer(config)._compute_advantage(batch, metrics)
    assert torch.isfinite(out.batch["advantages"]).all() and metrics == {}


def test_every_registered_v1_trainer_mode_carries_the_mixin_once():
    from gdpo_verl.verl_glue import install

    install()
    for mode in ("sync", "colocate_async", "separate_async"):
        cls = get_trainer_cls(mode)
        assert cls.__mro__.count(GDPOAdvantageMixin) == 1 and issubclass(cls, GDPOAdvantageMixin)
        assert sum(1 for c in cls.__mro__ if getattr(c, "__dict__", {}).get("_gdpo_verl_wrapped")) == 1


def test_a_key_missing_from_every_sample_is_a_configuration_error_and_some_is_an_abstention():
    from gdpo_verl.components import MISSING_PREFIX

    data = legacy_data(torch.ones(4, 3, dtype=torch.int64))
    columns = dict(data.non_tensor_batch)
    columns[MISSING_PREFIX + "correctness"] = np.array([0.0, 0.0, 0.0, 1.0])  # sample 3's source has no such key
    assert "gdpo/correctness/mean" in reward_metrics(columns, UIDS, algo())
    columns[MISSING_PREFIX + "correctness"] = np.ones(4)
    with pytest.raises(ValueError, match=r"'correctness'.*lacked the key on all 4 samples of this batch"):
        reward_metrics(columns, UIDS, algo())


def test_non_finite_values_are_counted_and_left_out_of_the_statistics():
    from gdpo_verl.components import NONFINITE_PREFIX

    data = legacy_data(torch.ones(4, 3, dtype=torch.int64))
    columns = dict(data.non_tensor_batch)
    columns["format"] = np.array([1.0, np.inf, 1.0, 0.0], dtype=object)  # an upstream-style column with inf
    columns[NONFINITE_PREFIX + "format"] = np.array([0.0, 0.0, 1.0, 0.0])  # the manager flagged one more
    metrics = reward_metrics(columns, UIDS, algo())
    assert metrics["gdpo/format/nonfinite"] == 2.0
    assert metrics["gdpo/format/max"] == 1.0 and metrics["gdpo/format/missing_frac"] == 0.25
