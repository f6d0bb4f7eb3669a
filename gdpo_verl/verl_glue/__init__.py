"""Every touch point between gdpo-verl and verl 0.9.1, in one place (the CPU backend keeps its own in ``cpu/``).

This package: the registrations and trainer hooks below (``__init__``); ``agent_loop`` (the rollout side:
per-reward tensors into the batch, selected by config through ``actor_rollout_ref.rollout.agent
.agent_loop_manager_class``); ``replay_buffer`` (the V1 trainer's sampler, selected by config through
``trainer.v1.sampler.custom_sampler``). The two submodules subclass verl classes at import, which must not happen
before the CPU backend activates, so verl loads them by name from the config. Every verl object these hooks
override, mirror or rely upon is pinned by the sha256 of its source (:data:`PINNED_SOURCE_SHA256` here,
``replay_buffer.PINNED_SOURCE_SHA256``; tests/test_verl_glue_on_cpu.py, tests/test_replay_buffer_on_cpu.py).

Data path (README "Data flow"): reward functions -> ``gdpo_multi`` manager (per-sample values in
``reward_extra_info``) -> ``agent_loop`` writes ``token_level_scores_<name>`` (bs, T) per component (V1: TransferQueue
fields stored like ``rm_scores``; legacy: ``DataProto.batch``) -> the ``gdpo`` estimator reads them.

``install()`` is called by ``gdpo_verl.plugin`` at ``import verl`` in every process; it is idempotent and does:

1. estimator registry: ``core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"]`` -> ``gdpo_verl.estimator.compute_gdpo_advantage``
   (in place of upstream's ``compute_gdpo_outcome_advantage``; logged once per process);
2. reward-manager registry: ``gdpo_multi`` -> ``gdpo_verl.manager.MultiRewardManager``;
3. V1 trainer registry: every registered ``PPOTrainer`` mode is wrapped in ``GDPOAdvantageMixin``. verl 0.9.1's
   ``_compute_advantage`` fetches a fixed list of TransferQueue fields, so for ``gdpo`` the mixin runs the same
   steps with the per-reward fields added, and counts one value per agent session (its final output) as verl does
   for GRPO. A mode registered after this ran is refused when the run starts (``check_trainer_mode``);
4. legacy trainer (``trainer.use_v1=false``): ``ray_trainer.compute_advantage`` is wrapped to compute the
   per-reward metrics (into ``batch.meta_info``) and ``ray_trainer.compute_data_metrics`` to report them. verl's
   own ``gdpo/<name>/*`` block in ``RayPPOTrainer.fit`` (raw values, before conditions, NaN on one missing value)
   reads the bare ``non_tensor_batch[<name>]`` entries, which the wrapper removes once the estimator has run (the
   values live on in the per-reward tensors and in verl's rollout dump), so ours are the ones logged.

Per-reward metrics (``gdpo_verl.core.metrics``) are logged for every estimator (so the GRPO baseline shows the same
curves) whenever ``algorithm.gdpo_reward_keys`` is set. ``check_registered`` (item 8 of the design: a worker
without the plugin would run upstream's ``gdpo`` silently) is called by the reward manager and the agent-loop
manager. ``with_external_modules`` merges module names into verl's ``VERL_USE_EXTERNAL_MODULES`` list.
verl is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd

from gdpo_verl import estimator
from gdpo_verl.components import ERROR_PREFIX, MISSING_PREFIX, NONFINITE_PREFIX
from gdpo_verl.core.advantage import apply_conditions
from gdpo_verl.core.metrics import step_metrics
from gdpo_verl.core.token_scores import field_name

logger = logging.getLogger(__name__)
WRAPPED_MARK = "_gdpo_verl_wrapped"
EXTERNAL_MODULES_ENV = "VERL_USE_EXTERNAL_MODULES"
MULTI_MANAGER = "gdpo_multi"
#: ``batch.meta_info`` key carrying the legacy trainer's per-reward metrics from compute_advantage to its metrics
METRICS_META_KEY = "gdpo_reward_metrics"
#: TransferQueue fields verl 0.9.1's V1 ``_compute_advantage`` fetches (ours adds the per-reward fields)
V1_ADVANTAGE_FIELDS = (
    *("uid", "response_mask", "rm_scores"),
    *("rollout_log_probs", "old_log_probs", "ref_log_prob", "values"),
)

#: sha256 of inspect.getsource(<obj>) of every verl 0.9.1 object a hook here or in ``agent_loop`` overrides,
#: mirrors or relies upon (``replay_buffer`` pins its own). A mismatch means verl changed under the hook: port it.
_V1, _AL, _RT = "verl.trainer.ppo.v1.", "verl.experimental.agent_loop.agent_loop.", "verl.trainer.ppo.ray_trainer."
PINNED_SOURCE_SHA256 = {
    # mirrored by GDPOAdvantageMixin._compute_advantage (with the per-reward fields added)
    _V1 + "trainer_base.PPOTrainer._compute_advantage": (
        "2a4a2aa4a475b228d401959818e0b9019276ce27961c133961de217baa387da7"
    ),
    # its GRPO session rule (final output of each {uid}_{session}) is what session_final_rows reproduces
    _V1 + "utils.compute_advantage_for_multi_trajectories": (
        "d973cc8aec79bc3d6c5482e3946d158639c27c209fb12b049b71c502d95b0a03"
    ),
    # the registry the mixin wraps, and how the V1 TaskRunner picks a mode
    _V1 + "trainer_base.register_trainer": ("40ec333837abb2a02d785e2a3d0067e0bed96aebd70006774a71cf0dd601af6d"),
    _V1 + "trainer_base.get_trainer_cls": ("a5b3ce304945430aab0745b6251336d8ddc9cf628015ca2cab4fac68d1f66663"),
    # wrapped (legacy metrics); passes batch/non_tensor_batch to the gdpo estimator
    _RT + "compute_advantage": ("314695381c755264971a8f25865625bad4cf46c35d91901ba2a8f5e1ea980a18"),
    # calls compute_advantage, then compute_data_metrics, then its own gdpo/<k>/* block (read from non_tensor_batch)
    _RT + "RayPPOTrainer.fit": ("2cd5b737f76215aad3a1be94404c7a7d1d6a4cf9d6c16f44bc4841b871498ed7"),
    # agent_loop: V1 rows are as_dict() of each output, reward info copied to a session's earlier outputs
    _AL + "AgentLoopOutput.as_dict": ("1d98e658b0e8de417dfecc3fea8bac01af4a825f40b732453d5d11b9f26b2e8f"),
    _V1 + "agent_loop_tq.AgentLoopWorkerTQ._agent_loop_postprocess": (
        "523edacbff73640dee470baf8c1f09fb3450e4095c05d5d2226f9ef706604b5b"
    ),
    _V1 + "agent_loop_tq.AgentLoopManagerTQ.__init__": (
        "9f1e99d66170d3326c6c1d0062ba37ad35dcff0585fdf38e7998acd38efe8de5"
    ),
    # agent_loop: the legacy batch is built by _postprocess (reward_extra_info keys stacked per key)
    _AL + "AgentLoopWorker._postprocess": ("d55eabeea2dc52a69666bfccaeee1c2c381d732ee8cd183e57cd6744733f12bf"),
    _AL + "AgentLoopWorker._compute_score": ("cf4b57719ad3c1b236e49fb99dddc4f6cf05bc0fb125e1475ce5c2534af2b742"),
    _AL + "AgentLoopManager.__init__": ("f121655cb484a19c2e2e0d08c4e1221ec09c77e6f832ab006624366666500f04"),
    # the config hook that loads agent_loop.GDPOAgentLoopManager (V1 and legacy)
    "verl.trainer.main_ppo.TaskRunnerV1.init_agent_loop_manager": (
        "fbb991c10e6b6e704cebbade835a66f47e94da033d6c04402985289c26bbc334"
    ),
    _RT + "RayPPOTrainer.init_workers": ("3f4f2eba9e4e6d9b81b8b7948c7954057cf724203cd4a433c93b09b126759afa"),
}


def pinned_objects() -> dict:
    """The verl objects named in :data:`PINNED_SOURCE_SHA256` (Ray actor classes unwrapped), by the same names."""
    out = {}
    for name in PINNED_SOURCE_SHA256:
        parts = name.split(".")
        for split in range(len(parts) - 1, 0, -1):  # the longest importable module prefix
            try:
                obj = importlib.import_module(".".join(parts[:split]))
            except ImportError:
                continue
            for attr in parts[split:]:
                obj = getattr(obj, attr)
                obj = getattr(obj, "__ray_actor_class__", obj)
            out[name] = inspect.unwrap(obj)
            break
    return out


def source_sha256(obj) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()


def reward_metrics(data, settings) -> dict[str, float]:
    """Per-reward step metrics of one DataProto: scores from ``token_level_scores_<name>`` (else the scalar columns),
    uids, data sources and the manager's error flags from ``non_tensor_batch``."""
    batch, non_tensor_batch = data.batch, data.non_tensor_batch
    uids = non_tensor_batch.get("uid")
    if uids is None or not len(uids):
        return {}
    check_keys_returned(non_tensor_batch, settings.keys)
    scores = estimator.collect_scores(settings.keys, batch, non_tensor_batch, len(uids), "cpu").cpu()
    errors = {k: non_tensor_batch[ERROR_PREFIX + k] for k in settings.keys if ERROR_PREFIX + k in non_tensor_batch}
    nonfinite = {
        k: non_tensor_batch[NONFINITE_PREFIX + k] for k in settings.keys if NONFINITE_PREFIX + k in non_tensor_batch
    }
    return step_metrics(
        apply_conditions(scores, settings.conditions),
        np.asarray(uids, dtype=object),
        settings.keys,
        settings.weights,
        norm_by_std=settings.norm_by_std,
        epsilon=settings.epsilon,
        data_source=non_tensor_batch.get("data_source"),
        errors=errors,
        nonfinite=nonfinite,
    )


