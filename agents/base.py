"""What the agents share on the host side: building the training state and restarting the
actor. An agent provides `learner`, `replay`, `mesh`, `env`, `_initial_core(n)` and, when
sharded, `_replay_init()`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from agents.parallel import P, to_global
from agents.rollout import initial_actor_state


def make_trace_replay(
    spec, *, trace_len: int, buffer_size: int, shards: int, extras_spec=None, memory_limit=None
):
    """The trace replay of one device: the streams of its num_envs / `shards` envs, each step
    holding the flags, action, behaviour μ, reward, discount and mask the losses need.

    On CPU all shards share host memory, so by default each gets 1/`shards` of it."""
    from replay import TraceReplay, available_memory_bytes

    if memory_limit is None and shards > 1 and jax.devices()[0].platform == "cpu":
        avail = available_memory_bytes(jax.devices()[0])
        memory_limit = None if avail is None else int(0.8 * avail) // shards
    sds = jax.ShapeDtypeStruct
    num_envs = spec.num_envs * jax.process_count()
    return TraceReplay(
        num_envs=num_envs // shards,
        trace_len=trace_len,
        capacity=buffer_size // shards,
        obs_shape=spec.obs_shape,
        obs_dtype=spec.obs_dtype,
        frame_stack=spec.frame_stack,
        step_spec={
            "first": sds((), jnp.bool_),
            "frame_reset": sds((), jnp.bool_),
            "action": sds((), jnp.int32),
            "mu": sds((spec.num_actions,), jnp.float32),
            "reward": sds((), jnp.float32),
            "discount": sds((), jnp.float32),
            "mask": sds((), jnp.float32),
        },
        trace_extras_spec=extras_spec,
        memory_limit_bytes=memory_limit,
    )


def sample_key(key, axis_name=None):
    """Split the learner's key; under data parallelism each device folds in its index so it
    samples its own envs' traces. Returns (next learner key, sampling key)."""
    key, sub = jax.random.split(key)
    if axis_name is not None:
        sub = jax.random.fold_in(sub, jax.lax.axis_index(axis_name))
    return key, sub


def replayed_steps(sample, trace_len: int) -> dict:
    """The learner fields of a replayed trace: obs and `first` for all T+1 steps, the
    transition fields (action, μ, reward, discount, mask) for the first T."""
    s = sample.steps
    per_step = {k: s[k][:trace_len] for k in ("action", "mu", "reward", "discount", "mask")}
    return {"obs": sample.obs, "first": s["first"], **per_step}


def slice_batch(batch, start: int, size: int, batch_major: tuple[str, ...] = ("core_state",)):
    """Sequences start..start+size of a NamedTuple batch: fields are time-major `[T, B, ...]`
    except those named in `batch_major` (`[B, ...]`, e.g. a recurrent state)."""
    fields = {}
    for name, value in batch._asdict().items():
        axis = 0 if name in batch_major else 1
        fields[name] = jax.tree.map(
            lambda x, axis=axis: jax.lax.slice_in_dim(x, start, start + size, axis=axis), value
        )
    return type(batch)(**fields)


class AgentBase:
    mesh = None

    def _initial_core(self, n):
        return ()

    def _init_parts(self, key):
        """(learner, replay, actor): fresh learner, empty replay, reset envs."""
        learner_key, actor_key = jax.random.split(key)
        if jax.process_count() > 1:  # same learner everywhere, different actions per process
            actor_key = jax.random.fold_in(actor_key, jax.process_index())
        actor = initial_actor_state(self.env, self._initial_core(self.env.spec.num_envs), actor_key)
        learner = self.learner.init(learner_key, actor.obs)
        if self.mesh is None:
            return learner, self.replay.init(), actor
        learner = to_global(learner, self.mesh, P())  # replicated: same seed in every process
        return learner, self._replay_init(), actor

    def restart_actor(self, state, key):
        """New episodes for every env (after a resume: env states are not checkpointed)."""
        self.close()
        actor = initial_actor_state(self.env, self._initial_core(self.env.spec.num_envs), key)
        return state._replace(actor=actor)

    def close(self):
        """Stop background work (none by default)."""
