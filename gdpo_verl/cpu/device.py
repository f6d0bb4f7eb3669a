"""``torch.cpu`` plus the accelerator-module functions verl calls on ``get_torch_device()``.

verl treats the platform's device module like ``torch.cuda``: it calls ``empty_cache``, ``memory_allocated``,
``mem_get_info``, ``get_rng_state``, ``get_device_name`` (flops counter) and a few more, which ``torch.cpu``
lacks. :data:`CPU_DEVICE_MODULE` forwards everything ``torch.cpu`` has and answers the rest honestly for a host
process: memory figures are this process's resident set (current and peak), ``mem_get_info`` is the host's
available/total RAM, the RNG is torch's CPU generator, and cache or allocator controls are no-ops.

Used by :class:`gdpo_verl.cpu.platform.CPUPlatform` as its ``device_module``; nothing else imports it.
"""

from __future__ import annotations

import resource
import types

import psutil
import torch


def _rss_bytes() -> int:
    return psutil.Process().memory_info().rss


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class CPUDeviceModule:
    """Stands in for ``torch.cuda`` on a CPU-only host; unknown attributes fall through to ``torch.cpu``."""

    def __getattr__(self, name: str):
        return getattr(torch.cpu, name)

    # --- device bookkeeping -------------------------------------------------------------------------------
    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def get_device_name(device=None) -> str:
        return "CPU"

    @staticmethod
    def get_device_properties(device=None) -> types.SimpleNamespace:
        return types.SimpleNamespace(name="CPU", total_memory=psutil.virtual_memory().total)

    # --- memory queries (process resident set; there is no separate device memory) ---------------------------
    @staticmethod
    def memory_allocated(device=None) -> int:
        return _rss_bytes()

    @staticmethod
    def memory_reserved(device=None) -> int:
        return _rss_bytes()

    @staticmethod
    def max_memory_allocated(device=None) -> int:
        return _peak_rss_bytes()

    @staticmethod
    def max_memory_reserved(device=None) -> int:
        return _peak_rss_bytes()

    @staticmethod
    def mem_get_info(device=None) -> tuple[int, int]:
        mem = psutil.virtual_memory()
        return mem.available, mem.total

    @staticmethod
    def memory_stats(device=None) -> dict:
        return {"allocated_bytes.all.current": _rss_bytes(), "allocated_bytes.all.peak": _peak_rss_bytes()}

    # --- allocator / cache controls: nothing to do for the host allocator --------------------------------------
    @staticmethod
    def empty_cache() -> None:
        return None

    @staticmethod
    def ipc_collect() -> None:
        return None

    @staticmethod
    def reset_peak_memory_stats(device=None) -> None:
        return None

    @staticmethod
    def reset_accumulated_memory_stats(device=None) -> None:
        return None

    @staticmethod
    def set_per_process_memory_fraction(fraction: float, device=None) -> None:
        return None

    # --- random number generator: torch's default CPU generator ---------------------------------------------
    @staticmethod
    def get_rng_state(device=None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device=None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        torch.manual_seed(seed)


CPU_DEVICE_MODULE = CPUDeviceModule()
