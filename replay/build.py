"""Building an agent's replay: the trace replay of one device, and its window and
prioritisation from an agent's config."""

from __future__ import annotations

import dataclasses

import jax

from replay.memory import available_memory_bytes
from replay.prioritized import PrioritizedTraceReplay
from replay.trace_replay import TraceReplay


def make_trace_replay(
    env_spec, step_spec, *, trace_len, buffer_size, shards, extras_spec=None, memory_limit=None
) -> TraceReplay:
    """The trace replay of one device: the streams of its num_envs / `shards` envs.

    On CPU all shards share host memory, so by default each gets 1/`shards` of it."""
    if memory_limit is None and shards > 1 and jax.devices()[0].platform == "cpu":
        avail = available_memory_bytes(jax.devices()[0])
        memory_limit = None if avail is None else int(0.8 * avail) // shards
    num_envs = env_spec.num_envs * jax.process_count()
    return TraceReplay(
        num_envs=num_envs // shards,
        trace_len=trace_len,
        capacity=buffer_size // shards,
        obs_spec=env_spec.obs_spec,
        frame_stack=env_spec.frame_stack,
        step_spec=step_spec,
        extras_spec=extras_spec,
        memory_limit_bytes=memory_limit,
    )


def window_replay(trace_replay: TraceReplay, config, *, new_at_max: bool = True):
    """The replay of an agent with a `ReplayWindow` config (DQN, R2D1, SAC, TD3): the uniform
    trace replay with the config's look-back and look-ahead, wrapped in proportional
    prioritization (Schaul et al. 2016, no uniform mixing) with --prioritized. `new_at_max`:
    a new trace gets the largest priority so far (Schaul et al.'s Algorithm 1), else its env's
    recent ones (`replay.PrioritizedTraceReplay`)."""
    windowed = dataclasses.replace(
        trace_replay, lookback=config.lookback, lookahead=config.lookahead
    )
    if not config.prioritized:
        return windowed
    return PrioritizedTraceReplay(windowed, epsilon=0.0, new_at_max=new_at_max)
