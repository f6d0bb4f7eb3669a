"""gdpo-verl: GDPO (group reward-decoupled normalization) for multi-reward RL on verl 0.9.1.

Data flow (README "Data flow"), one module or folder each:
    rewards/ (reward functions) -> components + reward_calls (the ``reward.gdpo`` block, killable calls)
    -> manager (``gdpo_multi``: one record per sample, ``core.contract``) -> verl_glue.agent_loop (rollout workers:
    per-reward tensors ``token_level_scores_<name>``, ``core.token_scores``) -> estimator (``gdpo``; the math in
    ``core.advantage``) -> verl's trainer (hooks in ``verl_glue``; every verl internal pinned in ``pins``).
``cpu/`` runs verl on a machine without a GPU; ``main`` is the entry point (``python -m gdpo_verl.main``).

Importing this package is cheap; ``import verl`` loads ``gdpo_verl.plugin`` through the ``verl.plugins`` entry
point, which registers everything with verl.
"""

__version__ = "0.1.0"
