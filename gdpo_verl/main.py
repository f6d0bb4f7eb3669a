"""``python -m gdpo_verl.main``: compose verl's config with gdpo-verl's, validate it, run verl's trainer.

Run (from any directory):
    python -m gdpo_verl.main                                  # embedded default: the toy demo (CPU if no GPU)
    python -m gdpo_verl.main algorithm.adv_estimator=grpo     # GRPO baseline on the same reward components
    python -m gdpo_verl.main --cfg job                        # print the composed config; starts nothing
    python -m gdpo_verl.main -m algorithm.adv_estimator=grpo,gdpo seed=0,1    # sweep, one job after another
    python -m gdpo_verl.main --config-name toolcall method=grpo   # a recipe from recipes/ (shipped in the package)
    python -m gdpo_verl.main --config-dir my_configs --config-name my_run   # your own config

A plain Hydra app: its configs are ``recipes/`` (installed as ``gdpo_verl.recipes``); each recipe composes
``gdpo_trainer``, which composes verl's ``ppo_trainer`` (``hydra.searchpath: [pkg://verl.trainer.config]`` in each
primary config). In the job, ``launch.device`` (YAML or command line) decides the device: on CPU the backend is
activated and the config is composed again with the CPU preset (``gdpo_verl.cpu.cpu_config``) before the
job's own overrides, so those still win (``trainer.nnodes``/``trainer.n_gpus_per_node`` size the local Ray, or
``RAY_ADDRESS`` joins an existing cluster). Before Ray starts it derives ``algorithm.gdpo_reward_*`` from
``reward.gdpo.components`` and validates everything, so a bad config fails in seconds with the bad key named.
Then it runs verl's ``run_ppo`` with verl's own TaskRunner (V1 or legacy, ``trainer.use_v1``); ``import verl``
loads ``gdpo_verl.plugin`` in the TaskRunner and every Ray worker. Each job writes ``metrics.jsonl`` (verl's file
logger) and ``checkpoints/`` in its own output directory and shuts Ray down at the end, so multirun jobs run
cleanly one after another.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from gdpo_verl.core.choices import check_choice
from gdpo_verl.preflight import Preflight, check_run
from gdpo_verl.verl_env import EXTERNAL_MODULES_ENV, PLUGIN_MODULE, with_external_modules

if TYPE_CHECKING:  # components, the contract and the glue import torch or verl: loaded when a job runs, so --help
    from gdpo_verl.components import RewardSpec  # answers at once

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"  # verl's tensorboard logger writes here, inside the run's output directory
DEVICES = ("auto", "cpu", "gpu")


def wants_cpu(cfg: DictConfig) -> bool:
    """``launch.device``: ``auto`` means CPU when no CUDA GPU is visible."""
    device = check_choice("launch.device", cfg.launch.get("device", "auto"), DEVICES)
    if device == "auto":
        import torch

        return not torch.cuda.is_available()
    return device == "cpu"


def with_device_preset(cfg: DictConfig) -> DictConfig:
    """On CPU: activate the backend and compose the job's config again with the CPU preset before its overrides.

    The preset's rollout engine is ``launch.rollout``; a job that sets ``actor_rollout_ref.rollout.name`` to another
    CPU engine itself (as the GPU recipes do with ``vllm``) gets that engine's preset instead."""
    if not wants_cpu(cfg):
        return cfg
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    from gdpo_verl.cpu import activate, cpu_config
    from gdpo_verl.cpu.preset import ROLLOUTS

    rollout = check_choice("launch.rollout", cfg.launch.get("rollout", ROLLOUTS[0]), ROLLOUTS)
    activate()
    job = HydraConfig.get()
    return cpu_config(
        lambda overrides: compose(config_name=job.job.config_name, overrides=overrides), job.overrides.task, rollout
    )


