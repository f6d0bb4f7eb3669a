"""verl plugin entry point: ``import verl`` imports this module in every process.

Declared in pyproject.toml under ``[project.entry-points."verl.plugins"]``, so the driver, the TaskRunner
and every Ray worker register the project's pieces with verl's registries without any user action:
the ``gdpo`` advantage estimator, the ``gdpo_multi`` reward manager, and the trainer glue that brings
per-reward scores to the estimator in verl's V1 trainer. verl swallows plugin import errors (logged at
DEBUG only); tests/test_plugin_on_cpu.py checks registration in a fresh interpreter and in a Ray task.
"""

import os

if os.environ.get("GDPO_VERL_DEVICE") == "cpu":  # a CPU run's worker: the backend goes first
    from gdpo_verl.cpu import activate

    activate()

from gdpo_verl import manager as _manager  # noqa: F401  (registers gdpo_multi with verl's reward loop)
from gdpo_verl.estimator import register as _register_estimator
from gdpo_verl.trainer import install as _install_trainer_glue

_register_estimator()
_install_trainer_glue()
