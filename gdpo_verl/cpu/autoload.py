"""Importing this module activates the CPU backend: the hook Ray workers reach through ``import verl``.

verl imports every module named in ``VERL_USE_EXTERNAL_MODULES`` at the end of ``import verl``. The CPU preset
(:func:`gdpo_verl.cpu.preset.cpu_runtime_env`) puts this module there, in the Ray job's runtime environment, so
every Ray worker of a CPU run (TaskRunner, training workers, agent-loop and reward workers) calls
:func:`gdpo_verl.cpu.activate` before it builds anything. Users never set the variable themselves.
"""

from gdpo_verl.cpu.activation import activate

activate()