def apply_components(cfg: DictConfig) -> RewardSpec | None:
    """Validate ``reward.gdpo`` and derive ``algorithm.gdpo_reward_{keys,weights,conditions}`` from it."""
    from gdpo_verl.components import parse_spec, resolve
    from gdpo_verl.core.contract import MANAGER_NAME
    from gdpo_verl.core.methods import ESTIMATORS

    spec = parse_spec(cfg.reward.get("gdpo"))
    manager = cfg.reward.reward_manager.name
    estimator = str(cfg.algorithm.adv_estimator)
    if manager != MANAGER_NAME:
        if estimator in ESTIMATORS and not cfg.algorithm.get("gdpo_reward_keys"):
            raise ValueError(
                f"algorithm.adv_estimator={estimator} with reward.reward_manager.name={manager} needs "
                "algorithm.gdpo_reward_keys (the keys your compute_score returns), or use "
                "reward.reward_manager.name=gdpo_multi with reward.gdpo.components"
            )
        return None
    if not spec.components:
        raise ValueError(
            f"reward.reward_manager.name={MANAGER_NAME} needs at least one entry in reward.gdpo.components "
            "({name, path, fn, weight}); see recipes/ for examples"
        )
    resolve(spec)  # imports every reward function now: a bad path or name fails here, not in a worker
    algo = cfg.algorithm
    declared = algo.get("gdpo_reward_keys")
    if declared and list(declared) != spec.names:
        raise ValueError(
            f"algorithm.gdpo_reward_keys={list(declared)} disagrees with reward.gdpo.components names "
            f"{spec.names}; leave gdpo_reward_keys null (it is derived) or make them equal"
        )
    with open_dict(algo):
        algo.gdpo_reward_keys = spec.names
        if algo.get("gdpo_reward_weights") is None:
            algo.gdpo_reward_weights = spec.weights
        if algo.get("gdpo_reward_conditions") is None:
            algo.gdpo_reward_conditions = spec.conditions
    return spec


def check_dynamic_sampling(cfg: DictConfig) -> None:
    """Dynamic sampling (``algorithm.filter_groups.enable``) exists only in verl's V1 trainer: refuse the legacy one.

    verl 0.9.1's legacy trainer (``trainer.use_v1=false``) never reads ``algorithm.filter_groups``, so the run
    would silently train without the paper's dynamic sampling.
    """
    filter_groups = cfg.algorithm.get("filter_groups") or {}
    if filter_groups.get("enable", False) and not cfg.trainer.get("use_v1", True):
        raise ValueError(
            "algorithm.filter_groups.enable=true (dynamic sampling, DAPO group filtering) works only in verl's V1 "
            "trainer, but trainer.use_v1=false selects the legacy trainer, which ignores it. Fix: "
            "trainer.use_v1=true (verl's default), or algorithm.filter_groups.enable=false to train without it."
        )


def validate_estimator(cfg: DictConfig) -> None:
    """The reward settings (for the GRPO baseline's metrics too) and, for this project's estimators, the method's
    options (``gdpo_verl.core.methods``): every error names the key, the bad value and the valid ones."""
    from gdpo_verl.core.contract import RewardSettings
    from gdpo_verl.core.methods import ESTIMATORS, MethodSettings

    if str(cfg.algorithm.adv_estimator) in ESTIMATORS or cfg.algorithm.get("gdpo_reward_keys"):
        settings = RewardSettings.from_algorithm(cfg.algorithm)
        if str(cfg.algorithm.adv_estimator) in ESTIMATORS:
            MethodSettings.from_algorithm(cfg.algorithm, len(settings.keys))


def validate(cfg: DictConfig) -> RewardSpec | None:
    """Every check that needs no Ray: components, estimator settings, rollout engine, verl's own checks.

    Returns the validated ``reward.gdpo`` spec (None unless the gdpo_multi manager is selected)."""
    from gdpo_verl.verl_glue.checks import check_run_config

    check_dynamic_sampling(cfg)
    check_run_config(cfg)
    spec = apply_components(cfg)
    validate_estimator(cfg)
    from gdpo_verl.cpu import check_rollout_backend

    check_rollout_backend(cfg)
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    return spec


def output_dir(cfg: DictConfig) -> Path:
    """``launch.output_dir``, else the Hydra job's output directory."""
    if cfg.launch.get("output_dir"):
        return Path(cfg.launch.output_dir).resolve()
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir).resolve()


