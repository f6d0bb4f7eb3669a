"""``RolloutReplica`` for ``rollout.name=hf``: one HF generate server actor per training process.

Registered with ``verl.workers.rollout.replica.RolloutReplicaRegistry`` by :func:`gdpo_verl.cpu.activate`, so
``LLMServerManager`` builds :class:`HFReplica` objects where it would build ``vLLMReplica``. Only the hybrid
mode of colocated synchronous training is supported (the trainer's worker group holds the actor, the replica's
server runs as a separate Ray actor on the same node and receives weights through
:class:`gdpo_verl.cpu.hf_rollout.adapter.HFServerAdapter`); a replica spans exactly one process, so
``tensor_model_parallel_size``, ``data_parallel_size`` and ``pipeline_model_parallel_size`` must be 1.

The replica's "server address" is a label, ``hf-generate://replica-<rank>``: the server speaks Ray calls
(token in, token out), not HTTP, so agent loops that need an OpenAI-compatible endpoint do not work with it.
"""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from verl.workers.rollout.replica import RolloutMode, RolloutReplica

from gdpo_verl.cpu.hf_rollout.adapter import server_actor_name
from gdpo_verl.cpu.hf_rollout.server import HFGenerateServer


class HFReplica(RolloutReplica):
    """Launches :class:`~gdpo_verl.cpu.hf_rollout.server.HFGenerateServer` next to its training worker."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.world_size != 1:
            raise ValueError(
                "rollout.name=hf runs one server per training process: set actor_rollout_ref.rollout."
                "tensor_model_parallel_size=1, data_parallel_size=1 and pipeline_model_parallel_size=1 "
                f"(got a replica world size of {self.world_size})"
            )
        self.server_class = ray.remote(HFGenerateServer)

    def _server_name(self) -> str:
        kind = "reward_" if self.is_reward_model else ("teacher_" if self.is_teacher_model else "")
        return server_actor_name(self.replica_rank, 0, kind=kind, suffix=self.name_suffix)

    async def launch_servers(self):
        if self.rollout_mode != RolloutMode.HYBRID:
            raise ValueError(f"rollout.name=hf supports colocated (hybrid) rollout only, not {self.rollout_mode.value}")
        (worker,) = self.workers
        node_id = await worker.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
        server = self.server_class.options(
            name=self._server_name(),
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            max_concurrency=self.max_concurrency,
        ).remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        await server.wait_for_requests_to_drain.remote()  # returns once the model is loaded
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf-generate://replica-{self.replica_rank}{self.name_suffix}"
