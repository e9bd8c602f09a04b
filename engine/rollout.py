"""Rollouts: time-major trace recording over an agent's pure `select_action`
(`agents.core.rollout`: what it returns and what a rollout records).

The rollout has two modes that share one recording function:
- XLA (envpool, gymnax): policy step and the env's XLA step inside one `lax.scan`, so a whole
  T-step rollout is a single device program with no host round trip.
- Host (gymnasium fallback): a Python loop of jitted policy steps and host env steps, then
  the same recording scan over the stacked results.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from agents.core.rollout import ActorOutput, ActorState, Rollout
from envs import TimeStep


def _env_action(out: ActorOutput):
    return out.action if out.env_action is None else out.env_action


def _record(discount: float, actor: ActorState, out: ActorOutput, ts: TimeStep, feedback=None):
    """One step of bookkeeping: the trace fields for step t and the actor state at t+1.

    `feedback(core, action, reward) -> core`, when given, lets a recurrent core see the
    action taken and the reward received (R2D2's previous-action and -reward inputs)."""
    steps = {
        "first": actor.first,
        "frame_reset": actor.frame_reset,
        "action": out.action,
        "mu": out.mu,
        "reward": ts.reward.astype(jnp.float32),
        "discount": discount * (1.0 - ts.terminated.astype(jnp.float32)),
        "mask": 1.0 - ts.first.astype(jnp.float32),
    }
    ret = actor.episode_return + ts.raw_reward
    length = actor.episode_length + 1 - ts.first.astype(jnp.int32)  # the fake step is not counted
    stats = (jnp.where(ts.game_over, ret, 0.0), jnp.where(ts.game_over, length, 0), ts.game_over)
    nxt = actor._replace(
        obs=ts.obs,
        first=ts.first,
        frame_reset=ts.frame_reset,
        core_state=out.core_state
        if feedback is None
        else feedback(out.core_state, out.action, steps["reward"]),
        episode_return=jnp.where(ts.game_over, 0.0, ret),
        episode_length=jnp.where(ts.game_over, 0, length),
    )
    return nxt, (actor.obs, steps, stats)


def trace_step_spec(actor_output) -> dict:
    """What one step of a trace stores (the `steps` dict `_record` writes), per env, given
    the shapes of a batched `ActorOutput`: the replay's step spec, from the agent's actor."""
    sds = jax.ShapeDtypeStruct
    strip = lambda x: sds(x.shape[1:], x.dtype)  # noqa: E731  drop the env axis
    flag, value = sds((), jnp.bool_), sds((), jnp.float32)
    return {
        "first": flag,
        "frame_reset": flag,
        "action": strip(actor_output.action),
        "mu": jax.tree.map(strip, actor_output.mu),
        "reward": value,
        "discount": value,
        "mask": value,
    }


def _assemble(start: ActorState, end: ActorState, recorded) -> Rollout:
    obs, steps, (fin_ret, fin_len, over) = recorded
    return Rollout(obs, steps, start.core_state, end.obs, end.first, fin_ret, fin_len, over)


def make_xla_rollout(env, select_action, trace_len: int, discount: float, feedback=None):
    """A pure `rollout(params, actor) -> (actor, Rollout)` over envpool's XLA step."""

    def rollout(params, actor: ActorState):
        def body(actor, _):
            key, sub = jax.random.split(actor.key)
            out = select_action(params, actor.obs, actor.first, actor.core_state, sub)
            env_state, ts = env.xla_step(actor.env_state, _env_action(out))
            actor = actor._replace(env_state=env_state, key=key)
            return _record(discount, actor, out, ts, feedback)

        end, recorded = jax.lax.scan(body, actor, None, length=trace_len)
        return end, _assemble(actor, end, recorded)

    return rollout


def _record_all(
    discount: float, actor: ActorState, outs: ActorOutput, tss: TimeStep, feedback=None
):
    """`_record` over T stacked policy outputs and env steps (the host rollout's second half)."""

    def body(actor, xs):
        out, ts = xs
        return _record(discount, actor, out, ts, feedback)

    end, recorded = jax.lax.scan(body, actor, (outs, tss))
    return end, _assemble(actor, end, recorded)


def make_host_rollout(env, select_action, trace_len: int, discount: float, feedback=None):
    """The same rollout for host-stepped envs (gymnasium backend). Not jittable as a whole:
    T jitted policy steps, T host env steps, then one jitted recording scan."""
    policy = jax.jit(select_action)
    record = jax.jit(lambda actor, outs, tss: _record_all(discount, actor, outs, tss, feedback))

    def rollout(params, actor: ActorState):
        outs, tss = [], []
        obs, first, core, key = actor.obs, actor.first, actor.core_state, actor.key
        for _ in range(trace_len):
            key, sub = jax.random.split(key)
            out = policy(params, obs, first, core, sub)
            ts = env.step(np.asarray(_env_action(out)))
            outs.append(out)
            tss.append(ts)
            obs, first, core = ts.obs, ts.first, out.core_state
            if feedback is not None:
                reward = jnp.asarray(ts.reward, jnp.float32)
                core = feedback(core, out.action, reward)
        stack = lambda *xs: jnp.stack([jnp.asarray(x) for x in xs])  # noqa: E731
        outs = jax.tree.map(stack, *outs)
        tss = jax.tree.map(stack, *tss)
        return record(actor._replace(key=key), outs, tss)

    return rollout


def rollout_shape(
    env, select_action, trace_len: int, discount: float, params, actor, feedback=None
):
    """The `Rollout` of either mode as ShapeDtypeStructs, without stepping any env."""
    sds = jax.ShapeDtypeStruct
    out = jax.eval_shape(select_action, params, actor.obs, actor.first, actor.core_state, actor.key)
    n = env.spec.num_envs
    flag, value = sds((n,), jnp.bool_), sds((n,), jnp.float32)
    obs = jax.tree.map(lambda x: sds(x.shape, x.dtype), actor.obs)
    ts = TimeStep(
        obs=obs, reward=value, raw_reward=value,
        terminated=flag, truncated=flag, first=flag, game_over=flag, frame_reset=flag,
    )  # fmt: skip
    stack = lambda s: sds((trace_len, *s.shape), s.dtype)  # noqa: E731
    outs, tss = jax.tree.map(stack, out), jax.tree.map(stack, ts)
    return jax.eval_shape(partial(_record_all, discount, feedback=feedback), actor, outs, tss)[1]


def initial_actor_state(env, network_initial_state, key, use_xla: bool | None = None) -> ActorState:
    """Reset the envs (XLA mode when available, unless `use_xla=False`) and build the state."""
    if env.has_xla if use_xla is None else use_xla:
        env_state, ts = env.xla_reset()
    else:
        env_state, ts = None, env.reset()
    n = env.spec.num_envs
    return ActorState(
        env_state=env_state,
        obs=jax.tree.map(jnp.asarray, ts.obs),
        first=jnp.asarray(ts.first),
        frame_reset=jnp.asarray(ts.frame_reset),
        core_state=network_initial_state,
        episode_return=jnp.zeros((n,), jnp.float32),
        episode_length=jnp.zeros((n,), jnp.int32),
        key=key,
    )
