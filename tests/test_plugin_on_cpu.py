"""Registration through verl's ``verl.plugins`` entry point: a fresh interpreter and a Ray task.

verl logs plugin import errors only at DEBUG, so these tests are the only place a broken plugin shows.
Run: .venv/bin/python -m pytest tests/test_plugin_on_cpu.py
"""

import os
import subprocess
import sys

import pytest

PROBE = (
    "import verl\n"
    "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
    "fn = get_adv_estimator_fn('gdpo')\n"
    "print(fn.__module__ + '.' + fn.__name__)\n"
)
OURS = "gdpo_verl.estimator.compute_gdpo_advantage"


@pytest.mark.slow
def test_import_verl_alone_registers_our_estimator_in_a_fresh_interpreter():
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_USE_EXTERNAL_PLUGINS", "VERL_USE_EXTERNAL_MODULES")}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == OURS


def test_registration_is_idempotent():
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo import core_algos

    from gdpo_verl.estimator import compute_gdpo_advantage
    from gdpo_verl.manager import MultiRewardManager
    from gdpo_verl.verl_glue import install

    install()
    install()
    assert core_algos.ADV_ESTIMATOR_REGISTRY["gdpo"] is compute_gdpo_advantage
    assert get_reward_manager_cls("gdpo_multi") is MultiRewardManager


@pytest.mark.slow
def test_ray_worker_gets_our_estimator_from_import_verl():
    ray = pytest.importorskip("ray")

    @ray.remote
    def probe():
        namespace = {}
        exec(PROBE.replace("print(", "result = ("), namespace)
        return namespace["result"]

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        assert ray.get(probe.remote(), timeout=240) == OURS
    finally:
        ray.shutdown()
