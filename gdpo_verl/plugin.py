"""verl plugin entry point: ``import verl`` imports this module in every process.

Declared in pyproject.toml under ``[project.entry-points."verl.plugins"]``, so the driver, the TaskRunner and
every Ray worker register the project's pieces with verl without any user action: ``gdpo_verl.verl_glue.install``
registers the ``gdpo`` advantage estimator and the ``gdpo_multi`` reward manager and installs the trainer glue.
In a CPU run's worker (``GDPO_VERL_DEVICE=cpu``) the CPU backend is activated first. verl swallows plugin import
errors (logged at DEBUG only); tests/test_plugin_on_cpu.py checks registration in a fresh interpreter and in a
Ray task.
"""

import os

from gdpo_verl.cpu.activation import DEVICE_ENV_FLAG, DEVICE_ENV_VALUE

if os.environ.get(DEVICE_ENV_FLAG) == DEVICE_ENV_VALUE:  # a CPU run's worker: the backend goes first
    from gdpo_verl.cpu import activate

    activate()

from gdpo_verl.verl_glue import install  # noqa: E402

install()
