"""The only monkeypatch of the CPU backend, guarded by the exact verl version it was written against (its source is
pinned in ``gdpo_verl.pins``).

verl 0.9.1 builds the training process group in ``verl.utils.distributed.initialize_global_process_group_ray``
with the backend string ``f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"``. On the ``cpu`` platform that
is ``"cpu:gloo,cpu:gloo"``, which torch rejects ("Duplicate device type cpu"), and no registry or config key
reaches that string. :func:`apply` therefore rebinds the function, in its home module and in
``verl.workers.engine_workers`` (which imports it by name; rebound there only if that module is already loaded,
otherwise its later import picks up the patched name), to a wrapper that passes ``backend="cpu:gloo"``
when the caller gave none and the platform device is ``cpu``; on any other platform, or with an explicit
backend, the original runs unchanged.

:func:`apply` is called by :func:`gdpo_verl.cpu.activate` and refuses to run on any verl other than 0.9.1
(``gdpo_verl.pins.check_verl_version``).
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable

_TARGET_MODULE = "verl.utils.distributed"
_TARGET_NAME = "initialize_global_process_group_ray"
_REBIND_IN = (_TARGET_MODULE, "verl.workers.engine_workers")
PATCHED = f"{_TARGET_MODULE}.{_TARGET_NAME}"  # its pin: gdpo_verl.pins.PINNED_SOURCE_SHA256[PATCHED]

CPU_PROCESS_GROUP_BACKEND = "cpu:gloo"


def original_function() -> Callable:
    """The unpatched verl function this module replaces."""
    func = getattr(importlib.import_module(_TARGET_MODULE), _TARGET_NAME)
    return getattr(func, "__wrapped__", func)


def _with_cpu_backend(original: Callable) -> Callable:
    @functools.wraps(original)
    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        from verl.utils.device import get_device_name

        if backend is None and get_device_name() == "cpu":
            backend = CPU_PROCESS_GROUP_BACKEND
        return original(timeout_second=timeout_second, backend=backend)

    initialize_global_process_group_ray.__gdpo_cpu_patch__ = True
    return initialize_global_process_group_ray


def _loaded_rebind_sites() -> list:
    importlib.import_module(_TARGET_MODULE)
    return [sys.modules[name] for name in _REBIND_IN if name in sys.modules]


def apply() -> None:
    """Rebind the patched function everywhere verl looks it up (idempotent)."""
    from gdpo_verl.pins import check_verl_version

    check_verl_version("CPU backend")
    original = original_function()
    patched = None
    for module in _loaded_rebind_sites():
        current = getattr(module, _TARGET_NAME)
        if getattr(current, "__gdpo_cpu_patch__", False):
            continue
        if current is not original:
            raise RuntimeError(f"{module.__name__}.{_TARGET_NAME} is not verl's function; refusing to patch over it")
        patched = patched or _with_cpu_backend(original)
        setattr(module, _TARGET_NAME, patched)
