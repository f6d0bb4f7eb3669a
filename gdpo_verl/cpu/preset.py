"""The CPU preset: every verl config override a CPU run needs, as Hydra override strings.

``cpu_overrides(num_procs)`` is meant to be applied *before* the user's own overrides (so users can still tune
batch sizes, lengths, learning rates...). What each group does:

* devices and Ray: ``trainer.device=cpu``; ``num_procs`` training processes on one node; Ray started with
  ``num_procs`` logical ``GPU`` slots (see :mod:`gdpo_verl.cpu.platform`) and enough logical CPUs for verl's
  placement groups (3 per slot) plus TransferQueue; the job's runtime environment activates the backend in every
  Ray worker (:func:`cpu_runtime_env`).
* training engine: FSDP2 (FSDP1 insists on an accelerator ``device_id``), ``sdpa`` attention and no
  remove-padding (both otherwise need FlashAttention), no ``torch.compile``, fp32 parameters and compute.
* rollout: ``rollout.name=hf`` (:mod:`gdpo_verl.cpu.hf_rollout`), one process per replica, fp32.
* sampling: the V1 trainer's replay buffer (``gdpo_verl.verl_glue.replay_buffer.GDPOReplayBuffer``, selected by
  ``gdpo_trainer.yaml``) polls TransferQueue every :data:`POLL_INTERVAL_S` s instead of verl's 2 s (on CPU a demo
  step spent part of its ``gen`` time waiting for the next poll).
* process counts: one agent-loop worker, one reward worker, one TransferQueue storage unit, no dataloader
  worker processes (each extra process costs ~0.5 GB of RAM and seconds of start-up on a small machine).
"""

from __future__ import annotations

from gdpo_verl.cpu.activation import worker_env_vars
from gdpo_verl.cpu.hf_rollout import ROLLOUT_NAME

_RAY_CPUS_PER_SLOT = 3  # ResourcePoolManager's max_colocate_count: CPUs per placement-group bundle
#: torch/OpenMP intra-op threads of every Ray worker. The demo's tensors are tiny; on a busy 2-core machine two
#: threads per process measured 3-10x slower than one (oversubscription: ~10 processes share the cores).
WORKER_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
POLL_INTERVAL_S = 0.05  # replay-buffer poll; verl's default is 2.0
_RAY_CPUS_EXTRA = 4  # TransferQueue controller + storage unit, and room to schedule the remaining actors


def cpu_runtime_env() -> dict:
    """Ray ``runtime_env`` that makes every worker of the job activate the CPU backend on ``import verl``.

    ``cpu_overrides`` already puts it into ``ray_kwargs.ray_init.runtime_env``; pass it to ``ray.init`` yourself
    only when you start Ray before ``run_ppo`` does.
    """
    return {"env_vars": worker_env_vars()}


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cpu_overrides(num_procs: int = 1) -> list[str]:
    """Hydra overrides for verl's ``ppo_trainer`` config that run it on CPU with ``num_procs`` FSDP ranks."""
    if num_procs < 1:
        raise ValueError(f"num_procs must be >= 1, got {num_procs}")
    env_vars = {**cpu_runtime_env()["env_vars"], **WORKER_THREAD_ENV}
    ray_env = [f"++ray_kwargs.ray_init.runtime_env.env_vars.{k}={_quote(v)}" for k, v in env_vars.items()]
    return [
        # devices and Ray
        "trainer.device=cpu",
        "trainer.nnodes=1",
        f"trainer.n_gpus_per_node={num_procs}",
        f"ray_kwargs.ray_init.num_cpus={_RAY_CPUS_PER_SLOT * num_procs + _RAY_CPUS_EXTRA}",
        f"++ray_kwargs.ray_init.num_gpus={num_procs}",
        *ray_env,
        # training engine (actor, reference, critic)
        "actor_rollout_ref.actor.strategy=fsdp2",
        "critic.strategy=fsdp2",
        "actor_rollout_ref.model.use_remove_padding=False",
        "critic.model.use_remove_padding=False",
        "++actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "++critic.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.use_torch_compile=False",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
        "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False",
        "++actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32",
        "++actor_rollout_ref.ref.fsdp_config.mixed_precision.param_dtype=fp32",
        "critic.fsdp.use_torch_compile=False",
        "++critic.fsdp.mixed_precision.param_dtype=fp32",
        # rollout
        f"actor_rollout_ref.rollout.name={ROLLOUT_NAME}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.data_parallel_size=1",
        "actor_rollout_ref.rollout.pipeline_model_parallel_size=1",
        "actor_rollout_ref.rollout.dtype=fp32",
        "actor_rollout_ref.rollout.free_cache_engine=False",
        # sampling
        f"++trainer.v1.sampler.sampler_kwargs.poll_interval={POLL_INTERVAL_S}",
        # process counts
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        "data.dataloader_num_workers=0",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    ]
