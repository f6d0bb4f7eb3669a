"""gdpo-verl's Hydra configs: the base config, the CPU demo and the paper's task recipes.

Shipped inside the installed package as ``gdpo_verl.recipes`` (see pyproject.toml), so
``python -m gdpo_verl.main --config-name <recipe>`` finds them from any directory, in a checkout or a wheel.
"""