def check_keys_returned(columns: Mapping, keys) -> None:
    """A component whose key was missing from EVERY sample's result in the batch is a configuration error (missing
    in some samples is an abstention: mixed data sources). The start-up reward probe names the keys returned."""
    for key in keys:
        flags = columns.get(MISSING_PREFIX + key)
        if flags is not None and len(flags) and bool(np.all(np.asarray(flags, dtype=np.float64) == 1.0)):
            raise ValueError(
                f"reward component {key!r}: its function's result lacked the key on all {len(flags)} samples of "
                "this batch (the reward workers' debug log and the start-up reward probe list the keys it returns). "
                "Set reward.gdpo.components[...].key to one of them"
            )


def columns_from_extra_fields(extra_fields: list) -> dict[str, np.ndarray]:
    """Per-sample ``reward_extra_info`` dicts -> {key: (bs,) object array}; a key missing in a sample is None."""
    infos = [(f.get("reward_extra_info") if isinstance(f, dict) else None) or {} for f in extra_fields]
    frame = pd.DataFrame.from_records(infos, index=range(len(infos)))
    return {key: frame[key].astype(object).where(frame[key].notna(), None).to_numpy() for key in frame.columns}


def session_final_rows(keys) -> tuple[np.ndarray, np.ndarray]:
    """verl's V1 row keys ``{uid}_{session}_{index}`` -> (rows holding each session's final output, and for every row
    the position of its session in the first array). verl's GRPO counts one value per session this way.

    >>> session_final_rows(["a_0_0", "a_0_1", "a_1_0", "b_0_0"])
    (array([1, 2, 3]), array([0, 0, 1, 2]))
    """
    parts = pd.Series(list(keys), dtype=object).str.rsplit("_", n=2, expand=True)
    if parts.shape[1] != 3 or parts.isna().any().any():
        raise ValueError(f"V1 batch keys must look like '{{uid}}_{{session}}_{{index}}'; got {list(keys)[:3]}...")
    session = parts[0] + "_" + parts[1]
    frame = pd.DataFrame({"session": session, "index": parts[2].astype(np.int64), "row": np.arange(len(parts))})
    final = frame.sort_values(["session", "index"]).groupby("session", sort=False).tail(1).sort_values("row")
    position = pd.Series(np.arange(len(final)), index=final["session"].to_numpy())
    return final["row"].to_numpy(), position.loc[session.to_numpy()].to_numpy()


