"""``python -m gdpo_verl.main``: config composition, derived estimator keys, start-up validation, multirun.

Run: .venv/bin/python -m pytest tests/test_main_config_on_cpu.py
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.compose import compose_config as compose_cfg

from gdpo_verl.main import apply_components, validate


def test_demo_components_become_estimator_keys_weights_and_conditions():
    cfg = compose_cfg("demo", ["reward.gdpo.components.1.weight=2.5"])
    apply_components(cfg)
    assert list(cfg.algorithm.gdpo_reward_keys) == ["format", "correctness", "brevity"]
    assert list(cfg.algorithm.gdpo_reward_weights) == [1.0, 2.5, 1.0]
    assert dict(cfg.algorithm.gdpo_reward_conditions["brevity"]) == {"on": "correctness", "threshold": 1.0}


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


def test_launch_keys_work_from_yaml_as_well_as_the_command_line(tmp_path):
    # launch.device and launch.dry_run set in the YAML of a user's own config (no launch.* on the command line):
    # the CPU preset is applied (rollout hf) and nothing trains.
    demo = (Path(__file__).resolve().parents[1] / "recipes" / "demo.yaml").read_text()
    assert "launch:\n  demo: true\n" in demo
    launch = f"launch:\n  demo: true\n  device: cpu\n  dry_run: true\n  output_dir: {tmp_path / 'out'}\n"
    (tmp_path / "mine.yaml").write_text(demo.replace("launch:\n  demo: true\n", launch))
    out = run_main("--config-dir", str(tmp_path), "--config-name", "mine", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[gdpo-verl] dry run ok" in out.stdout and "rollout=hf" in out.stdout
    assert "Started a local Ray instance" not in out.stdout + out.stderr
    bad = run_main("--config-dir", str(tmp_path), "--config-name", "mine", "launch.device=tpu", cwd=tmp_path)
    assert bad.returncode != 0 and "launch.device='tpu' is unknown; valid values: auto, cpu, gpu" in bad.stderr
