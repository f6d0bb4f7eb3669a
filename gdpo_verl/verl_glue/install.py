"""``install()``: register gdpo-verl with verl in this process (idempotent), and the check that it happened.

Called by ``gdpo_verl.plugin`` at ``import verl`` in every process (driver, TaskRunner, Ray workers). In order:

1. refuse a verl other than 0.9.1 (``gdpo_verl.pins.check_verl_version``; opt-in override there);
2. estimator registry: ``core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"]`` -> ``gdpo_verl.estimator.compute_gdpo_advantage``
   (in place of upstream's ``compute_gdpo_outcome_advantage``; logged once per process), and the same function under
   ``gd2po`` and ``rvpo`` (``gdpo_verl.core.methods.ESTIMATORS``; the hooks of steps 4-5 call it as ``gdpo``);
3. reward-manager registry: ``gdpo_multi`` -> ``gdpo_verl.manager.MultiRewardManager``;
4. V1 trainer registry: every registered mode wrapped in ``GDPOAdvantageMixin`` (``gdpo_verl.verl_glue.v1``);
5. legacy trainer: ``compute_advantage``/``compute_data_metrics`` wrapped (``gdpo_verl.verl_glue.legacy``).
"""

from __future__ import annotations

import logging
import os

from gdpo_verl import estimator
from gdpo_verl.core.contract import ESTIMATOR_NAME, MANAGER_NAME
from gdpo_verl.core.methods import ESTIMATORS
from gdpo_verl.pins import check_verl_version
from gdpo_verl.verl_env import EXTERNAL_MODULES_ENV
from gdpo_verl.verl_glue.legacy import wrap_legacy_trainer
from gdpo_verl.verl_glue.v1 import wrap_v1_trainers

logger = logging.getLogger(__name__)

#: what verl's registries must hold for our names once ``install()`` ran
EXPECTED = {
    ESTIMATOR_NAME: "gdpo_verl.estimator.compute_gdpo_advantage",
    MANAGER_NAME: "gdpo_verl.manager.MultiRewardManager",
}


def _register_estimator() -> None:
    from verl.trainer.ppo import core_algos

    for name in ESTIMATORS[1:]:  # our own names: nothing upstream to replace
        core_algos.ADV_ESTIMATOR_REGISTRY[name] = estimator.compute_gdpo_advantage
    previous = core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR_NAME)
    if previous is estimator.compute_gdpo_advantage:
        return
    core_algos.ADV_ESTIMATOR_REGISTRY[ESTIMATOR_NAME] = estimator.compute_gdpo_advantage
    replaced = f"{previous.__module__}.{previous.__name__}" if previous is not None else "nothing"
    logger.info("gdpo-verl: adv estimator %r -> %s (replaces %s)", ESTIMATOR_NAME, EXPECTED[ESTIMATOR_NAME], replaced)


def _register_reward_manager() -> None:
    from verl.experimental.reward_loop.reward_manager import register

    from gdpo_verl.manager import MultiRewardManager

    register(MANAGER_NAME)(MultiRewardManager)


def registered() -> dict[str, str]:
    """What verl's registries hold in this process for our names: {"gdpo": "module.function", "gdpo_multi": ...}."""
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo import core_algos

    fn = core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR_NAME)
    manager = REWARD_MANAGER.get(MANAGER_NAME)
    return {
        ESTIMATOR_NAME: f"{fn.__module__}.{fn.__qualname__}" if fn is not None else "nothing",
        MANAGER_NAME: f"{manager.__module__}.{manager.__qualname__}" if manager is not None else "nothing",
    }


def check_registered(where: str) -> None:
    """Fail in this process unless verl's registries hold gdpo-verl's estimator and manager (a worker where the
    plugin did not load would silently run upstream's ``gdpo``)."""
    have = registered()
    wrong = {k: v for k, v in have.items() if v != EXPECTED[k]}
    if wrong:
        try:
            check_verl_version("plugin")
            why = ""
        except RuntimeError as e:
            why = f" The plugin refused to install: {e}."
        raise RuntimeError(
            f"gdpo-verl is not installed in verl's registries in this process ({where}, pid {os.getpid()}): "
            f"{wrong} instead of {EXPECTED}.{why} verl logs plugin import errors only at DEBUG: check that gdpo_verl "
            f"imports here, that VERL_USE_EXTERNAL_PLUGINS is not 'none', or add gdpo_verl.plugin to "
            f"{EXTERNAL_MODULES_ENV} (python -m gdpo_verl.main does both)"
        )


def install() -> None:
    """Idempotent: every step of the module docstring, in that order."""
    check_verl_version("plugin")
    _register_estimator()
    _register_reward_manager()
    wrap_v1_trainers()
    wrap_legacy_trainer()
