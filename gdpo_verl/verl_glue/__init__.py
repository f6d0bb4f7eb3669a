"""Every touch point between gdpo-verl and verl 0.9.1, in one place (the CPU backend keeps its own in ``cpu/``).

This package: the registrations and trainer hooks below (``__init__``), and ``replay_buffer`` (the V1 trainer's
sampler, selected by config through ``trainer.v1.sampler.custom_sampler``; a module of its own because it subclasses
verl's replay buffer at import, which must not happen before the CPU backend activates). Both pin the verl sources
they rely on by sha256 (tests/test_verl_glue_on_cpu.py, tests/test_replay_buffer_on_cpu.py, test_cpu_backend).

``install()`` is called by ``gdpo_verl.plugin`` at ``import verl`` in every process; it is idempotent and does:

1. estimator registry: ``core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"]`` -> ``gdpo_verl.estimator.compute_gdpo_advantage``
   (in place of upstream's ``compute_gdpo_outcome_advantage``; logged once per process);
2. reward-manager registry: ``gdpo_multi`` -> ``gdpo_verl.manager.MultiRewardManager``;
3. V1 trainer registry: every registered ``PPOTrainer`` mode is wrapped in ``GDPOAdvantageMixin``. verl 0.9.1's V1
   trainer builds the estimator's input from a fixed list of TransferQueue fields (uid, response_mask, rm_scores,
   log-probs, values), so the mixin fetches ``extra_fields`` (where the reward loop keeps each sample's
   ``reward_extra_info``) and ``data_source`` and supplies them to the estimator;
4. legacy trainer (``trainer.use_v1=false``): ``ray_trainer.compute_data_metrics`` is wrapped to add the per-reward
   metrics, with the algorithm config recorded by a wrapped ``RayPPOTrainer.fit``.

Per-reward metrics (``gdpo_verl.core.metrics``) are logged for every estimator (so the GRPO baseline shows the same
curves) whenever ``algorithm.gdpo_reward_keys`` is set. ``with_external_modules`` merges module names into verl's
``VERL_USE_EXTERNAL_MODULES`` list (used by ``main`` for the plugin and by the CPU backend for its worker hook).
verl is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

import numpy as np

from gdpo_verl import estimator
from gdpo_verl.components import ERROR_PREFIX, MISSING_PREFIX, NONFINITE_PREFIX
from gdpo_verl.core.advantage import apply_conditions
from gdpo_verl.core.metrics import step_metrics

logger = logging.getLogger(__name__)
WRAPPED_MARK = "_gdpo_verl_wrapped"
EXTERNAL_MODULES_ENV = "VERL_USE_EXTERNAL_MODULES"
_LEGACY = {}  # the legacy trainer's algorithm config while its fit() runs in this process


def reward_metrics(columns: Mapping, uids, algorithm) -> dict[str, float]:
    """Per-reward step metrics from per-response columns; {} when no components are configured."""
    if algorithm is None or not algorithm.get("gdpo_reward_keys") or uids is None:
        return {}
    settings = estimator.GDPOSettings.from_config(algorithm)
    missing = [k for k in settings.keys if k not in columns]
    if missing:
        return {}
    check_keys_returned(columns, settings.keys)
    scores = estimator.collect_scores(settings.keys, None, columns, len(uids), "cpu")
    errors = {k: columns[ERROR_PREFIX + k] for k in settings.keys if ERROR_PREFIX + k in columns}
    nonfinite = {k: columns[NONFINITE_PREFIX + k] for k in settings.keys if NONFINITE_PREFIX + k in columns}
    return step_metrics(
        apply_conditions(scores, settings.conditions),
        uids,
        settings.keys,
        settings.weights,
        norm_by_std=settings.norm_by_std,
        epsilon=settings.epsilon,
        data_source=columns.get("data_source"),
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


def columns_from_extra_fields(extra_fields: list, data_source=None) -> dict[str, np.ndarray]:
    """Per-sample ``reward_extra_info`` dicts -> {key: (bs,) object array}; a key missing in a sample is None."""
    import pandas as pd

    infos = [(f.get("reward_extra_info") if isinstance(f, dict) else None) or {} for f in extra_fields]
    frame = pd.DataFrame.from_records(infos)
    columns = {key: frame[key].astype(object).where(frame[key].notna(), None).to_numpy() for key in frame.columns}
    if data_source is not None:
        columns["data_source"] = np.asarray(data_source, dtype=object)
    return columns


class GDPOAdvantageMixin:
    """Mixed into each V1 ``PPOTrainer`` mode: supplies per-reward columns to ``gdpo``, logs reward metrics."""

    def _compute_advantage(self, batch, metrics: dict):
        algorithm = self.config.algorithm
        if str(algorithm.adv_estimator) != estimator.NAME and not algorithm.get("gdpo_reward_keys"):
            return super()._compute_advantage(batch, metrics)
        import transfer_queue as tq

        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", "extra_fields", "data_source"]
        )
        # TransferQueue hands non-tensor fields back as stacks whose .tolist() is reached through pop (as in
        # verl's own validation code); plain arrays (tests) work the same way.
        uids, extra_fields, sources = (_as_list(data.pop(f)) for f in ("uid", "extra_fields", "data_source"))
        columns = columns_from_extra_fields(extra_fields, sources)
        with estimator.supplied_columns(columns):
            batch = super()._compute_advantage(batch, metrics)
        metrics.update(reward_metrics(columns, np.asarray(uids, dtype=object), algorithm))
        return batch


def _as_list(values) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def _wrap_v1_trainers() -> None:
    from verl.trainer.ppo.v1 import trainer_base

    for mode, cls in list(trainer_base.TRAINER_REGISTRY.items()):
        if getattr(cls, WRAPPED_MARK, False):
            continue
        wrapped = type(cls.__name__, (GDPOAdvantageMixin, cls), {WRAPPED_MARK: True, "__module__": __name__})
        trainer_base.TRAINER_REGISTRY[mode] = wrapped


def _wrap_legacy_trainer() -> None:
    from verl.trainer.ppo import ray_trainer

    if getattr(ray_trainer.compute_data_metrics, WRAPPED_MARK, False):
        return
    original_metrics, original_fit = ray_trainer.compute_data_metrics, ray_trainer.RayPPOTrainer.fit

    @functools.wraps(original_metrics)
    def compute_data_metrics(batch, *args, **kwargs):
        out = original_metrics(batch, *args, **kwargs)
        columns = batch.non_tensor_batch
        out.update(reward_metrics(columns, columns.get("uid"), _LEGACY.get("algorithm")))
        return out

    @functools.wraps(original_fit)
    def fit(self, *args, **kwargs):
        _LEGACY["algorithm"] = self.config.algorithm
        return original_fit(self, *args, **kwargs)

    setattr(compute_data_metrics, WRAPPED_MARK, True)
    ray_trainer.compute_data_metrics = compute_data_metrics
    ray_trainer.RayPPOTrainer.fit = fit


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
