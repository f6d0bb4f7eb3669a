"""verl's FSDP training engines, registered for device ``cpu`` in ``verl.workers.engine.EngineRegistry``.

verl registers ``FSDPEngineWithLMHead`` / ``FSDPEngineWithValueHead`` for devices ``cuda`` and ``npu`` only, so on
the ``cpu`` platform ``EngineRegistry.get_engine_cls`` finds nothing. :func:`register` adds the two subclasses
below for ``cpu`` (backends ``fsdp`` and ``fsdp2``); they differ from verl's in one respect:

FSDP2 wraps a forward-only engine (the reference policy) with ``CPUOffloadPolicy(pin_memory=True)``, and pinning
host memory needs an accelerator ("Cannot access accelerator device when none is available"). On CPU the
parameters already live in host memory, so :class:`HostMemoryFSDPMixin` builds forward-only FSDP2 modules without
the offload policy. It relies on ``FSDPEngine._build_fsdp_module`` choosing the policy from
``engine_config.forward_only``; that method's source is pinned in ``gdpo_verl.pins``.
"""

from __future__ import annotations

from verl.workers.engine import EngineRegistry
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead


class HostMemoryFSDPMixin:
    """Build forward-only FSDP2 modules without ``CPUOffloadPolicy`` (see the module docstring)."""

    def _build_fsdp_module(self, module):
        config = self.engine_config
        if not (config.forward_only and config.strategy == "fsdp2"):
            return super()._build_fsdp_module(module)
        config.forward_only = False
        try:
            return super()._build_fsdp_module(module)
        finally:
            config.forward_only = True


class CPUFSDPEngineWithLMHead(HostMemoryFSDPMixin, FSDPEngineWithLMHead):
    """verl's FSDP language-model engine on the host CPU."""


class CPUFSDPEngineWithValueHead(HostMemoryFSDPMixin, FSDPEngineWithValueHead):
    """verl's FSDP value-model (critic) engine on the host CPU."""


def register() -> None:
    """Register the CPU engines for ``language_model`` and ``value_model`` (idempotent)."""
    for model_type, engine_cls in (
        ("language_model", CPUFSDPEngineWithLMHead),
        ("value_model", CPUFSDPEngineWithValueHead),
    ):
        try:
            EngineRegistry.get_engine_cls(model_type, "fsdp2")
        except ValueError:  # nothing registered for device "cpu" yet
            EngineRegistry.register(model_type=model_type, backend=["fsdp", "fsdp2"], device="cpu")(engine_cls)
