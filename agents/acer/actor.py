"""ACER actor: the policy of one batched step (the categorical sampling is shared,
`agents.core.actors.categorical_actor`)."""

from __future__ import annotations

from agents.core.rollout import time_major


def policy_logits(network, recurrent: bool, params, obs, first, core):
    """`(logits [B, A], core)` of ACER's network at one batched step."""
    if recurrent:
        (logits, _), core = network.apply(params, time_major(obs), first[None], core)
        return logits[0], core
    logits, _ = network.apply(params, obs)
    return logits, core