def uses_per_reward_tensors(config) -> bool:
    """True when the run's reward manager is ``gdpo_multi`` (per-reward tensors); other managers (upstream-style
    ``compute_score`` dicts) take the scalar path."""
    from omegaconf import OmegaConf

    return str(OmegaConf.select(config, "reward.reward_manager.name", default="")) == MULTI_MANAGER


AGENT_LOOP_MANAGER = "gdpo_verl.verl_glue.agent_loop.GDPOAgentLoopManager"
AGENT_LOOP_MANAGER_KEY = "actor_rollout_ref.rollout.agent.agent_loop_manager_class"


def check_run_config(config, manager_selected: bool = False) -> None:
    """Start-up refusals for the ``gdpo_multi`` data path, each naming the value and the fix (``manager_selected``:
    called by the manager itself, whatever the config's name says)."""
    from omegaconf import OmegaConf

    if not (manager_selected or uses_per_reward_tensors(config)):
        return
    chosen = OmegaConf.select(config, AGENT_LOOP_MANAGER_KEY, default=None)
    if chosen != AGENT_LOOP_MANAGER:
        raise ValueError(
            f"reward.reward_manager.name={MULTI_MANAGER} needs {AGENT_LOOP_MANAGER_KEY}={AGENT_LOOP_MANAGER} (the "
            f"rollout workers that put the per-reward tensors in the batch); it is {chosen!r}. Compose "
            "gdpo_trainer (every recipe does) or set it"
        )
    reward_model = OmegaConf.select(config, "reward.reward_model", default=None) or {}
    if reward_model.get("enable", False) and not reward_model.get("enable_resource_pool", False):
        raise ValueError(
            f"reward.reward_model.enable=true with enable_resource_pool=false (a colocated reward model) is refused "
            f"with reward.reward_manager.name={MULTI_MANAGER}: verl then scores each batch after the rollout "
            "(trainer _compute_reward_colocate) and writes the extra keys as separate fields, outside the rollout "
            "workers that build the per-reward tensors. Use reward.reward_model.enable_resource_pool=true, or "
            "reward.reward_model.enable=false with rule-based components"
        )