def prepare(cfg: DictConfig) -> tuple[Path, Preflight]:
    """Fill run-time values (demo assets, output paths, worker env), validate, resolve, run the pre-flight checks
    (:mod:`gdpo_verl.preflight`) and the reward probe. Returns the output dir (created unless a dry run) and what
    the pre-flight checks found."""
    out = output_dir(cfg)
    if not cfg.launch.dry_run:
        out.mkdir(parents=True, exist_ok=True)
    with open_dict(cfg):
        cfg.launch.output_dir = str(out)
        if cfg.launch.get("demo"):
            from gdpo_verl.demo.assets import ensure_demo_assets

            assets = ensure_demo_assets()
            cfg.actor_rollout_ref.model.path = str(assets.model_dir)
            cfg.data.train_files = str(assets.train_parquet)
            cfg.data.val_files = str(assets.val_parquet)
        ray_init = cfg.ray_kwargs.ray_init  # (DictConfig.setdefault returns the default, not a node in the config)
        if ray_init.get("runtime_env") is None:
            ray_init.runtime_env = {}
        if ray_init.runtime_env.get("env_vars") is None:
            ray_init.runtime_env.env_vars = {}
        env = ray_init.runtime_env.env_vars
        env[EXTERNAL_MODULES_ENV] = with_external_modules(env.get(EXTERNAL_MODULES_ENV), PLUGIN_MODULE)
        env["VERL_FILE_LOGGER_PATH"] = str(out / METRICS_FILE)
        env.setdefault("TENSORBOARD_DIR", str(out / TENSORBOARD_DIR))  # verl's default: tensorboard_log/ in the cwd
        if cfg.trainer.get("default_local_dir", "").startswith("checkpoints/"):
            cfg.trainer.default_local_dir = str(out / "checkpoints")
    spec = validate(cfg)
    OmegaConf.resolve(cfg)  # Ray workers have no Hydra resolvers
    preflight = check_run(cfg, on_cpu=wants_cpu(cfg))
    if cfg.launch.get("probe_rewards", True) and spec is not None:
        probe_rewards(cfg, spec)
    return out, preflight


PROBE_ROWS = 4
PROBE_RESPONSE = "placeholder response"


def _first_rows(files, n: int) -> list[dict]:
    import pyarrow.parquet as pq

    path = Path(str(files[0] if isinstance(files, (list, tuple)) or OmegaConf.is_list(files) else files)).expanduser()
    if not path.is_file():
        raise ValueError(
            f"data.train_files: {path} does not exist, so the reward functions cannot be probed on it. Prepare the "
            "data first (python -m gdpo_verl.data_prep.<task>) or set launch.probe_rewards=false"
        )
    batch = next(pq.ParquetFile(path).iter_batches(batch_size=n), None)
    return batch.to_pylist() if batch is not None else []


def probe_rewards(cfg: DictConfig, spec: RewardSpec) -> None:
    """Call every reward function on the first rows of the training data with a placeholder response.

    Fails before Ray starts, naming the component and the row, when a function raises (or times out, or returns
    something that is not a number) on the real ground truth, or when a component's key is missing from every
    probed row's result (the message lists the keys the function did return).
    """
    import asyncio

    from gdpo_verl.manager import ComponentScorer

    rows = _first_rows(cfg.data.train_files, PROBE_ROWS)
    scorer = ComponentScorer(spec)
    missing: dict[str, tuple[str, ...]] = {}
    try:
        for i, row in enumerate(rows):
            kwargs = {
                "data_source": row.get("data_source", "unknown"),
                "solution_str": PROBE_RESPONSE,
                "ground_truth": (row.get("reward_model") or {}).get("ground_truth"),
                "extra_info": row.get("extra_info"),
                "response_length": len(PROBE_RESPONSE.split()),  # a placeholder token count
            }
            scored = asyncio.run(scorer.score(kwargs))
            for c in spec.components:
                got = scored[c.name]
                if got.error is not None:
                    raise ValueError(
                        f"reward probe: component {c.name!r} ({c.path}:{c.fn}) failed on row {i} of "
                        f"data.train_files (data_source={kwargs['data_source']!r}, ground_truth="
                        f"{kwargs['ground_truth']!r}) with the response {PROBE_RESPONSE!r}: {got.error}. Fix the "
                        "function (it must accept this ground truth and never raise) or set launch.probe_rewards=false"
                    )
                if got.missing_from is not None:
                    missing.setdefault(c.name, got.missing_from)
                else:
                    missing[c.name] = ()
    finally:
        scorer.close()
    for c in spec.components:
        if rows and missing.get(c.name):
            raise ValueError(
                f"reward probe: component {c.name!r} ({c.path}:{c.fn}) takes the key {c.key or c.name!r}, which the "
                f"function's result lacked on all {len(rows)} probed rows; the keys it returned: "
                f"{list(missing[c.name])}. Set the component's key (or name) to one of them"
            )
    print(f"[gdpo-verl] reward probe ok: {len(spec.components)} components on {len(rows)} rows", flush=True)


