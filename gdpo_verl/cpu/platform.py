"""verl platform ``cpu``: device ``cpu``, collectives over gloo, one logical Ray ``GPU`` slot per training process.

Registered in ``verl.plugin.platform.PlatformRegistry`` under :data:`PLATFORM_NAME` and installed as the process's
platform by :func:`gdpo_verl.cpu.activate`. Everything verl asks through ``verl.utils.device`` then answers for the
host: ``get_device_name() == "cpu"``, ``get_device_id() == "cpu"`` (so ``tensor.to(get_device_id())`` stays on the
host), ``get_nccl_backend() == "gloo"`` and ``get_torch_device()`` is :data:`gdpo_verl.cpu.device.CPU_DEVICE_MODULE`.

Ray resources, stated plainly: verl's resource pools put one accelerator in every placement-group bundle and
``ResourcePoolManager`` checks the cluster's ``GPU`` total before it starts. On CPU each bundle stands for one
training process, so this platform names the Ray resource ``GPU`` and the CPU preset starts Ray with
``num_gpus = trainer.n_gpus_per_node`` *logical* GPUs (``ray_kwargs.ray_init.num_gpus``). No CUDA device is
touched: torch is a CPU build or CUDA is never initialised, and Ray's ``CUDA_VISIBLE_DEVICES`` is ignored.
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform import PlatformBase

from gdpo_verl.cpu.device import CPU_DEVICE_MODULE

PLATFORM_NAME = "cpu"


class CPUPlatform(PlatformBase):
    """Host-CPU backend for verl's platform abstraction (see the module docstring)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return CPU_DEVICE_MODULE  # type: ignore[return-value]  # module-like object, see gdpo_verl.cpu.device

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:  # verl passes this to tensor.to(); "cpu" keeps tensors on the host
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # what Ray sets for a logical GPU slot; harmless without CUDA

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # logical slot per training process, see the module docstring

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_gpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