def check_tensor_fields(present, keys) -> None:
    """The per-reward fields must all be in the batch when the ``gdpo_multi`` manager scores it (no silent fallback
    to the scalars in reward_extra_info)."""
    missing = [field_name(k) for k in keys if field_name(k) not in present]
    if missing:
        raise RuntimeError(
            f"the batch lacks the per-reward tensors {missing}: they are written by gdpo-verl's rollout workers, "
            f"selected with {AGENT_LOOP_MANAGER_KEY}={AGENT_LOOP_MANAGER} (recipes/gdpo_trainer.yaml sets it; "
            "python -m gdpo_verl.main checks it)"
        )


class GDPOAdvantageMixin:
    """Mixed into each V1 ``PPOTrainer`` mode: the per-reward tensors reach ``gdpo``; per-reward metrics logged."""

    def _compute_advantage(self, batch, metrics: dict):
        algorithm = self.config.algorithm
        is_gdpo = str(algorithm.adv_estimator) == estimator.NAME
        if not is_gdpo and not algorithm.get("gdpo_reward_keys"):
            return super()._compute_advantage(batch, metrics)
        import torch
        import transfer_queue as tq
        from tensordict import TensorDict
        from verl.trainer.ppo.ray_trainer import apply_kl_penalty, compute_advantage
        from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
        from verl.workers.utils.padding import response_to_nested

        settings = estimator.GDPOSettings.from_config(algorithm)
        tensors = uses_per_reward_tensors(self.config)
        per_reward = [field_name(k) for k in settings.keys] if tensors else []
        ours = [*per_reward, "extra_fields", "data_source"]  # TransferQueue leaves out fields no row has
        if not is_gdpo:  # the GRPO baseline: verl's own step, then the same metrics on the same rows
            batch = super()._compute_advantage(batch, metrics)
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", *ours])
            data = self._gdpo_data(data, settings.keys if tensors else ())
            final, _ = session_final_rows(batch.keys)
            metrics.update(reward_metrics(data.select_idxs(final), settings))
            return batch

        # verl 0.9.1's PPOTrainer._compute_advantage (pinned), with the per-reward fields fetched too
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=[*V1_ADVANTAGE_FIELDS, *ours]
        )
        response_mask = data["response_mask"]
        data = self._gdpo_data(data, settings.keys if tensors else ())
        data.batch["token_level_scores"] = data.batch["rm_scores"]
        if algorithm.use_kl_in_reward:
            data, kl_metrics = apply_kl_penalty(data, kl_ctrl=self.kl_ctrl_in_reward, kl_penalty=algorithm.kl_penalty)
            metrics.update(kl_metrics)
        else:
            data.batch["token_level_rewards"] = data.batch["token_level_scores"]
        rollout_corr_config = algorithm.get("rollout_correction", None)
        bypass = rollout_corr_config and rollout_corr_config.get("bypass_mode", False)
        rollout_correction = rollout_corr_config is not None and "rollout_log_probs" in data.batch and not bypass
        if rollout_correction:
            data, is_metrics = compute_rollout_correction_and_add_to_batch(data, rollout_corr_config)
            metrics.update(is_metrics)

        # one value per agent session, as verl counts them for GRPO: the final outputs form the groups, and each
        # session's advantage is broadcast to its earlier outputs
        final, position = session_final_rows(batch.keys)
        advantage = getattr(compute_advantage, "__wrapped__", compute_advantage)  # verl's, not the legacy wrapper
        kwargs = dict(
            adv_estimator=algorithm.adv_estimator,
            gamma=algorithm.gamma,
            lam=algorithm.lam,
            num_repeat=self.config.actor_rollout_ref.rollout.n,
            norm_adv_by_std_in_grpo=algorithm.get("norm_adv_by_std_in_grpo", True),
            config=algorithm,
        )
        if len(final) == len(data):
            data = advantage(data, **kwargs)
            finals = data
        else:
            finals = advantage(data.select_idxs(final), **kwargs)
            first = finals.batch["response_mask"].argmax(dim=1)
            per_session = finals.batch["advantages"][torch.arange(len(finals)), first]
            broadcast = per_session[torch.as_tensor(position)].unsqueeze(-1) * data.batch["response_mask"]
            data.batch["advantages"] = broadcast
            data.batch["returns"] = broadcast
        metrics.update(reward_metrics(finals, settings))

        fields = ["advantages", "returns"]
        if algorithm.use_kl_in_reward:
            fields.append("token_level_rewards")
        if rollout_correction:
            fields.append("response_mask")
            if "rollout_is_weights" in data.batch:
                fields.append("rollout_is_weights")
        output = {f: response_to_nested(data.batch[f], response_mask) for f in fields}
        output = TensorDict(output, batch_size=len(batch))
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=output)

    @staticmethod
    def _gdpo_data(data, tensor_keys):
        """A TransferQueue fetch -> DataProto: padded tensors; uid, data_source and the manager's reward_extra_info
        (one column per key) as non-tensor columns. The per-reward tensors of ``tensor_keys`` must be there."""
        from verl import DataProto

        check_tensor_fields(data.keys(), tensor_keys)
        extra_fields = _as_list(data.pop("extra_fields")) if "extra_fields" in data.keys() else []
        sources = _as_list(data.pop("data_source")) if "data_source" in data.keys() else None
        uids = _as_list(data.pop("uid"))
        proto = DataProto(batch=data.to_padded_tensor())
        proto.non_tensor_batch["uid"] = np.array(uids, dtype=object)
        if extra_fields:
            proto.non_tensor_batch.update(columns_from_extra_fields(extra_fields))
        if sources is not None:
            proto.non_tensor_batch["data_source"] = np.array(sources, dtype=object)
        return proto


