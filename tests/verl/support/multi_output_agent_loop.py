"""An agent loop that puts two outputs of each session into the batch, as multi-turn agent loops do.

Registered for the e2e run through ``actor_rollout_ref.rollout.agent.agent_loop_config_path``: verl's
single-turn loop generates, and the session returns a partial output (the first half of the
response) before the final one. verl copies the final output's reward to the partial one and keys
the rows ``{uid}_{session}_0`` and ``{uid}_{session}_1``.
"""

from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop


class MultiOutputAgentLoop(SingleTurnAgentLoop):
    async def run(self, sampling_params, priority=0, **kwargs):
        final = await super().run(sampling_params, priority=priority, **kwargs)
        cut = max(1, len(final.response_ids) // 2)
        partial = final.model_copy(
            update={
                "response_ids": final.response_ids[:cut],
                "response_mask": final.response_mask[:cut],
                "response_logprobs": None if final.response_logprobs is None else final.response_logprobs[:cut],
                "extra_fields": dict(final.extra_fields),
            }
        )
        return [partial, final]
