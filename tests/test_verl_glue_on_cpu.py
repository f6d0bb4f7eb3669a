"""The per-reward tensors through verl's own code in both trainers, the glue's refusals, and its source pins.

Rollout side: verl rows built by ``GDPOAgentLoopOutput.as_dict`` (V1) carry ``token_level_scores_<name>``. Trainer
side: ``GDPOAdvantageMixin._compute_advantage`` runs over an in-memory TransferQueue holding those rows (verl's own
jagged TensorDict from ``list_of_dict_to_tensordict``, fields a row lacks left out as TransferQueue does); the legacy
path runs verl's ``compute_advantage`` / ``compute_data_metrics`` (wrapped). The real end-to-end path is in
tests/test_e2e_on_cpu.py.
Run: .venv/bin/python -m pytest tests/test_verl_glue_on_cpu.py
"""

import sys
import types

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
from verl.trainer.ppo import ray_trainer
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from gdpo_verl.components import AGENT_LOOP_MANAGER
from gdpo_verl.core.advantage import gdpo_advantages
from gdpo_verl.core.contract import ERROR_PREFIX, MISSING_PREFIX, NONFINITE_PREFIX, TOKENS_PREFIX, RewardSettings
from gdpo_verl.core.token_scores import token_score_tensors
from gdpo_verl.verl_glue import check_registered, install
from gdpo_verl.verl_glue.agent_loop import GDPOAgentLoopOutput
from gdpo_verl.verl_glue.batch import reward_metrics, session_final_rows
from gdpo_verl.verl_glue.checks import WRAPPED_MARK, check_run_config, check_trainer_mode
from gdpo_verl.verl_glue.legacy import METRICS_META_KEY
from gdpo_verl.verl_glue.v1 import GDPOAdvantageMixin

install()
NAN = float("nan")
NAMES = ("format", "correctness")
# manager output for 4 responses in 2 groups; response 3's data source has no "correctness" (abstains);
# response 1's correctness is a process reward over its 3 tokens (sum 0.75)
INFOS = [
    {"format": 1.0, "correctness": 1.0, ERROR_PREFIX + "format": 0.0},
    {"format": 0.0, "correctness": 0.75, ERROR_PREFIX + "format": 1.0, TOKENS_PREFIX + "correctness": [0.5, 0.0, 0.25]},
    {"format": 1.0, "correctness": 0.0, ERROR_PREFIX + "format": 0.0},
    {"format": 0.0, "correctness": NAN, ERROR_PREFIX + "format": 0.0},
]
LENGTHS = [2, 3, 1, 3]
SOURCES = ["math", "math", "chat", "chat"]
UIDS = np.array(["a", "a", "b", "b"], dtype=object)
SCORES = torch.tensor([[1.0, 1.0], [0.0, 0.75], [1.0, 0.0], [0.0, NAN]])


def algo(**kw):
    return OmegaConf.create(
        {
            "adv_estimator": "gdpo",
            "gdpo_reward_keys": list(NAMES),
            "gdpo_reward_weights": [1.0, 2.0],
            "norm_adv_by_std_in_grpo": True,
            "use_kl_in_reward": False,
            "gamma": 1.0,
            "lam": 1.0,
            **kw,
        }
    )


def full_config(adv_estimator="gdpo", manager="gdpo_multi", **algo_kw):
    return OmegaConf.create(
        {
            "algorithm": algo(adv_estimator=adv_estimator, **algo_kw),
            "reward": {"reward_manager": {"name": manager}, "gdpo": {"components": []}},
            "actor_rollout_ref": {"rollout": {"n": 2, "agent": {"agent_loop_manager_class": AGENT_LOOP_MANAGER}}},
            "trainer": {"use_v1": True, "v1": {"trainer_mode": "sync"}},
        }
    )


