"""Refusals of the verl glue, each naming the value and the fix: at start-up (the config, the trainer mode) and on
each batch (the per-reward tensors and keys the ``gdpo_multi`` data path promises).

The reward side's own config check (``gdpo_verl.components.check_data_path``) runs here too when the config
selects ``gdpo_multi``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gdpo_verl.components import AGENT_LOOP_MANAGER, AGENT_LOOP_MANAGER_KEY, check_data_path, uses_per_reward_tensors
from gdpo_verl.core.contract import MISSING_PREFIX, field_name

#: set on every class or function the glue wrapped (V1 trainer modes, the legacy functions)
WRAPPED_MARK = "_gdpo_verl_wrapped"


def check_run_config(config) -> None:
    """Start-up refusals for the ``gdpo_multi`` data path (none for other reward managers)."""
    if uses_per_reward_tensors(config):
        check_data_path(config)


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
            "VERL_USE_EXTERNAL_MODULES), or mix gdpo_verl.verl_glue.v1.GDPOAdvantageMixin into it yourself"
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
