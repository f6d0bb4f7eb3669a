"""Reward functions of gdpo-verl: pure ``str -> float`` scorers, one task per module.

Each module exposes its per-reward functions and a verl-style ``compute_score`` that returns a dict
(``{"score": ..., <reward name>: ...}``) so verl's reward loop carries every reward to the estimator.
Run a module's examples with ``python -m doctest -v gdpo_verl/rewards/<module>.py``.
"""
