"""Hydra configs of gdpo-verl (composed by ``python -m gdpo_verl.main``)."""
