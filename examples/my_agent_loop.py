# An example custom agent loop, as a user would add it to their verl checkout
# (verl/experimental/agent_loop/my_agent_loop.py); the anchors in
# examples/anchors/my_agent_loop.yaml instrument it.
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
from verl.utils.profiler import simple_timer


@register("my_agent")
class MyAgentLoop(AgentLoopBase):
    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        prompt_ids = await self.apply_chat_template(messages)
        metrics = {}
        with simple_timer("generate_sequences", metrics):
            output = await self.server_manager.generate(
                request_id="my-agent", prompt_ids=prompt_ids, sampling_params=sampling_params
            )
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=output.token_ids,
            response_mask=[1] * len(output.token_ids),
            num_turns=2,
            metrics=metrics,
        )
