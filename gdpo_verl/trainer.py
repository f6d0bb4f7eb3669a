"""verl trainer glue: per-reward scores to the ``gdpo`` estimator in the V1 trainer, GDPO metrics in both.

verl 0.9.1's V1 trainer (``trainer.use_v1=true``, the default) builds the estimator's input from a fixed
list of TransferQueue fields (uid, response_mask, rm_scores, log-probs, values), so the reward manager's
per-sample output never reaches the estimator there. ``install()`` (called by the plugin at ``import verl``)
wraps every registered V1 trainer mode in ``GDPOAdvantageMixin``, which fetches ``extra_fields`` (where
the reward loop keeps each sample's ``reward_extra_info``) and ``data_source`` for the batch and supplies
them to the estimator. The legacy trainer already passes them in ``non_tensor_batch``.

Metrics: the estimator leaves its step metrics for ``pop_metrics()``; the V1 mixin adds them to the step's
metrics; for the legacy trainer, whose metrics dict is local to its fit loop, ``Tracking.log`` merges any
left over into the next logged step (the same step: advantages are computed before the step is logged).
"""

from __future__ import annotations

import functools

import numpy as np

from gdpo_verl import estimator

WRAPPED_MARK = "_gdpo_verl_wrapped"


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
    """Mixed into each V1 ``PPOTrainer`` mode; active only when ``algorithm.adv_estimator == gdpo``."""

    def _compute_advantage(self, batch, metrics: dict):
        if str(self.config.algorithm.adv_estimator) != estimator.NAME:
            return super()._compute_advantage(batch, metrics)
        import transfer_queue as tq

        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields", "data_source"]
        )
        sources = data["data_source"]
        columns = columns_from_extra_fields(
            list(data["extra_fields"].tolist()), sources.tolist() if hasattr(sources, "tolist") else sources
        )
        with estimator.supplied_columns(columns):
            batch = super()._compute_advantage(batch, metrics)
        metrics.update(estimator.pop_metrics())
        return batch


def _wrap_v1_trainers() -> None:
    from verl.trainer.ppo.v1 import trainer_base

    for mode, cls in list(trainer_base.TRAINER_REGISTRY.items()):
        if getattr(cls, WRAPPED_MARK, False):
            continue
        wrapped = type(cls.__name__, (GDPOAdvantageMixin, cls), {WRAPPED_MARK: True, "__module__": __name__})
        trainer_base.TRAINER_REGISTRY[mode] = wrapped


def _wrap_tracking() -> None:
    from verl.utils.tracking import Tracking

    if getattr(Tracking.log, WRAPPED_MARK, False):
        return
    original = Tracking.log

    @functools.wraps(original)
    def log(self, data, step, backend=None):
        pending = estimator.pop_metrics()
        return original(self, {**data, **pending} if pending else data, step, backend=backend)

    setattr(log, WRAPPED_MARK, True)
    Tracking.log = log


def install() -> None:
    """Idempotent: wrap the V1 trainer modes and verl's tracking logger (see the module docstring)."""
    _wrap_v1_trainers()
    _wrap_tracking()