def _as_list(values) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def _wrap_v1_trainers() -> None:
    from verl.trainer.ppo.v1 import trainer_base

    for mode, cls in list(trainer_base.TRAINER_REGISTRY.items()):
        if getattr(cls, WRAPPED_MARK, False):
            continue
        wrapped = type(cls.__name__, (GDPOAdvantageMixin, cls), {WRAPPED_MARK: True, "__module__": __name__})
        trainer_base.TRAINER_REGISTRY[mode] = wrapped


def check_trainer_mode(config) -> None:
    """Refuse a V1 trainer mode registered after the plugin wrapped the registry (its advantage step would never see
    the per-reward tensors)."""
    from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

    mode = config.trainer.v1.get("trainer_mode", "sync")
    cls = get_trainer_cls(mode)
    if not getattr(cls, WRAPPED_MARK, False):
        raise RuntimeError(
            f"trainer.v1.trainer_mode={mode!r} is {cls.__module__}.{cls.__qualname__}, registered after gdpo_verl "
            "wrapped verl's trainer registry, so its _compute_advantage would never see the per-reward tensors. "
            "Register it before verl loads its plugins (e.g. list its module before gdpo_verl.plugin in "
            "VERL_USE_EXTERNAL_MODULES), or mix gdpo_verl.verl_glue.GDPOAdvantageMixin into it yourself"
        )


