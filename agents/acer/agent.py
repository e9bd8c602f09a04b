"""The ACER system: env, network, trace replay and learner wired into a training iteration.

One iteration (ACER §4, Algorithm 1):
1. collect T steps from every env with the current policy, recording μ;
2. one on-policy update on those B traces, and write them to the replay;
3. Poisson(replay_ratio) off-policy updates on traces sampled uniformly from the replay.

Steps 1–2 are one jitted program (in XLA mode the envpool step runs inside it); each
off-policy update is another, with the learner state donated. Nothing syncs with the host
until the caller fetches the metrics, once per iteration.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.acer.actor import (
    ActorState,
    Rollout,
    initial_actor_state,
    make_host_rollout,
    make_select_action,
    make_xla_rollout,
)
from agents.acer.config import ACERConfig
from agents.acer.learner import ACERLearner, LearnerState, TraceBatch
from networks import ACERNetwork
from replay import TraceReplay

Array = jax.Array


class TrainState(NamedTuple):
    learner: LearnerState
    replay: Any  # replay.TraceReplayState
    actor: ActorState


class IterationOutput(NamedTuple):
    """Device arrays of one iteration; fetch them with one `jax.device_get`."""

    metrics: list  # one metrics dict per update (on-policy first)
    finished_return: Array  # [T, B]
    finished_length: Array  # [T, B]
    game_over: Array  # [T, B]


def _core_state_spec(lstm_size: int):
    if not lstm_size:
        return None
    sds = jax.ShapeDtypeStruct((lstm_size,), jnp.float32)
    return {"core_c": sds, "core_h": sds}


class ACERAgent:
    """Builds and runs ACER on a `VecEnv`. All learning maths is in `ACERLearner`."""

    def __init__(self, config: ACERConfig, env, seed: int = 0, replay_memory_limit=None):
        spec = env.spec
        if not spec.discrete:
            raise ValueError(
                f"ACER here is discrete; {spec.env_id} has a continuous action space "
                f"{spec.action_shape} (continuous ACER is a later issue)"
            )
        if config.num_envs != spec.num_envs:
            raise ValueError(f"config.num_envs={config.num_envs} but the env has {spec.num_envs}")
        self.config = config
        self.env = env
        self.seed = seed
        self.network = ACERNetwork(
            spec.obs_shape, spec.num_actions, config.hidden, config.lstm_size
        )
        self.learner = ACERLearner(config, self.network)
        A = spec.num_actions
        sds = jax.ShapeDtypeStruct
        self.replay = TraceReplay(
            num_envs=spec.num_envs,
            trace_len=config.trace_len,
            capacity=config.buffer_size,
            obs_shape=spec.obs_shape,
            obs_dtype=spec.obs_dtype,
            frame_stack=spec.frame_stack,
            step_spec={
                "first": sds((), jnp.bool_),
                "frame_reset": sds((), jnp.bool_),
                "action": sds((), jnp.int32),
                "mu": sds((A,), jnp.float32),
                "reward": sds((), jnp.float32),
                "discount": sds((), jnp.float32),
                "mask": sds((), jnp.float32),
            },
            trace_extras_spec=_core_state_spec(config.lstm_size),
            memory_limit_bytes=replay_memory_limit,
        )
        self.recurrent = bool(config.lstm_size)
        select_action = make_select_action(self.network, self.recurrent)
        self.select_action = select_action
        if env.has_xla:
            rollout = make_xla_rollout(env, select_action, config.trace_len, config.discount)

            def collect_and_learn(learner, replay, actor):
                actor, traj = rollout(learner.params, actor)
                learner, replay, metrics = self._learn_on_policy(learner, replay, traj)
                return learner, replay, actor, traj, metrics

            self._collect_and_learn = jax.jit(collect_and_learn, donate_argnums=(0, 1))
            self._host_rollout = None
        else:
            self._host_rollout = make_host_rollout(
                env, select_action, config.trace_len, config.discount
            )
            self._learn = jax.jit(self._learn_on_policy, donate_argnums=(0, 1))
        self._replay_update = jax.jit(self._replay_update_fn, donate_argnums=(0,))
        self.compile_s = 0.0

    # ----------------------------------------------------------------- pure pieces
    def _initial_core(self, n):
        return self.network.initial_state(n) if self.recurrent else ()

    def _learn_on_policy(self, learner: LearnerState, replay, traj: Rollout):
        batch = TraceBatch(
            obs=jnp.concatenate([traj.obs, traj.last_obs[None]], axis=0),
            first=jnp.concatenate([traj.steps["first"], traj.last_first[None]], axis=0),
            action=traj.steps["action"],
            mu=traj.steps["mu"],
            reward=traj.steps["reward"],
            discount=traj.steps["discount"],
            mask=traj.steps["mask"],
            core_state=traj.core_state,
        )
        learner, metrics = self.learner.update(learner, batch)
        extras = None
        if self.recurrent:
            extras = {"core_c": traj.core_state[0], "core_h": traj.core_state[1]}
        replay = self.replay.add(replay, traj.obs, traj.steps, extras)
        return learner, replay, metrics

    def _replay_update_fn(self, learner: LearnerState, replay):
        key, sub = jax.random.split(learner.key)
        sample = self.replay.sample(replay, sub, self.config.batch_size)
        T = self.config.trace_len
        s = sample.steps
        core = (sample.extras["core_c"], sample.extras["core_h"]) if self.recurrent else ()
        batch = TraceBatch(
            obs=sample.obs,
            first=s["first"],
            action=s["action"][:T],
            mu=s["mu"][:T],
            reward=s["reward"][:T],
            discount=s["discount"][:T],
            mask=s["mask"][:T],
            core_state=core,
        )
        learner, metrics = self.learner.update(learner._replace(key=key), batch)
        return learner, metrics

    # ----------------------------------------------------------------- host driver
    def init(self, key) -> TrainState:
        """Fresh learner, empty replay, reset envs."""
        learner_key, actor_key = jax.random.split(key)
        actor = initial_actor_state(self.env, self._initial_core(self.env.spec.num_envs), actor_key)
        learner = self.learner.init(learner_key, actor.obs)
        return TrainState(learner, self.replay.init(), actor)

    def restart_actor(self, state: TrainState, key) -> TrainState:
        """New episodes for every env (after a resume: env states are not checkpointed)."""
        actor = initial_actor_state(self.env, self._initial_core(self.env.spec.num_envs), key)
        return state._replace(actor=actor)

    def num_replay_updates(self, iteration: int, env_steps: int) -> int:
        """Poisson(replay_ratio), a pure function of (seed, iteration): resume-safe."""
        cfg = self.config
        if cfg.replay_ratio <= 0 or iteration < 1 or env_steps < cfg.start_train_at:
            return 0  # a trace becomes sampleable once the next one is written (iteration ≥ 1)
        return int(np.random.default_rng([self.seed, iteration]).poisson(cfg.replay_ratio))

    def compile(self, state: TrainState) -> float:
        """Ahead-of-time compile both programs; returns the seconds it took."""
        t0 = time.perf_counter()
        if self._host_rollout is None:
            self._collect_and_learn = self._collect_and_learn.lower(*state).compile()
        else:
            _, traj = jax.eval_shape(self._host_rollout, state.learner.params, state.actor)
            self._learn = self._learn.lower(state.learner, state.replay, traj).compile()
        self._replay_update = self._replay_update.lower(state.learner, state.replay).compile()
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def train_iteration(self, state: TrainState, iteration: int, env_steps: int):
        """Run one iteration; returns the new state and device-side outputs (no host sync)."""
        learner, replay, actor = state
        if self._host_rollout is None:
            learner, replay, actor, traj, metrics = self._collect_and_learn(learner, replay, actor)
        else:
            actor, traj = self._host_rollout(learner.params, actor)
            learner, replay, metrics = self._learn(learner, replay, traj)
        all_metrics = [metrics]
        for _ in range(self.num_replay_updates(iteration, env_steps)):
            learner, m = self._replay_update(learner, replay)
            all_metrics.append(m)
        out = IterationOutput(
            all_metrics, traj.finished_return, traj.finished_length, traj.game_over
        )
        return TrainState(learner, replay, actor), out

    def act_fn(self, greedy: bool):
        """`act(params, obs, first, core, key) -> (action, core)` for evaluation."""

        def act(params, obs, first, core, key):
            if self.recurrent:
                (logits, _), core = self.network.apply(params, obs[None], first[None], core)
                logits = logits[0]
            else:
                logits, _ = self.network.apply(params, obs)
            if greedy:
                action = jnp.argmax(logits, axis=-1)
            else:
                action = jax.random.categorical(key, logits)
            return action.astype(jnp.int32), core

        return jax.jit(act)
