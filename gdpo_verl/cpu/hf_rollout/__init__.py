"""HF-transformers rollout for verl (``actor_rollout_ref.rollout.name=hf``), used by the CPU backend.

Three pieces, one module each: :mod:`.server` (a Ray actor that runs ``generate`` and reports log-probs),
:mod:`.replica` (the ``RolloutReplica`` that launches it) and :mod:`.adapter` (the in-worker ``BaseRollout`` that
pushes the actor's weights to it after every step); :mod:`.sampling` holds the sampling rules.
:func:`register` puts the replica and the adapter into verl's two rollout registries; it is called by
:func:`gdpo_verl.cpu.activate`.
"""

ROLLOUT_NAME = "hf"
_ADAPTER_FQN = "gdpo_verl.cpu.hf_rollout.adapter.HFServerAdapter"


def _load_replica():
    from gdpo_verl.cpu.hf_rollout.replica import HFReplica

    return HFReplica


def register() -> None:
    """Register ``rollout.name=hf`` with ``RolloutReplicaRegistry`` and ``_ROLLOUT_REGISTRY`` (idempotent)."""
    from verl.workers.rollout import base, replica

    replica.RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)
    base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = _ADAPTER_FQN