def run(cfg: DictConfig) -> Path:
    """Validate, then train with verl's run_ppo; Ray is shut down afterwards (multirun-safe)."""
    import importlib

    import ray

    from gdpo_verl import console

    verbose = console.is_verbose(cfg)
    console.quiet_settings(cfg)
    out, preflight = prepare(cfg)
    print(f"[gdpo-verl] the run:\n{preflight.summary()}", flush=True)
    if cfg.launch.dry_run:
        a = cfg.algorithm
        print(
            f"[gdpo-verl] dry run ok: adv_estimator={a.adv_estimator} method={cfg.launch.method} seed={cfg.seed} "
            f"rollout={cfg.actor_rollout_ref.rollout.name} rollout_dtype={cfg.actor_rollout_ref.rollout.dtype} "
            f"components={list(a.get('gdpo_reward_keys') or [])} weights={list(a.get('gdpo_reward_weights') or [])} "
            f"output_dir={out} (not created: a dry run writes nothing)",
            flush=True,
        )
        return out
    importlib.import_module(PLUGIN_MODULE)
    if verbose:
        from gdpo_verl.verl_glue import registered

        print(f"[gdpo-verl] verl registries in the driver: {registered()}", flush=True)
    os.environ["VERL_FILE_LOGGER_PATH"] = str(out / METRICS_FILE)
    os.environ.setdefault("TENSORBOARD_DIR", str(out / TENSORBOARD_DIR))
    from verl.trainer.main_ppo import run_ppo

    if cfg.trainer.use_v1:
        from verl.trainer.main_ppo import TaskRunnerV1 as runner
    else:
        from verl.trainer.main_ppo_v0 import TaskRunner as runner
    print(f"[gdpo-verl] {cfg.algorithm.adv_estimator} run -> {out}", flush=True)
    names = list(cfg.algorithm.get("gdpo_reward_keys") or [])
    follow = console.MetricsFollower(out / METRICS_FILE, names, preflight.steps, steps=not verbose)
    try:
        with follow:
            run_ppo(cfg, task_runner_class=runner)
    except BaseException:
        if not verbose:
            print(console.failure_hint(cfg), flush=True)
        raise
    finally:
        if ray.is_initialized():
            ray.shutdown()
    if names:
        print(console.reward_table(out / METRICS_FILE, names), flush=True)
    from gdpo_verl.tools.plot import plot_runs

    try:
        png = plot_runs(
            [out],
            out / "rewards.png",
            labels=[f"{cfg.launch.get('method', cfg.algorithm.adv_estimator)}-seed{cfg.seed}"],
        )
        print(f"[gdpo-verl] done: metrics in {out / METRICS_FILE}, per-reward curves in {png}", flush=True)
    except ValueError as e:  # nothing plottable was logged
        print(f"[gdpo-verl] done: metrics in {out / METRICS_FILE} (no plot: {e})", flush=True)
    return out


HYDRA_JOB_FILES = {".hydra", "main.log"}  # what Hydra writes into a job's output directory before the job runs


