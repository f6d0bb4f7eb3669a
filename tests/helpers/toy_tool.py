"""The toy tool of the multi-turn agent-loop test: integer addition, as a verl function tool.

Loaded by verl's tool agent loop through ``actor_rollout_ref.rollout.multi_turn.function_tool_path`` (this file).
Run: used by tests/test_e2e_on_cpu.py::test_one_value_per_agent_session_through_verls_tool_agent_loop
"""

from verl.tools.function_tool import function_tool


@function_tool
def add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: the first integer
        b: the second integer
    """
    return str(int(a) + int(b))
