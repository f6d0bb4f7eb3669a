"""Offline, cached, deterministic assets of the CPU demo: tokenizer + warm-started tiny Qwen2 + parquet data.

``ensure_demo_assets()`` returns a ``DemoAssets`` (paths that verl's config takes as
``actor_rollout_ref.model.path``, ``data.train_files`` and ``data.val_files``). The first call builds
everything without network access in about a minute on 2 CPU cores:

1. the byte-level, one-token-per-character tokenizer (``gdpo_verl.demo.tokenizer``),
2. a seeded random tiny Qwen2 (``gdpo_verl.demo.model``), float32,
3. its short supervised warm start on noisy demonstrations (``gdpo_verl.demo.warmstart``), after which it
   writes well-formed answers about half the time and right ones about a fifth of the time at temperature 1
   (greedy decoding: always well formed, right about 90% of the time, almost never brief),
4. the toy task's train/val parquet files (``gdpo_verl.demo.task``),
5. ``manifest.json``: settings, versions, build time and the warm-started model's measured reward rates.

Layout: ``<cache root>/demo-<hash>/{model/, data/train.parquet, data/val.parquet, manifest.json}``. The
cache root is ``cache_dir``, else ``$GDPO_VERL_CACHE``, else ``~/.cache/gdpo_verl``. The hash covers the
settings, the source of every module that shapes the assets, and the transformers/tokenizers versions,
so a code or settings change builds a fresh directory. The build happens in a temporary sibling directory
renamed into place at the end, so a crashed build never leaves a half-written cache. A cached call does
not import torch or transformers and returns in milliseconds.
Run ``python -m gdpo_verl.demo.assets [CACHE_ROOT]`` to build (or find) the assets and print their paths.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path

from gdpo_verl.demo.settings import DemoSettings

ASSETS_FORMAT = 2  # 2: head dim 32 (vLLM-servable); bump to invalidate every cache when the layout below changes
MANIFEST = "manifest.json"
_SOURCES = (
    "demo/assets.py",
    "demo/settings.py",
    "demo/evaluate.py",
    "demo/task.py",
    "demo/tokenizer.py",
    "demo/model.py",
    "demo/warmstart.py",
    "demo/threads.py",
    "demo/rewards.py",
    "generation.py",
)


@dataclasses.dataclass(frozen=True)
class DemoAssets:
    """Where the built assets are. ``model_dir`` holds the model and its tokenizer."""

    root: str
    model_dir: str
    train_parquet: str
    val_parquet: str
    manifest: dict = dataclasses.field(repr=False, compare=False)

    @classmethod
    def at(cls, root: Path) -> DemoAssets:
        """The assets of a finished build directory."""
        manifest = json.loads((root / MANIFEST).read_text())
        data = root / "data"
        return cls(str(root), str(root / "model"), str(data / "train.parquet"), str(data / "val.parquet"), manifest)


def default_cache_root() -> Path:
    """``$GDPO_VERL_CACHE`` if set, else ``~/.cache/gdpo_verl``."""
    return Path(os.environ.get("GDPO_VERL_CACHE") or Path.home() / ".cache" / "gdpo_verl")


def assets_hash(settings: DemoSettings) -> str:
    """12 hex digits identifying the assets that ``settings`` and this code version build."""
    digest = hashlib.sha256(f"{ASSETS_FORMAT}|{settings!r}".encode())
    for name in ("transformers", "tokenizers"):
        digest.update(f"|{name}={version(name)}".encode())
    package = Path(__file__).resolve().parent.parent
    for source in _SOURCES:
        digest.update((package / source).read_bytes())
    return digest.hexdigest()[:12]


@contextlib.contextmanager
def _quiet_progress_bars() -> Iterator[None]:
    """Silence transformers' progress bars (shard writing) inside the block, restoring the previous state."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def build_assets(out_dir: Path, settings: DemoSettings, log: Callable[[str], None] = print) -> None:
    """Build every asset into the empty directory ``out_dir``; ``manifest.json`` is written last."""
    from gdpo_verl.demo import task
    from gdpo_verl.demo.evaluate import reward_rates
    from gdpo_verl.demo.model import build_model
    from gdpo_verl.demo.tokenizer import build_tokenizer
    from gdpo_verl.demo.warmstart import warm_start

    start = time.monotonic()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, settings.model, seed=settings.seed)
    log(f"  tiny Qwen2: {sum(p.numel() for p in model.parameters()):,} parameters, vocabulary {len(tokenizer)}")
    log(f"  warm start: {settings.warm_start.steps} supervised steps on noisy demonstrations")
    losses = warm_start(model, tokenizer, task.all_problems(), settings.warm_start, log=log)
    rates = reward_rates(model, tokenizer, task.all_problems(), temperature=1.0, seed=settings.seed)
    greedy = reward_rates(model, tokenizer, task.all_problems(), temperature=0.0)
    log(f"  warm-started model, mean rewards at temperature 1: {rates}; greedy: {greedy}")
    with _quiet_progress_bars():
        model.save_pretrained(out_dir / "model")
    tokenizer.save_pretrained(out_dir / "model")
    task.write_splits(out_dir / "data", settings.seed, settings.train_repeats, settings.val_size)
    manifest = {
        "format": ASSETS_FORMAT,
        "settings": dataclasses.asdict(settings),
        "versions": {name: version(name) for name in ("torch", "transformers", "tokenizers")},
        "build_seconds": round(time.monotonic() - start, 1),
        "final_warm_start_loss": round(losses[-1], 4) if losses else None,
        "warm_start_rates": {"temperature_1": rates, "greedy": greedy},
        "rows": {"train": settings.train_repeats * len(task.all_problems()), "val": settings.val_size},
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def ensure_demo_assets(
    cache_dir: str | os.PathLike | None = None,
    settings: DemoSettings | None = None,
    log: Callable[[str], None] = print,
) -> DemoAssets:
    """The demo assets under ``cache_dir`` (see the module docstring), built first if missing.

    ``settings`` default to ``DemoSettings()``; tests pass smaller ones (fewer warm-start steps).
    """
    settings = settings if settings is not None else DemoSettings()
    root = Path(cache_dir) if cache_dir is not None else default_cache_root()
    final = root / f"demo-{assets_hash(settings)}"
    if (final / MANIFEST).is_file():
        log(f"demo assets: cached in {final}")
        return DemoAssets.at(final)
    log(f"demo assets: building offline into {final} (about a minute on 2 CPU cores)")
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.building-", dir=root))
    try:
        build_assets(staging, settings, log)
        staging.chmod(0o755)  # mkdtemp makes it private; the finished cache is an ordinary directory
        try:
            staging.rename(final)
        except OSError:
            if not (final / MANIFEST).is_file():  # a concurrent build finished first, else a real error
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"demo assets: ready in {final}")
    return DemoAssets.at(final)


if __name__ == "__main__":
    assets = ensure_demo_assets(sys.argv[1] if len(sys.argv) > 1 else None)
    for field in ("model_dir", "train_parquet", "val_parquet"):
        print(f"{field}: {getattr(assets, field)}")
