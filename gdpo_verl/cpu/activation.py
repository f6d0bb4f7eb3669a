"""``activate()``: switch the current process's verl to the CPU backend (idempotent).

In order, it checks that verl is 0.9.1 (``gdpo_verl.pins.check_verl_version``), registers
:class:`gdpo_verl.cpu.platform.CPUPlatform` in verl's
``PlatformRegistry`` and installs it as the process's platform, registers the FSDP engines for device ``cpu``
(:mod:`gdpo_verl.cpu.engine`) and the HF rollout ``rollout.name=hf`` (:mod:`gdpo_verl.cpu.hf_rollout`), applies
:mod:`gdpo_verl.cpu.patches` (and :mod:`gdpo_verl.cpu.vllm_patches` where ``GDPO_VERL_ROLLOUT=vllm``), and puts
:func:`worker_env_vars` into ``os.environ`` (``GDPO_VERL_DEVICE=cpu`` and
:mod:`gdpo_verl.cpu.autoload` in ``VERL_USE_EXTERNAL_MODULES``), so that processes started from here, such as a
local Ray cluster and its workers, activate the backend themselves on ``import verl``.

Every process that runs verl code must call it before verl builds engines or process groups: the driver calls
it directly; Ray workers call it on ``import verl`` through :mod:`gdpo_verl.cpu.autoload`, named in the inherited
environment and, for clusters started elsewhere, in the job's runtime environment
(:func:`gdpo_verl.cpu.preset.cpu_runtime_env`).
"""

from __future__ import annotations

import importlib.util
import logging
import os

from gdpo_verl.verl_env import EXTERNAL_MODULES_ENV, with_external_modules

DEVICE_ENV_FLAG = "GDPO_VERL_DEVICE"
DEVICE_ENV_VALUE = "cpu"
AUTOLOAD_MODULE = "gdpo_verl.cpu.autoload"
#: set to ``vllm`` in the workers of a CPU run whose rollout is vLLM (the CPU preset does): activation then also
#: applies :mod:`gdpo_verl.cpu.vllm_patches` (when vLLM is installed); other runs never import vLLM.
ROLLOUT_ENV_FLAG = "GDPO_VERL_ROLLOUT"
VLLM_ROLLOUT = "vllm"

logger = logging.getLogger(__name__)
_active = False


def worker_env_vars() -> dict[str, str]:
    """Environment that makes a process activate the backend on ``import verl`` (keeps other external modules)."""
    modules = with_external_modules(os.environ.get(EXTERNAL_MODULES_ENV), AUTOLOAD_MODULE)
    return {DEVICE_ENV_FLAG: DEVICE_ENV_VALUE, EXTERNAL_MODULES_ENV: modules}


def _install_platform() -> None:
    from verl.plugin.platform import PlatformRegistry, platform_manager, set_platform

    from gdpo_verl.cpu.platform import PLATFORM_NAME, CPUPlatform

    if PlatformRegistry.get(PLATFORM_NAME) is not CPUPlatform:
        PlatformRegistry.register(platform=PLATFORM_NAME)(CPUPlatform)
    if not isinstance(platform_manager._current_platform, CPUPlatform):
        set_platform(CPUPlatform())


def activate() -> None:
    """Make verl in this process train and roll out on the host CPU (see the module docstring).

    Best called before anything imports verl: the environment is set first, so ``import verl`` itself runs
    :mod:`gdpo_verl.cpu.autoload` (which re-enters here) before verl's entry-point plugins import modules that
    read the platform. Called later, it still works but replaces an already auto-detected platform (verl logs
    "Replacing already-initialised platform"), and modules that cached the device name at import keep it.
    """
    global _active
    if _active:
        return
    os.environ.update(worker_env_vars())
    import verl  # noqa: F401  # first import: runs gdpo_verl.cpu.autoload, i.e. this function, re-entrantly

    if _active:
        return
    from gdpo_verl.cpu import hf_rollout, patches
    from gdpo_verl.pins import check_verl_version

    check_verl_version("CPU backend")
    _install_platform()
    from gdpo_verl.cpu import engine  # imports verl's FSDP engine module, which reads the platform at import

    engine.register()
    hf_rollout.register()
    patches.apply()
    if os.environ.get(ROLLOUT_ENV_FLAG) == VLLM_ROLLOUT and importlib.util.find_spec("vllm") is not None:
        from gdpo_verl.cpu import vllm_patches  # imports vLLM: only in runs whose rollout is vLLM

        vllm_patches.apply()
    _active = True
    logger.info("gdpo_verl: verl CPU backend active in pid %s", os.getpid())
