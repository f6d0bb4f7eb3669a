"""Offline assets of the CPU demo: a toy multi-reward task and a warm-started tiny model to train with GDPO.

``ensure_demo_assets()`` (in ``gdpo_verl.demo.assets``) builds, once and cached, the tokenizer, the tiny
Qwen2 warm start and the task's verl parquet files. Modules: ``task`` (problems and parquet rows),
``tokenizer``, ``model``, ``warmstart`` (noisy SFT), ``evaluate`` (reward rates of a model), ``threads``
(torch thread count), ``settings`` (build settings), ``assets`` (cache and build), ``rewards`` and
``scale_rewards`` (the two demos' reward functions). ``DemoAssets``,
``DemoSettings`` and ``ensure_demo_assets`` are importable from here, lazily, so importing this package
stays cheap. Build from a shell with ``python -m gdpo_verl.demo.assets``.
"""

__all__ = ["DemoAssets", "DemoSettings", "ensure_demo_assets"]


def __getattr__(name: str):
    """Lazy re-exports of ``__all__`` (keeps ``python -m gdpo_verl.demo.assets`` free of runpy warnings)."""
    if name == "DemoSettings":
        from gdpo_verl.demo.settings import DemoSettings

        return DemoSettings
    if name in ("DemoAssets", "ensure_demo_assets"):
        from gdpo_verl.demo import assets

        return getattr(assets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
