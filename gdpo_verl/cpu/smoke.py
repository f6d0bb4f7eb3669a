"""A short GRPO run of verl's own trainer on CPU: ``python -m gdpo_verl.cpu.smoke --trainer v1|legacy --steps 2``.

It composes verl's ``ppo_trainer`` config with the CPU preset (:func:`gdpo_verl.cpu.cpu_overrides`) and a tiny
GRPO setup (4 prompts x 4 samples, 16 new tokens, reward :mod:`gdpo_verl.cpu.smoke_reward`), activates the CPU
backend in this process, and calls ``verl.trainer.main_ppo.run_ppo`` with verl's V1 ``TaskRunnerV1`` or legacy
``TaskRunner``, exactly as ``python -m verl.trainer.main_ppo`` would after validating the config. The tiny model,
tokenizer and parquet files come from ``gdpo_verl.demo.assets.ensure_demo_assets()`` unless ``--model-dir``,
``--train-file`` and ``--val-file`` are given.

Afterwards it prints (and writes to ``<output-dir>/summary.json``) what :mod:`gdpo_verl.cpu.smoke_report` reads
back: completed steps, advantage statistics, seconds per step, rollout-vs-actor log-prob agreement, the largest
change of any actor weight, the prompts of every step and peak memory; it exits non-zero unless all requested
steps ran, every advantage is finite and the weights changed. ``--save-freq`` and ``--resume-from`` exercise
checkpoint and resume.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import psutil

from gdpo_verl.cpu import activate, check_rollout_backend, cpu_overrides
from gdpo_verl.cpu.smoke_report import MemorySampler, summarize

REWARD_FILE = Path(__file__).with_name("smoke_reward.py")


def _assets(args) -> tuple[Path, Path, Path]:
    if args.model_dir and args.train_file and args.val_file:
        return Path(args.model_dir), Path(args.train_file), Path(args.val_file)
    from gdpo_verl.demo.assets import ensure_demo_assets

    assets = ensure_demo_assets()
    return Path(assets.model_dir), Path(assets.train_parquet), Path(assets.val_parquet)


def smoke_overrides(args, model_dir: Path, train: Path, val: Path, out: Path) -> list[str]:
    """The run-specific overrides, applied after the CPU preset."""
    resume = ["trainer.resume_mode=disable"]
    if args.resume_from:
        resume = ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={args.resume_from}"]
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train}",
        f"data.val_files={val}",
        "data.train_batch_size=4",
        f"data.max_prompt_length={args.max_prompt_length}",
        f"data.max_response_length={args.max_response_length}",
        "data.seed=7",
        f"actor_rollout_ref.model.path={model_dir}",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={16 // args.procs}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={16 // args.procs}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={16 // args.procs}",
        "actor_rollout_ref.actor.optim.lr=1e-3",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        f"reward.custom_reward_function.path={REWARD_FILE}",
        "reward.custom_reward_function.name=compute_score",
        f"trainer.use_v1={args.trainer == 'v1'}",
        f"trainer.total_training_steps={args.steps}",
        "trainer.total_epochs=100",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        f"trainer.save_freq={args.save_freq or args.steps}",
        f"trainer.default_local_dir={out / 'ckpt'}",
        f"trainer.rollout_data_dir={out / 'rollouts'}",
        "trainer.logger=[console,file]",
        "trainer.project_name=gdpo_cpu_smoke",
        f"trainer.experiment_name={args.trainer}",
        f"++ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={out / 'metrics.jsonl'}",
        "++ray_kwargs.ray_init.include_dashboard=False",
        *resume,
    ]


def compose_config(overrides: list[str]):
    """verl's ``ppo_trainer`` config with ``overrides`` applied (Hydra compose, no working-dir change)."""
    from hydra import compose, initialize_config_module

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def run_verl(config) -> None:
    """What ``verl.trainer.main_ppo.main`` does after Hydra: validate, then ``run_ppo`` with the chosen runner."""
    import ray
    from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    if config.trainer.use_v1:
        runner = TaskRunnerV1
    else:
        from verl.trainer.main_ppo_v0 import TaskRunner as runner
    try:
        run_ppo(config, task_runner_class=runner)
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer", choices=["v1", "legacy"], default="v1")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--procs", type=int, default=1, help="training processes (FSDP ranks)")
    parser.add_argument("--output-dir", default=None, help="default: a new temporary directory")
    parser.add_argument("--save-freq", type=int, default=0, help="checkpoint every N steps; 0: at the last step only")
    parser.add_argument("--resume-from", default=None, help="a global_step_N checkpoint directory to resume from")
    parser.add_argument("--model-dir")
    parser.add_argument("--train-file")
    parser.add_argument("--val-file")
    parser.add_argument("--max-prompt-length", type=int, default=64)
    parser.add_argument("--max-response-length", type=int, default=16)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, applied last")
    args = parser.parse_args(argv)

    out = Path(args.output_dir or tempfile.mkdtemp(prefix="gdpo_cpu_smoke_")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    activate()  # before any verl module reads the platform (composing the config imports some)
    model_dir, train, val = _assets(args)
    overrides = cpu_overrides(args.procs) + smoke_overrides(args, model_dir, train, val, out) + args.overrides
    config = compose_config(overrides)
    check_rollout_backend(config)

    started = time.perf_counter()
    with MemorySampler() as memory:
        run_verl(config)
    summary = summarize(
        metrics_path=out / "metrics.jsonl", rollout_dir=out / "rollouts", model_dir=model_dir, ckpt_dir=out / "ckpt"
    )
    summary.update(
        trainer=args.trainer,
        wall_seconds=round(time.perf_counter() - started, 1),
        process_seconds=round(time.time() - psutil.Process().create_time(), 1),
        peak_tree_rss_gib=round(memory.peak_tree_rss / 2**30, 2),
        peak_host_used_gib=round(memory.peak_host_used / 2**30, 2),
        output_dir=str(out),
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("GDPO_CPU_SMOKE_SUMMARY " + json.dumps({k: v for k, v in summary.items() if k != "prompts"}))

    steps = summary["steps"]
    all_steps_ran = bool(steps) and steps[-1] == args.steps and (args.resume_from or steps[0] == 1)
    ok = all_steps_ran and summary["advantages_finite"] and (summary["max_weight_change"] or 0) > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
