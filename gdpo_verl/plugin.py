"""verl plugin entry point: ``import verl`` imports this module in every process.

Declared in pyproject.toml under ``[project.entry-points."verl.plugins"]``, so the driver, the TaskRunner
and every Ray worker register the project's pieces with verl's registries without any user action.
verl swallows plugin import errors (logged at DEBUG only); tests/test_plugin_on_cpu.py checks that
registration really happens in a fresh interpreter and inside a Ray task.
"""

from gdpo_verl.estimator import register as _register_estimator

_register_estimator()
