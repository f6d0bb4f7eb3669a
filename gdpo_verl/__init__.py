"""gdpo-verl: GDPO (group reward-decoupled normalization) for multi-reward RL on verl 0.9.1.

Data flow, one folder or module each:
    rewards/ (reward functions) -> manager (per-reward scores) -> advantage (pure math)
    -> estimator (verl adapter, registered as ``gdpo``) -> verl's trainer.

Importing this package is cheap; ``import verl`` loads ``gdpo_verl.plugin`` through the
``verl.plugins`` entry point, which registers everything with verl.
"""

__version__ = "0.1.0"
