"""Compose a shipped config exactly as ``python -m gdpo_verl.main`` does: ``gdpo_verl.recipes`` as the config
module (each primary config carries verl's search path), and on CPU the CPU preset before the job's overrides."""

from __future__ import annotations

from hydra import compose, initialize_config_module

from gdpo_verl.cpu import cpu_config


def compose_config(name: str, overrides=(), device: str = "cpu"):
    with initialize_config_module("gdpo_verl.recipes", version_base=None):
        if device == "cpu":
            return cpu_config(lambda preset: compose(name, overrides=preset), [f"launch.device={device}", *overrides])
        return compose(name, overrides=[f"launch.device={device}", *overrides])
