"""A multi-output agent session on the CPU demo: verl's tool agent loop, each session reported as two outputs.

Some agent loops return several outputs per session (one per turn, or a context rewrite); verl's V1 trainer stores
each as a row ``{uid}_{session}_{index}`` and gives every row the final output's reward info. This loop produces
that shape with verl's own ``tool_agent`` loop (multi-turn, with the toy tool of tests/helpers/toy_tool.py): its
output is preceded by an earlier output holding the first half of the response. GRPO counts each session once
(its final output); so must GDPO. Registered through ``actor_rollout_ref.rollout.agent.agent_loop_config_path``
(tests/helpers/configs/agent_loops.yaml) with ``tests`` on PYTHONPATH.
Run: used by tests/test_e2e_on_cpu.py::test_one_value_per_agent_session_through_verls_tool_agent_loop
"""

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop


class TwoOutputToolAgentLoop(ToolAgentLoop):
    async def run(self, sampling_params, **kwargs) -> list[AgentLoopOutput]:
        final = await super().run(sampling_params, **kwargs)
        half = max(1, len(final.response_ids) // 2)
        earlier = AgentLoopOutput(
            prompt_ids=final.prompt_ids,
            response_ids=final.response_ids[:half],
            response_mask=final.response_mask[:half],
            response_logprobs=final.response_logprobs[:half] if final.response_logprobs else None,
            multi_modal_data={},
            num_turns=final.num_turns,
            metrics=final.metrics,
            extra_fields=dict(final.extra_fields),
        )
        return [earlier, final]
