"""verl's legacy trainer (``trainer.use_v1=false``): ``ray_trainer.compute_advantage`` and ``compute_data_metrics``
wrapped so the per-reward metrics are ours.

The wrapped ``compute_advantage`` runs verl's (which passes ``batch`` and ``non_tensor_batch`` to the ``gdpo``
estimator only; ``gd2po`` and ``rvpo`` are therefore run under that name, the estimator reading the method from the
config), then computes the per-reward metrics into ``batch.meta_info``; the wrapped ``compute_data_metrics``
reports them. verl's own ``gdpo/<name>/*`` block in ``RayPPOTrainer.fit`` (raw values, before conditions, NaN on one
missing value) reads the bare ``non_tensor_batch[<name>]`` entries, which the wrapper removes once the estimator has
run (the values live on in the per-reward tensors and in verl's rollout dump), so ours are the ones logged. Both
functions and ``fit`` are pinned in ``gdpo_verl.pins``.
"""

from __future__ import annotations

import functools

from gdpo_verl.core.contract import ESTIMATOR_NAME, RewardSettings
from gdpo_verl.core.methods import ESTIMATORS, MethodSettings
from gdpo_verl.verl_glue.batch import reward_metrics
from gdpo_verl.verl_glue.checks import WRAPPED_MARK

#: ``batch.meta_info`` key carrying the per-reward metrics from compute_advantage to compute_data_metrics
METRICS_META_KEY = "gdpo_reward_metrics"


def wrap_legacy_trainer() -> None:
    """Idempotent: rebind the two functions in ``verl.trainer.ppo.ray_trainer``."""
    from verl.trainer.ppo import ray_trainer

    if getattr(ray_trainer.compute_advantage, WRAPPED_MARK, False):
        return
    original_advantage, original_metrics = ray_trainer.compute_advantage, ray_trainer.compute_data_metrics

    @functools.wraps(original_advantage)
    def compute_advantage(data, *args, config=None, **kwargs):
        name = kwargs.get("adv_estimator", args[0] if args else None)
        ours = str(name) in ESTIMATORS
        if ours:  # verl hands the batch only to the estimator named gdpo (module docstring)
            args, kwargs = (
                ((ESTIMATOR_NAME, *args[1:]), kwargs) if args else (args, {**kwargs, "adv_estimator": ESTIMATOR_NAME})
            )
        data = original_advantage(data, *args, config=config, **kwargs)
        if config is not None and config.get("gdpo_reward_keys"):
            settings = RewardSettings.from_algorithm(config)
            method = MethodSettings.from_algorithm(config, len(settings.keys)) if ours else None
            data.meta_info[METRICS_META_KEY] = reward_metrics(data, settings, method)
            for key in settings.keys:  # verl's own gdpo/<k>/* block reads these (module docstring)
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
