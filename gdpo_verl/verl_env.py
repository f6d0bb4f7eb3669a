"""The environment variables through which gdpo-verl reaches verl's processes (no verl import here).

``import verl`` imports every module named in ``VERL_USE_EXTERNAL_MODULES`` (comma-separated) and loads the
``verl.plugins`` entry points. ``python -m gdpo_verl.main`` adds :data:`PLUGIN_MODULE` to that list in the Ray job's
environment, and the CPU backend adds its autoload module, so every Ray worker registers the project's pieces even
where entry points are switched off (``VERL_USE_EXTERNAL_PLUGINS=none``).
"""

from __future__ import annotations

EXTERNAL_MODULES_ENV = "VERL_USE_EXTERNAL_MODULES"
PLUGIN_MODULE = "gdpo_verl.plugin"


def with_external_modules(current: str | None, *modules: str) -> str:
    """``VERL_USE_EXTERNAL_MODULES`` value ``current`` (comma-separated) with ``modules`` added once each, in order.

    >>> with_external_modules("a,b", "b", "gdpo_verl.plugin")
    'a,b,gdpo_verl.plugin'
    """
    names = [m for m in str(current or "").split(",") if m]
    return ",".join(dict.fromkeys([*names, *modules]))
