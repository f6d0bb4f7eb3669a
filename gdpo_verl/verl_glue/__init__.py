"""Every touch point between gdpo-verl and verl 0.9.1 (the CPU backend keeps its own in ``gdpo_verl.cpu``).

One module a concern; every verl object they override, mirror or rely on is pinned in ``gdpo_verl.pins``:

    install        ``install()``, called by ``gdpo_verl.plugin`` at ``import verl`` in every process: checks the verl
                   version, registers the ``gdpo`` estimator and the ``gdpo_multi`` reward manager, wraps the trainers;
                   ``check_registered`` (a process where the plugin did not load would run upstream's ``gdpo``)
    v1             the V1 trainer (``trainer.use_v1=true``): ``GDPOAdvantageMixin`` on every registered trainer mode
    legacy         the legacy trainer (``use_v1=false``): ``compute_advantage``/``compute_data_metrics`` wrapped
    batch          reading the project's fields out of verl's batches: per-reward metrics, agent sessions
    checks         start-up refusals that need verl (trainer mode) or the batch (missing tensors, missing keys)
    agent_loop     the rollout workers writing ``token_level_scores_<name>`` (loaded by name from the config:
                   ``actor_rollout_ref.rollout.agent.agent_loop_manager_class``)
    replay_buffer  the V1 sampler (loaded by name from ``trainer.v1.sampler.custom_sampler``)

Data path (README "Data flow"): reward functions -> ``gdpo_multi`` manager (records of ``gdpo_verl.core.contract``)
-> ``agent_loop`` writes ``token_level_scores_<name>`` (bs, T) -> the ``gdpo`` estimator reads them. ``agent_loop``
and ``replay_buffer`` subclass verl classes at import, which must not happen before the CPU backend activates, so
nothing here imports them. Importing this package imports no verl code.
"""

from gdpo_verl.verl_glue.install import check_registered, install, registered

__all__ = ["check_registered", "install", "registered"]
