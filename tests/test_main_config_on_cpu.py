"""``python -m gdpo_verl.main``: config composition, derived estimator keys, start-up validation, multirun.

Run: .venv/bin/python -m pytest tests/test_main_config_on_cpu.py
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from gdpo_verl.main import apply_components, prepare_argv, split_argv, validate

CONFIG_DIR = Path(__file__).resolve().parents[1] / "gdpo_verl" / "config"


def compose_cfg(name="demo", overrides=(), device="cpu"):
    """Compose exactly as the app does: same search path, CPU preset first, then the overrides."""
    argv = prepare_argv(["prog", f"launch.device={device}", *overrides])
    _, all_overrides = split_argv(argv[1:])
    with initialize_config_module("gdpo_verl.config", version_base=None):
        return compose(name, overrides=all_overrides)


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
def test_every_shipped_config_composes_and_validates(name):
    cfg = compose_cfg(name, ["launch.demo=false", "actor_rollout_ref.model.path=/tmp/none"])
    if cfg.reward.gdpo.components:
        validate(cfg)
        assert list(cfg.algorithm.gdpo_reward_keys) == [c.name for c in cfg.reward.gdpo.components]


def test_demo_components_become_estimator_keys_weights_and_conditions():
    cfg = compose_cfg("demo", ["reward.gdpo.components.1.weight=2.5"])
    apply_components(cfg)
    assert list(cfg.algorithm.gdpo_reward_keys) == ["format", "correctness", "brevity"]
    assert list(cfg.algorithm.gdpo_reward_weights) == [1.0, 2.5, 1.0]
    assert dict(cfg.algorithm.gdpo_reward_conditions["brevity"]) == {"on": "correctness", "threshold": 1.0}


def test_split_argv_keeps_overrides_contiguous_for_argparse():
    flags, overrides = split_argv(["--cfg", "job", "a=1", "-m", "b=2", "--info", "searchpath", "--config-name", "x"])
    assert flags == ["--cfg", "job", "-m", "--info", "searchpath", "--config-name", "x"] and overrides == ["a=1", "b=2"]


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["+algorithm.gdpo_reward_weights=[1.0]"], r"gdpo_reward_weights has 1 values .* gdpo_reward_keys has 3"),
        (["reward.gdpo.components.2.condition.on=speed"], r"condition.on='speed' is not another component"),
        (["reward.gdpo.components.0.path=no_such_module_xyz"], r"\(format\).*cannot import .*no_such_module_xyz"),
        (["reward.gdpo.components.0.fn=nope"], r"no function 'nope'; callables there: .*format_reward"),
        (["reward.gdpo.components=[]"], r"needs at least one entry in reward.gdpo.components"),
        (["reward.gdpo.on_error=ignore"], r"on_error='ignore' is unknown; valid values: raise, nan"),
        (["algorithm.gdpo_final_norm=batch"], r"gdpo_final_norm='batch'.*valid values: token, sequence, none"),
        (["+algorithm.gdpo_reward_keys=[a,b,c]"], r"disagrees with reward.gdpo.components names"),
        (["reward.reward_manager.name=gdpo"], r"needs algorithm.gdpo_reward_keys"),
    ],
)
def test_bad_config_errors_name_the_bad_value(overrides, match):
    overrides = [o.replace("+algorithm", "algorithm") for o in overrides]
    cfg = compose_cfg("demo", ["launch.demo=false", "actor_rollout_ref.model.path=/tmp/none", *overrides])
    with pytest.raises((ValueError, ImportError), match=match):
        validate(cfg)


def run_main(*args, cwd=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "gdpo_verl.main", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def test_cfg_job_prints_components_and_weights_without_starting_ray():
    out = run_main("--cfg", "job", "algorithm.adv_estimator=gdpo")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "name: correctness" in out.stdout and "fn: brevity_reward" in out.stdout and "weight: 1.0" in out.stdout
    assert "adv_estimator: gdpo" in out.stdout and "Started a local Ray instance" not in out.stdout + out.stderr


def test_bad_config_fails_fast_before_ray_naming_the_key():
    start = time.monotonic()
    out = run_main("launch.demo=false", "actor_rollout_ref.model.path=/tmp/none", "reward.gdpo.components.0.fn=nope")
    assert out.returncode != 0
    assert "no function 'nope'" in out.stderr and "Started a local Ray instance" not in out.stdout + out.stderr
    assert time.monotonic() - start < 120


def test_multirun_runs_each_job_in_its_own_directory(tmp_path):
    out = run_main(
        "-m",
        "algorithm.adv_estimator=grpo,gdpo",
        "seed=3",
        "launch.dry_run=true",
        "launch.demo=false",
        "actor_rollout_ref.model.path=/tmp/none",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("[gdpo-verl] dry run ok")]
    assert [ln.split()[4] for ln in lines] == ["adv_estimator=grpo", "adv_estimator=gdpo"]
    dirs = {ln.rsplit("output_dir=", 1)[1] for ln in lines}
    assert len(dirs) == 2 and all(Path(d).is_dir() and str(tmp_path) in d for d in dirs)
