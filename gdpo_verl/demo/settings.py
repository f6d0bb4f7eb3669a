"""Settings of the demo asset build: model shape, warm-start schedule, demonstration noise, data sizes.

Plain frozen dataclasses without heavy imports, so ``gdpo_verl.demo.assets`` can hash them and find a
cached build without importing torch or transformers. Their meaning is documented where they are used:
``gdpo_verl.demo.model`` (``ModelSize``), ``gdpo_verl.demo.warmstart`` (``DemoMix``, ``WarmStartConfig``)
and ``gdpo_verl.demo.assets`` (``DemoSettings``). Print the defaults with ``python -m gdpo_verl.demo.settings``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelSize:
    """Shape of the tiny Qwen2 (head dim = hidden / heads; vLLM's CPU attention needs a head dim of 32, 64 or >= 80)."""

    hidden: int = 64
    layers: int = 2
    heads: int = 2
    kv_heads: int = 2
    mlp: int = 256
    max_positions: int = 128


@dataclass(frozen=True)
class DemoMix:
    """Probabilities of the noisy warm-start demonstrations."""

    p_correct: float = 0.5  # the number is the right sum (else a uniformly drawn wrong sum)
    p_well_formed: float = 0.5  # the layout is ``<a>N</a>`` (else a malformed layout)
    p_verbose: float = 0.5  # a ``"3+4=7 "`` working prefix precedes the answer


@dataclass(frozen=True)
class WarmStartConfig:
    """Optimisation settings of the two-phase warm start."""

    clean_steps: int = 500  # phase 1: right sums only (layout noise kept), to learn the 100 facts
    noisy_steps: int = 200  # phase 2: the full ``mix``, at ``noisy_lr``, to spread the answers again
    batch_size: int = 64
    lr: float = 3e-3
    noisy_lr: float = 3e-4
    weight_decay: float = 0.0
    seed: int = 0
    threads: int = 1  # torch intra-op threads while training (see gdpo_verl.demo.threads)
    mix: DemoMix = field(default_factory=DemoMix)

    @property
    def steps(self) -> int:
        """Both phases."""
        return self.clean_steps + self.noisy_steps


@dataclass(frozen=True)
class DemoSettings:
    """Everything that determines the demo assets (all seeded)."""

    seed: int = 0
    model: ModelSize = field(default_factory=ModelSize)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    train_repeats: int = 3  # train split: each of the 100 problems this many times (300 rows)
    val_size: int = 32


if __name__ == "__main__":
    print(DemoSettings())