def forget_hydra_dir() -> None:
    """After a dry run: remove the job directory Hydra created (``outputs/<date>/<time>``) when it holds only
    Hydra's own files, and its parents that are left empty (never the working directory)."""
    import shutil

    from hydra.core.hydra_config import HydraConfig

    job = Path(HydraConfig.get().runtime.output_dir).resolve()
    if not job.is_dir() or not {p.name for p in job.iterdir()} <= HYDRA_JOB_FILES or job == Path.cwd().resolve():
        return
    shutil.rmtree(job)
    for parent in job.parents:
        if parent == Path.cwd().resolve() or not parent.is_dir() or any(parent.iterdir()):
            break
        parent.rmdir()


@hydra.main(config_path="pkg://gdpo_verl.recipes", config_name="demo", version_base=None)
def main(cfg: DictConfig) -> None:
    from gdpo_verl.console import quiet_driver

    quiet_driver(cfg)
    cfg = with_device_preset(cfg)
    run(cfg)
    if cfg.launch.dry_run:
        forget_hydra_dir()


COMMON_OVERRIDES = """\
  --config-name NAME                   a recipe above (default: demo); --config-dir DIR for your own configs
  method=grpo | algorithm.adv_estimator=grpo   the GRPO baseline on the same reward components
  seed=N  trainer.total_training_steps=N  trainer.total_epochs=N  trainer.save_freq=N
  actor_rollout_ref.model.path=DIR_OR_HUB_NAME  data.train_files=FILE  data.val_files=FILE
  data.train_batch_size=N  data.max_prompt_length=N  data.max_response_length=N  actor_rollout_ref.rollout.n=N
  trainer.n_gpus_per_node=N  trainer.nnodes=N
  -m KEY=a,b KEY2=c,d                  a sweep: one job per combination, one after another"""


def _recipe_lines() -> list[str]:
    """``name  first comment line`` of every primary config in ``gdpo_verl.recipes`` (those with a search path)."""
    from importlib.resources import files

    lines = []
    for entry in sorted(files("gdpo_verl.recipes").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        text = entry.read_text(encoding="utf-8")
        if not any(line.startswith("hydra:") for line in text.splitlines()):
            continue  # no search path of its own: a shared base or a config group member, not runnable alone
        first = text.splitlines()[0].lstrip("# ").strip() if text.startswith("#") else ""
        lines.append(f"  {entry.name[:-5]:<21}{first}")
    return lines


def _launch_block() -> list[str]:
    """The ``launch:`` block of ``gdpo_trainer.yaml`` with its comments: the one place its keys are described."""
    from importlib.resources import files

    text = files("gdpo_verl.recipes").joinpath("gdpo_trainer.yaml").read_text(encoding="utf-8").splitlines()
    start = text.index("launch:")
    block = []
    for line in text[start + 1 :]:
        if line and not line.startswith(" "):
            break
        if line.strip():
            block.append("  " + line.strip())
    return block


def usage() -> str:
    """``python -m gdpo_verl.main --help``: recipes, launch.* keys, common overrides, where the full config is."""
    return "\n".join(
        [
            "usage: python -m gdpo_verl.main [--config-name RECIPE] [KEY=VALUE ...] [-m] [--cfg job]",
            "",
            "Train GDPO (or the GRPO baseline) with verl's own trainer. No argument: the CPU demo (toy task).",
            "",
            "recipes (--config-name NAME):",
            *_recipe_lines(),
            "",
            "launch.* keys (this project's; in YAML or as launch.KEY=VALUE; the value shown is the default):",
            *_launch_block(),
            "",
            "common overrides (any key of the composed config can be set as KEY=VALUE):",
            COMMON_OVERRIDES,
            "",
            "the full config (verl's ppo_trainer + gdpo-verl's keys): python -m gdpo_verl.main [--config-name NAME] "
            "--cfg job",
            "check a run without starting it: ... launch.dry_run=true      Hydra's own options: --hydra-help",
        ]
    )


if __name__ == "__main__":
    if any(arg in ("--help", "-h") for arg in sys.argv[1:]):  # before Hydra, which composes the config first
        print(usage())
        sys.exit(0)
    from gdpo_verl.console import quiet_imports

    quiet_imports(sys.argv[1:])
    main()
