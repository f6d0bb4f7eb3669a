"""The only monkeypatch of the CPU backend, guarded by the exact verl version it was written against.

verl 0.9.1 builds the training process group in ``verl.utils.distributed.initialize_global_process_group_ray``
with the backend string ``f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"``. On the ``cpu`` platform that
is ``"cpu:gloo,cpu:gloo"``, which torch rejects ("Duplicate device type cpu"), and no registry or config key
reaches that string. :func:`apply` therefore rebinds the function, in its home module and in
``verl.workers.engine_workers`` (which imports it by name; rebound there only if that module is already loaded,
otherwise its later import picks up the patched name), to a wrapper that passes ``backend="cpu:gloo"``
when the caller gave none and the platform device is ``cpu``; on any other platform, or with an explicit
backend, the original runs unchanged.

:data:`PINNED_SOURCE_SHA256` holds the sha256 of ``inspect.getsource`` of every patched verl function;
``tests/test_cpu_backend_on_cpu.py`` fails loudly when verl's code changes under the patch. :func:`apply` is
called by :func:`gdpo_verl.cpu.activate` and refuses to run on any verl other than :data:`VERL_VERSION`.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable

VERL_VERSION = "0.9.1"

_TARGET_MODULE = "verl.utils.distributed"
_TARGET_NAME = "initialize_global_process_group_ray"
_REBIND_IN = (_TARGET_MODULE, "verl.workers.engine_workers")

#: sha256 of inspect.getsource(<function>) for each patched verl function, as shipped in verl 0.9.1.
PINNED_SOURCE_SHA256 = {
    f"{_TARGET_MODULE}.{_TARGET_NAME}": "761a94d1a2e058d31a0ac231c89a142abf5daf822e333bac75e84cafcf7507ac",
}

CPU_PROCESS_GROUP_BACKEND = "cpu:gloo"


def check_verl_version() -> None:
    """Raise unless the installed verl is exactly :data:`VERL_VERSION`."""
    import verl

    if verl.__version__ != VERL_VERSION:
        raise RuntimeError(
            f"gdpo_verl.cpu patches verl internals of verl=={VERL_VERSION}, but verl=={verl.__version__} is "
            f"installed. Install verl=={VERL_VERSION} or port gdpo_verl/cpu/patches.py to the new version."
        )


def original_functions() -> dict[str, Callable]:
    """The unpatched verl functions this module replaces, keyed like :data:`PINNED_SOURCE_SHA256`."""
    func = getattr(importlib.import_module(_TARGET_MODULE), _TARGET_NAME)
    return {f"{_TARGET_MODULE}.{_TARGET_NAME}": getattr(func, "__wrapped__", func)}


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
    check_verl_version()
    original = original_functions()[f"{_TARGET_MODULE}.{_TARGET_NAME}"]
    patched = None
    for module in _loaded_rebind_sites():
        current = getattr(module, _TARGET_NAME)
        if getattr(current, "__gdpo_cpu_patch__", False):
            continue
        if current is not original:
            raise RuntimeError(f"{module.__name__}.{_TARGET_NAME} is not verl's function; refusing to patch over it")
        patched = patched or _with_cpu_backend(original)
        setattr(module, _TARGET_NAME, patched)


def is_applied() -> bool:
    """Whether every loaded rebinding site holds the patched function."""
    return all(getattr(getattr(m, _TARGET_NAME), "__gdpo_cpu_patch__", False) for m in _loaded_rebind_sites())