def _wrap_legacy_trainer() -> None:
    from verl.trainer.ppo import ray_trainer

    if getattr(ray_trainer.compute_advantage, WRAPPED_MARK, False):
        return
    original_advantage, original_metrics = ray_trainer.compute_advantage, ray_trainer.compute_data_metrics

    @functools.wraps(original_advantage)
    def compute_advantage(data, *args, config=None, **kwargs):
        data = original_advantage(data, *args, config=config, **kwargs)
        if config is not None and config.get("gdpo_reward_keys"):
            settings = estimator.GDPOSettings.from_config(config)
            data.meta_info[METRICS_META_KEY] = reward_metrics(data, settings)
            for key in settings.keys:  # see the module docstring, point 4: verl's own block reads these
                data.non_tensor_batch.pop(key, None)
        return data

    @functools.wraps(original_metrics)
    def compute_data_metrics(batch, *args, **kwargs):
        out = original_metrics(batch, *args, **kwargs)
        out.update(batch.meta_info.pop(METRICS_META_KEY, {}))
        return out

    for fn in (compute_advantage, compute_data_metrics):
        setattr(fn, WRAPPED_MARK, True)
    ray_trainer.compute_advantage = compute_advantage
    ray_trainer.compute_data_metrics = compute_data_metrics


def _register_estimator() -> None:
    from verl.trainer.ppo import core_algos

    previous = core_algos.ADV_ESTIMATOR_REGISTRY.get(estimator.NAME)
    if previous is estimator.compute_gdpo_advantage:
        return
    core_algos.ADV_ESTIMATOR_REGISTRY[estimator.NAME] = estimator.compute_gdpo_advantage
    replaced = f"{previous.__module__}.{previous.__name__}" if previous is not None else "nothing"
    logger.warning(
        "gdpo-verl: adv estimator %r -> %s.compute_gdpo_advantage (replaces %s)",
        estimator.NAME,
        estimator.__name__,
        replaced,
    )


def _register_reward_manager() -> None:
    from verl.experimental.reward_loop.reward_manager import register

    from gdpo_verl.manager import NAME, MultiRewardManager

    register(NAME)(MultiRewardManager)


def registered() -> dict[str, str]:
    """What verl's registries hold in this process for our names: {"gdpo": "module.function", "gdpo_multi": ...}."""
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo import core_algos

    fn = core_algos.ADV_ESTIMATOR_REGISTRY.get(estimator.NAME)
    manager = REWARD_MANAGER.get(MULTI_MANAGER)
    return {
        estimator.NAME: f"{fn.__module__}.{fn.__qualname__}" if fn is not None else "nothing",
        MULTI_MANAGER: f"{manager.__module__}.{manager.__qualname__}" if manager is not None else "nothing",
    }


EXPECTED = {
    estimator.NAME: "gdpo_verl.estimator.compute_gdpo_advantage",
    MULTI_MANAGER: "gdpo_verl.manager.MultiRewardManager",
}


def check_registered(where: str) -> None:
    """Fail in this process unless verl's registries hold gdpo-verl's estimator and manager (a worker where the
    plugin did not load would silently run upstream's ``gdpo``)."""
    import os

    have = registered()
    wrong = {k: v for k, v in have.items() if v != EXPECTED[k]}
    if wrong:
        raise RuntimeError(
            f"gdpo-verl is not installed in verl's registries in this process ({where}, pid {os.getpid()}): "
            f"{wrong} instead of {EXPECTED}. verl logs plugin import errors only at DEBUG: check that gdpo_verl "
            f"imports here, that VERL_USE_EXTERNAL_PLUGINS is not 'none', or add gdpo_verl.plugin to "
            f"{EXTERNAL_MODULES_ENV} (python -m gdpo_verl.main does both)"
        )


def with_external_modules(current: str | None, *modules: str) -> str:
    """``VERL_USE_EXTERNAL_MODULES`` value ``current`` (comma-separated) with ``modules`` added once each, in order.

    >>> with_external_modules("a,b", "b", "gdpo_verl.plugin")
    'a,b,gdpo_verl.plugin'
    """
    names = [m for m in str(current or "").split(",") if m]
    return ",".join(dict.fromkeys([*names, *modules]))


def install() -> None:
    """Idempotent: every registration and wrapper of the module docstring, in that order."""
    _register_estimator()
    _register_reward_manager()
    _wrap_v1_trainers()
    _wrap_legacy_trainer()