def response_mask(lengths=LENGTHS):
    t = max(lengths)
    return (torch.arange(t).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(torch.int64)


def expected(scores=SCORES, uids=UIDS, mask=None):
    return gdpo_advantages(scores, uids, response_mask() if mask is None else mask, weights=[1.0, 2.0])


# ---------------------------------------------------------------- rollout side: the rows verl stores


def agent_output(info, length, source="math"):
    out = AgentLoopOutput(
        prompt_ids=[1, 2], response_ids=list(range(3, 3 + length)), response_mask=[1] * length,
        metrics=AgentLoopMetrics(), num_turns=2,
    )  # fmt: skip
    out.reward_score = 0.0  # what verl's reward step sets, with the manager's reward_extra_info
    out.extra_fields["reward_extra_info"] = dict(info)
    return GDPOAgentLoopOutput.of(out, NAMES)


def test_v1_rows_carry_each_components_tensor_beside_rm_scores():
    rows = [agent_output(info, n).as_dict() for info, n in zip(INFOS, LENGTHS, strict=True)]
    assert [r["token_level_scores_format"].tolist() for r in rows[:2]] == [[0.0, 1.0], [0.0, 0.0, 0.0]]
    assert rows[1]["token_level_scores_correctness"].tolist() == [0.5, 0.0, 0.25]  # process reward, as given
    assert rows[0]["token_level_scores_correctness"].shape == rows[0]["rm_scores"].shape
    assert torch.isnan(rows[3]["token_level_scores_correctness"][-1])  # abstention: NaN on the last token
    assert all(r["token_level_scores_format"].dtype == torch.float32 for r in rows)
    # the per-token list leaves reward_extra_info (one scalar per key stays for verl's metrics and filters)
    assert TOKENS_PREFIX + "correctness" not in rows[1]["extra_fields"]["reward_extra_info"]
    assert rows[1]["extra_fields"]["reward_extra_info"]["correctness"] == 0.75
    assert rows[0]["data_source"] == "unknown"  # verl's kwargs (the sample's own data_source) overwrite it


def test_an_agent_loop_output_subclass_is_refused_not_truncated():
    class Richer(AgentLoopOutput):
        extra: int = 1

    out = Richer(prompt_ids=[1], response_ids=[2], response_mask=[1], metrics=AgentLoopMetrics())
    with pytest.raises(TypeError, match="Richer.*would be lost"):
        GDPOAgentLoopOutput.of(out, NAMES)


def test_a_process_reward_of_another_length_lands_as_its_sum_on_the_last_token():
    # verl gives a session's earlier outputs the final output's reward info; their lengths differ
    t = token_score_tensors([INFOS[1]], NAMES, torch.tensor([5]), width=6)["token_level_scores_correctness"]
    assert t.tolist() == [[0.0, 0.0, 0.0, 0.0, 0.75, 0.0]]


# ---------------------------------------------------------------- trainer side: V1 over an in-memory TransferQueue


class FakeTQ:
    """TransferQueue's kv_batch_get/kv_batch_put over verl-built rows; fields no row has are left out (as TQ)."""

    def __init__(self, rows: dict):
        self.rows, self.fetched, self.put = rows, [], {}

    def kv_batch_get(self, keys, partition_id, select_fields):
        self.fetched.append(list(select_fields))
        rows = [self.rows[k] for k in keys]
        present = [f for f in select_fields if all(f in r for r in rows)]
        return list_of_dict_to_tensordict([{f: r[f] for f in present} for r in rows])

    def kv_batch_put(self, keys, partition_id, fields):
        self.put = {f: fields[f] for f in fields.keys()}
        return types.SimpleNamespace(keys=keys, partition_id=partition_id)


def v1_rows(keys, infos, lengths, sources, uids):
    rows = {}
    for key, info, n, source, uid in zip(keys, infos, lengths, sources, uids, strict=True):
        row = agent_output(info, n).as_dict()
        row.update({"uid": uid, "data_source": source})  # verl: field.update(kwargs)
        row["response_mask"] = torch.ones(n, dtype=torch.int64)
        rows[key] = row
    return rows


class FakeV1Parent:
    def __init__(self, config):
        self.config = config

    def _compute_advantage(self, batch, metrics):  # verl's GRPO path is not under test here
        metrics["verl/ran"] = 1.0
        return batch


class Trainer(GDPOAdvantageMixin, FakeV1Parent):
    pass


def run_v1(monkeypatch, config, keys, infos=INFOS, lengths=LENGTHS, sources=SOURCES, uids=UIDS):
    tq = FakeTQ(v1_rows(keys, infos, lengths, sources, uids))
    monkeypatch.setitem(sys.modules, "transfer_queue", tq)
    metrics = {}
    Trainer(config)._compute_advantage(KVBatch(keys), metrics)
    return tq, metrics


class KVBatch:
    """What verl's V1 trainer passes around: the batch's TransferQueue keys and partition."""

    def __init__(self, keys, partition_id="train"):
        self.keys, self.partition_id = list(keys), partition_id

    def __len__(self):
        return len(self.keys)


def padded(nested) -> torch.Tensor:
    return nested.to_padded_tensor(0.0)


def test_v1_gdpo_reads_the_per_reward_tensors_from_transfer_queue(monkeypatch):
    tq, metrics = run_v1(monkeypatch, full_config(), ["a_0_0", "a_1_0", "b_0_0", "b_1_0"])
    assert {"token_level_scores_format", "token_level_scores_correctness"} <= set(tq.fetched[0])
    assert torch.allclose(padded(tq.put["advantages"]), expected(), atol=1e-6)
    assert metrics["gdpo/format/errors"] == 1.0 and metrics["gdpo/correctness/missing_frac"] == pytest.approx(0.25)
    assert metrics["gdpo/source/chat/format/mean"] == pytest.approx(0.5)


def test_v1_without_the_tensors_refuses_instead_of_falling_back_to_scalars(monkeypatch):
    tq = FakeTQ(v1_rows(["a_0_0", "a_1_0"], INFOS[:2], LENGTHS[:2], SOURCES[:2], UIDS[:2]))
    for row in tq.rows.values():
        del row["token_level_scores_format"]  # rows written by verl's own workers
    monkeypatch.setitem(sys.modules, "transfer_queue", tq)
    with pytest.raises(RuntimeError, match=r"lacks the per-reward tensors \['token_level_scores_format'\]"):
        Trainer(full_config())._compute_advantage(KVBatch(["a_0_0", "a_1_0"]), {})


def test_v1_upstream_style_configs_take_the_scalar_path_from_reward_extra_info(monkeypatch):
    tq, _ = run_v1(monkeypatch, full_config(manager="naive"), ["a_0_0", "a_1_0", "b_0_0", "b_1_0"])
    assert not any(f.startswith("token_level_scores_") for f in tq.fetched[0])
    assert torch.allclose(padded(tq.put["advantages"]), expected(), atol=1e-6)


def test_v1_counts_one_value_per_agent_session_as_grpo_does(monkeypatch):
    # session a_0 has two outputs (a_0_0 earlier, a_0_1 final); verl copied the final reward info to a_0_0
    keys = ["a_0_0", "a_0_1", "a_1_0", "b_0_0", "b_1_0"]
    infos = [INFOS[0], INFOS[0], INFOS[1], INFOS[2], INFOS[3]]
    lengths = [1, *LENGTHS]
    uids = np.array(["a", "a", "a", "b", "b"], dtype=object)
    tq, metrics = run_v1(monkeypatch, full_config(), keys, infos, lengths, ["math"] * 5, uids)
    adv = padded(tq.put["advantages"])
    finals = expected()  # the 4 final outputs form the groups, exactly as without the earlier output
    assert torch.allclose(adv[1:], finals, atol=1e-6)
    assert torch.allclose(adv[0, :1], finals[0, :1], atol=1e-6)  # the session's advantage, broadcast
    assert metrics["gdpo/format/mean"] == pytest.approx(0.5)  # 4 values, not 5


def test_session_final_rows_groups_by_uid_and_session():
    final, position = session_final_rows(["x_1_2", "x_1_0", "y_0_0", "x_1_1", "x_0_0"])
    assert final.tolist() == [0, 2, 4] and position.tolist() == [0, 0, 1, 0, 2]
    with pytest.raises(ValueError, match="uid.*session.*index"):
        session_final_rows(["nounderscores"])


def test_v1_grpo_baseline_logs_the_same_metrics_after_verls_own_step(monkeypatch):
    _, gdpo = run_v1(monkeypatch, full_config(), ["a_0_0", "a_1_0", "b_0_0", "b_1_0"])
    _, grpo = run_v1(monkeypatch, full_config(adv_estimator="grpo"), ["a_0_0", "a_1_0", "b_0_0", "b_1_0"])
    assert grpo.pop("verl/ran") == 1.0
    assert grpo == gdpo


# ---------------------------------------------------------------- legacy trainer: verl's compute_advantage, wrapped


def legacy_batch(with_tensors=True):
    mask = response_mask()
    non_tensors = {"uid": UIDS, "data_source": np.array(SOURCES, dtype=object)}
    for key in {k for info in INFOS for k in info if not k.startswith(TOKENS_PREFIX)}:
        non_tensors[key] = np.array([info.get(key) for info in INFOS], dtype=object)
    zeros = torch.zeros(mask.shape)
    tensors = {"response_mask": mask, "token_level_rewards": zeros, "token_level_scores": zeros.clone()}
    # what verl's compute_data_metrics reads besides
    tensors.update(prompts=torch.ones(4, 2, dtype=torch.int64), responses=torch.ones(mask.shape, dtype=torch.int64))
    tensors["attention_mask"] = torch.cat([torch.ones(4, 2, dtype=torch.int64), mask], dim=1)
    if with_tensors:
        tensors.update(token_score_tensors(INFOS, NAMES, torch.tensor(LENGTHS), mask.shape[1]))
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


@pytest.mark.parametrize("with_tensors", [True, False], ids=["tensors", "upstream_scalars"])
def test_legacy_gdpo_reads_the_tensors_and_ours_are_the_metrics_logged(with_tensors):
    data = ray_trainer.compute_advantage(legacy_batch(with_tensors), "gdpo", config=algo())
    assert torch.allclose(data.batch["advantages"], expected(), atol=1e-6)
    # verl's own gdpo/<k>/* block in RayPPOTrainer.fit reads non_tensor_batch[<k>]: gone once the estimator ran
    assert not set(NAMES) & set(data.non_tensor_batch)
    metrics = ray_trainer.compute_data_metrics(batch=data, use_critic=False)
    assert metrics["gdpo/format/errors"] == 1.0 and METRICS_META_KEY not in data.meta_info


def test_legacy_and_v1_log_the_same_metrics_for_a_conditioned_reward_with_a_missing_value(monkeypatch):
    conditions = {"format": {"on": "correctness", "threshold": 1.0}}
    data = ray_trainer.compute_advantage(legacy_batch(), "gdpo", config=algo(gdpo_reward_conditions=conditions))
    legacy = ray_trainer.compute_data_metrics(batch=data, use_critic=False)
    legacy = {k: v for k, v in legacy.items() if k.startswith("gdpo/")}
    _, v1 = run_v1(monkeypatch, full_config(gdpo_reward_conditions=conditions), ["a_0_0", "a_1_0", "b_0_0", "b_1_0"])
    assert legacy == pytest.approx(v1, nan_ok=True)
    # format counts only where correctness >= 1 (response 0; 0 for responses 1, 2; undecidable for response 3, whose
    # correctness is missing): 1/3, where verl's own block logged the raw 0.5; finite despite the missing value
    assert legacy["gdpo/format/mean"] == pytest.approx(1 / 3) and np.isfinite(legacy["gdpo/correctness/mean"])


def test_kl_in_reward_through_verls_compute_advantage_in_each_gdpo_kl_mode():
    data = legacy_batch()
    kl = torch.tensor([[0.0, -0.1, 0.0], [0.0, 0.0, -0.3], [0.0, 0.0, 0.0], [-0.2, 0.0, 0.0]])
    data.batch["token_level_rewards"] = data.batch["token_level_scores"] + kl  # verl: rewards = scores - beta*kl

    def advantages(**kw):
        return ray_trainer.compute_advantage(data, "gdpo", config=algo(use_kl_in_reward=True, **kw)).batch["advantages"]

    # default: dropped, as the reference GDPO run
    assert torch.allclose(advantages(), expected(), atol=1e-6)
    with_kl = advantages(gdpo_kl="after_norm")  # added before the final normalization
    ref = gdpo_advantages(SCORES, UIDS, response_mask(), weights=[1.0, 2.0], offset=kl.sum(-1))
    assert torch.allclose(with_kl, ref, atol=1e-6) and not torch.allclose(with_kl, expected(), atol=1e-3)
    as_component = advantages(gdpo_kl="component")  # a third reward, normalized in its group, weight 1
    scores = torch.cat([torch.as_tensor(SCORES, dtype=torch.float64), kl.sum(-1, keepdim=True).double()], dim=1)
    ref = gdpo_advantages(scores, UIDS, response_mask(), weights=[1.0, 2.0, 1.0])
    assert torch.allclose(as_component, ref, atol=1e-6) and not torch.allclose(as_component, with_kl, atol=1e-3)


def test_reward_metrics_per_component_errors_sources_and_nonfinite():
    data = legacy_batch(with_tensors=False)
    data.non_tensor_batch["format"] = np.array([1.0, np.inf, 1.0, 0.0], dtype=object)  # upstream-style inf
    data.non_tensor_batch[NONFINITE_PREFIX + "format"] = np.array([0.0, 0.0, 1.0, 0.0])  # one more flagged
    metrics = reward_metrics(data, RewardSettings.from_algorithm(algo()))
    assert metrics["gdpo/format/nonfinite"] == 2.0 and metrics["gdpo/format/max"] == 1.0
    assert metrics["gdpo/source/chat/format/mean"] == pytest.approx(0.5)


def test_reward_metrics_count_distinct_advantages_under_every_method_with_the_runs_options():
    from gdpo_verl.core.methods import MethodSettings, response_advantages

    data = legacy_batch()
    settings = RewardSettings.from_algorithm(algo())
    scores = torch.as_tensor(SCORES, dtype=torch.float64)
    plain = reward_metrics(data, settings)  # a GRPO run: every method with its default options
    shifted = MethodSettings.from_algorithm(algo(gdpo_saw_offsets=[0.0, 5.0]), 2)
    with_options = reward_metrics(data, settings, shifted)
    for name in ("gdpo", "grpo", "gd2po", "saw", "rvpo"):
        want = len({round(v, 4) + 0.0 for v in response_advantages(name, settings, scores, UIDS).tolist()})
        assert plain[f"gdpo/collapse/distinct_{name}"] == want, name
    want = len({round(v, 4) + 0.0 for v in response_advantages("saw", settings, scores, UIDS, shifted).tolist()})
    assert with_options["gdpo/collapse/distinct_saw"] == want
    # a GDPO run with a negative weight is valid; RVPO refuses it: its count is left out, the step goes on
    negative = reward_metrics(data, RewardSettings.from_algorithm(algo(gdpo_reward_weights=[1.0, -1.0])))
    assert "gdpo/collapse/distinct_rvpo" not in negative and "gdpo/collapse/distinct_gd2po" in negative


def test_a_key_missing_from_every_sample_is_a_configuration_error():
    data = legacy_batch()
    data.non_tensor_batch[MISSING_PREFIX + "correctness"] = np.ones(4)
    with pytest.raises(ValueError, match=r"'correctness'.*lacked the key on all 4 samples of this batch"):
        reward_metrics(data, RewardSettings.from_algorithm(algo()))


def test_legacy_hooks_are_installed_once():
    once = (ray_trainer.compute_advantage, ray_trainer.compute_data_metrics)
    install()
    assert (ray_trainer.compute_advantage, ray_trainer.compute_data_metrics) == once
    for fn in once:
        assert getattr(fn, WRAPPED_MARK) and not getattr(fn.__wrapped__, WRAPPED_MARK, False)


# ---------------------------------------------------------------- refusals, registries, pins


def test_every_registered_v1_trainer_mode_carries_the_mixin_once_and_a_later_one_is_refused():
    for mode in ("sync", "colocate_async", "separate_async"):
        cls = get_trainer_cls(mode)
        assert cls.__mro__.count(GDPOAdvantageMixin) == 1
        check_trainer_mode(OmegaConf.create({"trainer": {"v1": {"trainer_mode": mode}}}))
    from verl.trainer.ppo.v1 import trainer_base

    class Later(trainer_base.PPOTrainer):
        pass

    trainer_base.TRAINER_REGISTRY["later_mode"] = Later
    try:
        with pytest.raises(RuntimeError, match="trainer_mode='later_mode'.*registered after gdpo_verl"):
            check_trainer_mode(OmegaConf.create({"trainer": {"v1": {"trainer_mode": "later_mode"}}}))
    finally:
        del trainer_base.TRAINER_REGISTRY["later_mode"]


def test_a_process_whose_registry_holds_upstreams_gdpo_fails_loudly(monkeypatch):
    from verl.trainer.ppo import core_algos

    check_registered("test")
    monkeypatch.setitem(core_algos.ADV_ESTIMATOR_REGISTRY, "gdpo", core_algos.compute_gdpo_outcome_advantage)
    with pytest.raises(RuntimeError, match="compute_gdpo_outcome_advantage.*VERL_USE_EXTERNAL_PLUGINS"):
        check_registered("test")


def test_start_up_refuses_the_wrong_rollout_workers_and_a_colocated_reward_model():
    config = full_config()
    check_run_config(config)
    config.actor_rollout_ref.rollout.agent.agent_loop_manager_class = None
    with pytest.raises(ValueError, match="agent_loop_manager_class=gdpo_verl.verl_glue.agent_loop.*it is None"):
        check_run_config(config)
    config = full_config()
    config.reward.reward_model = {"enable": True, "enable_resource_pool": False}
    with pytest.raises(ValueError, match="colocated reward model.*enable_resource_pool=true"):
        check_run_config(config)
    check_run_config(full_config(manager="naive"))  # upstream-style: not our data path


# ---------------------------------------------------------------- the methods beyond GDPO, through both trainers

METHOD_CASES = {  # algorithm options -> the core function the estimator must agree with, and a metric it logs
    "gd2po": ({"adv_estimator": "gd2po", "gd2po_filter": "snr", "gd2po_tau": 0.5}, "gdpo/gd2po/masked_frac"),
    "saw": ({"gdpo_reward_weighting": "saw", "gdpo_saw_offsets": [0.0, 3.0]}, "gdpo/saw/correctness/weight"),
    "rvpo": ({"adv_estimator": "rvpo", "rvpo_risk": 2.0}, "gdpo/rvpo/penalty"),
}


def method_expected(options, mask=None):
    from gdpo_verl.core.methods import MethodSettings, method_advantages

    config = algo(**options)
    settings = RewardSettings.from_algorithm(config)
    method = MethodSettings.from_algorithm(config, len(settings.keys))
    return method_advantages(settings, method, SCORES, UIDS, response_mask() if mask is None else mask)


@pytest.mark.parametrize("name", sorted(METHOD_CASES))
def test_legacy_runs_each_method_on_the_gdpo_data_path_and_logs_its_metrics(name):
    options, metric = METHOD_CASES[name]
    estimator = options.get("adv_estimator", "gdpo")
    for call in (  # verl's fit passes adv_estimator by keyword; positional works too
        lambda: ray_trainer.compute_advantage(legacy_batch(), adv_estimator=estimator, config=algo(**options)),
        lambda: ray_trainer.compute_advantage(legacy_batch(), estimator, config=algo(**options)),
    ):
        data = call()
        adv = data.batch["advantages"]
        assert torch.allclose(adv, method_expected(options), atol=1e-6)
        # no response of this batch has mixed signs, so GD2PO keeps all with weight 1: GDPO's values; the others differ
        assert torch.allclose(adv, expected(), atol=1e-3) == (name == "gd2po")
        metrics = ray_trainer.compute_data_metrics(batch=data, use_critic=False)
        assert metric in metrics and "gdpo/format/mean" in metrics


@pytest.mark.parametrize("name", sorted(METHOD_CASES))
def test_v1_runs_each_method_on_the_gdpo_data_path_and_logs_its_metrics(monkeypatch, name):
    options, metric = METHOD_CASES[name]
    estimator = options.pop("adv_estimator", "gdpo")
    tq, metrics = run_v1(
        monkeypatch, full_config(adv_estimator=estimator, **options), ["a_0_0", "a_1_0", "b_0_0", "b_1_0"]
    )
    assert {"token_level_scores_format", "token_level_scores_correctness"} <= set(tq.fetched[0])
    options["adv_estimator"] = estimator
    assert torch.allclose(padded(tq.put["advantages"]), method_expected(options), atol=1e-6)
    assert metric in metrics and "verl/ran" not in metrics


def test_verls_registry_holds_our_estimator_under_every_method_name():
    from verl.trainer.ppo import core_algos

    from gdpo_verl.core.methods import ESTIMATORS
    from gdpo_verl.estimator import compute_gdpo_advantage

    assert all(core_algos.ADV_ESTIMATOR_REGISTRY[name] is compute_gdpo_advantage for name in ESTIMATORS)
