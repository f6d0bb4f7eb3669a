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
activated and the config is composed again with the CPU preset (``gdpo_verl.cpu.cpu_overrides``) before the
job's own overrides, so those still win. Before Ray starts it derives ``algorithm.gdpo_reward_*`` from
``reward.gdpo.components`` and validates everything, so a bad config fails in seconds with the bad key named.
Then it runs verl's ``run_ppo`` with verl's own TaskRunner (V1 or legacy, ``trainer.use_v1``); ``import verl``
loads ``gdpo_verl.plugin`` in the TaskRunner and every Ray worker. Each job writes ``metrics.jsonl`` (verl's file
logger) and ``checkpoints/`` in its own output directory and shuts Ray down at the end, so multirun jobs run
cleanly one after another.
"""

from __future__ import annotations

import os
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf, open_dict

from gdpo_verl.components import RewardSpec, parse_spec, resolve
from gdpo_verl.core.choices import check_choice
from gdpo_verl.verl_glue import EXTERNAL_MODULES_ENV, check_run_config, with_external_modules

PLUGIN_MODULE = "gdpo_verl.plugin"
METRICS_FILE = "metrics.jsonl"
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

    from gdpo_verl.cpu import activate, cpu_overrides
    from gdpo_verl.cpu.preset import ROLLOUTS

    rollout = check_choice("launch.rollout", cfg.launch.get("rollout", ROLLOUTS[0]), ROLLOUTS)
    activate()
    job = HydraConfig.get()
    composed = compose(
        config_name=job.job.config_name, overrides=[*cpu_overrides(rollout=rollout), *job.overrides.task]
    )
    chosen = composed.actor_rollout_ref.rollout.name
    if chosen != rollout and chosen in ROLLOUTS:
        composed = compose(
            config_name=job.job.config_name, overrides=[*cpu_overrides(rollout=chosen), *job.overrides.task]
        )
    with open_dict(composed):
        composed.launch.rollout = chosen
    return composed


def apply_components(cfg: DictConfig) -> RewardSpec | None:
    """Validate ``reward.gdpo`` and derive ``algorithm.gdpo_reward_{keys,weights,conditions}`` from it."""
    spec = parse_spec(cfg.reward.get("gdpo"))
    manager = cfg.reward.reward_manager.name
    estimator = str(cfg.algorithm.adv_estimator)
    if manager != "gdpo_multi":
        if estimator == "gdpo" and not cfg.algorithm.get("gdpo_reward_keys"):
            raise ValueError(
                f"algorithm.adv_estimator=gdpo with reward.reward_manager.name={manager} needs "
                "algorithm.gdpo_reward_keys (the keys your compute_score returns), or use "
                "reward.reward_manager.name=gdpo_multi with reward.gdpo.components"
            )
        return None
    if not spec.components:
        raise ValueError(
            "reward.reward_manager.name=gdpo_multi needs at least one entry in reward.gdpo.components "
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


def validate(cfg: DictConfig) -> RewardSpec | None:
    """Every check that needs no Ray: components, estimator settings, rollout engine, verl's own checks.

    Returns the validated ``reward.gdpo`` spec (None unless the gdpo_multi manager is selected)."""
    check_dynamic_sampling(cfg)
    check_run_config(cfg)
    spec = apply_components(cfg)
    if str(cfg.algorithm.adv_estimator) == "gdpo" or cfg.algorithm.get("gdpo_reward_keys"):
        from gdpo_verl.estimator import GDPOSettings

        GDPOSettings.from_config(cfg.algorithm)  # weights, conditions, epsilon: for the GRPO baseline's metrics too
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


def prepare(cfg: DictConfig) -> Path:
    """Fill run-time values (demo assets, output paths, worker env), validate, resolve. Returns the output dir."""
    out = output_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    with open_dict(cfg):
        cfg.launch.output_dir = str(out)
        if cfg.launch.get("demo"):
            from gdpo_verl.demo.assets import ensure_demo_assets

            assets = ensure_demo_assets()
            cfg.actor_rollout_ref.model.path = str(assets.model_dir)
            cfg.data.train_files = str(assets.train_parquet)
            cfg.data.val_files = str(assets.val_parquet)
        env = cfg.ray_kwargs.ray_init.setdefault("runtime_env", {}).setdefault("env_vars", {})
        env[EXTERNAL_MODULES_ENV] = with_external_modules(env.get(EXTERNAL_MODULES_ENV), PLUGIN_MODULE)
        env["VERL_FILE_LOGGER_PATH"] = str(out / METRICS_FILE)
        if cfg.trainer.get("default_local_dir", "").startswith("checkpoints/"):
            cfg.trainer.default_local_dir = str(out / "checkpoints")
    spec = validate(cfg)
    OmegaConf.resolve(cfg)  # Ray workers have no Hydra resolvers
    if cfg.launch.get("probe_rewards", True) and spec is not None:
        probe_rewards(cfg, spec)
    return out


PROBE_ROWS = 4
PROBE_RESPONSE = "placeholder response"


def _first_rows(files, n: int) -> list[dict]:
    import pyarrow.parquet as pq

    path = Path(str(files[0] if isinstance(files, (list, tuple)) or OmegaConf.is_list(files) else files)).expanduser()
    if not path.is_file():
        raise ValueError(
            f"data.train_files: {path} does not exist, so the reward functions cannot be probed on it. Prepare the "
            "data first (python -m data_prep.<task>) or set launch.probe_rewards=false"
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

    out = prepare(cfg)
    if cfg.launch.dry_run:
        a = cfg.algorithm
        print(
            f"[gdpo-verl] dry run ok: adv_estimator={a.adv_estimator} seed={cfg.seed} "
            f"rollout={cfg.actor_rollout_ref.rollout.name} rollout_dtype={cfg.actor_rollout_ref.rollout.dtype} "
            f"components={list(a.get('gdpo_reward_keys') or [])} weights={list(a.get('gdpo_reward_weights') or [])} "
            f"output_dir={out}",
            flush=True,
        )
        return out
    importlib.import_module(PLUGIN_MODULE)
    from gdpo_verl.verl_glue import registered

    print(f"[gdpo-verl] verl registries in the driver: {registered()}", flush=True)
    os.environ["VERL_FILE_LOGGER_PATH"] = str(out / METRICS_FILE)
    from verl.trainer.main_ppo import run_ppo

    if cfg.trainer.use_v1:
        from verl.trainer.main_ppo import TaskRunnerV1 as runner
    else:
        from verl.trainer.main_ppo_v0 import TaskRunner as runner
    print(f"[gdpo-verl] {cfg.algorithm.adv_estimator} run -> {out}", flush=True)
    try:
        run_ppo(cfg, task_runner_class=runner)
    finally:
        if ray.is_initialized():
            ray.shutdown()
    from gdpo_verl.tools.plot import plot_runs

    try:
        png = plot_runs([out], out / "rewards.png", labels=[f"{cfg.algorithm.adv_estimator}-seed{cfg.seed}"])
        print(f"[gdpo-verl] done: metrics in {out / METRICS_FILE}, per-reward curves in {png}", flush=True)
    except ValueError as e:  # nothing plottable was logged
        print(f"[gdpo-verl] done: metrics in {out / METRICS_FILE} (no plot: {e})", flush=True)
    return out


@hydra.main(config_path="pkg://gdpo_verl.recipes", config_name="demo", version_base=None)
def main(cfg: DictConfig) -> None:
    run(with_device_preset(cfg))


if __name__ == "__main__":
    main()
