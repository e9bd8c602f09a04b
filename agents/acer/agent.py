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
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.acer.actor import make_select_action
from agents.acer.config import ACERConfig
from agents.acer.learner import ACERLearner, LearnerState, TraceBatch
from agents.base import AgentBase, make_trace_replay, replayed_steps, sample_key
from agents.parallel import (
    DATA,
    ROLLOUT_SPECS,
    P,
    abstract_rollout,
    check_divisible,
    local_replica,
    place_rollout,
    trace_replay_specs,
)
from agents.rollout import (
    ActorState,
    make_host_rollout,
    make_xla_rollout,
)
from networks import ACERNetwork

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


class ACERAgent(AgentBase):
    """Builds and runs ACER on a `VecEnv`. All learning maths is in `ACERLearner`."""

    on_policy_updates = 1  # per iteration, before the replay updates

    def __init__(self, config: ACERConfig, env, seed: int = 0, replay_memory_limit=None, mesh=None):
        """`mesh`: a 1-D mesh from `agents.parallel.make_mesh` for data parallelism; None or a
        single device keeps the plain jitted path."""
        spec = env.spec
        if not spec.discrete:
            raise ValueError(
                f"ACER here is discrete; {spec.env_id} has a continuous action space "
                f"{spec.action_shape} (continuous ACER is a later issue)"
            )
        procs = jax.process_count()
        if config.num_envs != spec.num_envs * procs:
            raise ValueError(
                f"config.num_envs={config.num_envs} but the env has {spec.num_envs} envs "
                f"x {procs} process(es)"
            )
        self.mesh = mesh if mesh is not None and mesh.size > 1 else None
        self.shards = self.mesh.size if self.mesh is not None else 1
        check_divisible("num_envs", config.num_envs, self.shards)
        check_divisible("batch_size", config.batch_size, self.shards)
        if config.microbatch_traces:
            for name in ("num_envs", "batch_size"):
                check_divisible(
                    f"{name} per device", getattr(config, name) // self.shards,
                    config.microbatch_traces, "microbatch traces",
                )  # fmt: skip
        self.config = config
        self.env = env
        self.seed = seed
        self.network = ACERNetwork(
            spec.obs_shape, spec.num_actions, config.hidden, config.lstm_size
        )
        self.learner = ACERLearner(config, self.network)
        self.replay = make_trace_replay(
            spec,
            trace_len=config.trace_len,
            buffer_size=config.buffer_size,
            shards=self.shards,
            extras_spec=_core_state_spec(config.lstm_size),
            memory_limit=replay_memory_limit,
        )
        self.recurrent = bool(config.lstm_size)
        select_action = make_select_action(self.network, self.recurrent)
        self.select_action = select_action
        if env.has_xla:
            rollout = make_xla_rollout(env, select_action, config.trace_len, config.discount)
            self._host_rollout = None
        else:
            rollout = make_host_rollout(env, select_action, config.trace_len, config.discount)
            self._host_rollout = rollout
        if self.mesh is None:
            if env.has_xla:

                def collect_and_learn(learner, replay, actor):
                    actor, traj = rollout(learner.params, actor)
                    learner, replay, metrics = self._learn_on_policy(learner, replay, traj)
                    return learner, replay, actor, traj, metrics

                self._collect_and_learn = jax.jit(collect_and_learn, donate_argnums=(0, 1))
            else:
                self._learn = jax.jit(self._learn_on_policy, donate_argnums=(0, 1))
            self._replay_update = jax.jit(self._replay_update_fn, donate_argnums=(0,))
        else:
            self._rollout_fn = rollout
            self._rollout = jax.jit(rollout) if env.has_xla else rollout
            rs = trace_replay_specs()
            shard = partial(jax.shard_map, mesh=self.mesh)
            self._learn = jax.jit(
                shard(
                    partial(self._learn_on_policy, axis_name=DATA),
                    in_specs=(P(), rs, ROLLOUT_SPECS),
                    out_specs=(P(), rs, P()),
                ),
                donate_argnums=(0, 1),
            )
            self._replay_update = jax.jit(
                shard(
                    partial(self._replay_update_fn, axis_name=DATA),
                    in_specs=(P(), rs),
                    out_specs=(P(), P()),
                ),
                donate_argnums=(0,),
            )
            self._replay_init = jax.jit(shard(self.replay.init, in_specs=(), out_specs=rs))
        self.compile_s = 0.0

    # ----------------------------------------------------------------- pure pieces
    def _initial_core(self, n):
        return self.network.initial_state(n) if self.recurrent else ()

    def _learn_on_policy(self, learner: LearnerState, replay, traj, axis_name=None):
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
        learner, metrics = self.learner.update(learner, batch, axis_name)
        extras = None
        if self.recurrent:
            extras = {"core_c": traj.core_state[0], "core_h": traj.core_state[1]}
        replay = self.replay.add(replay, traj.obs, traj.steps, extras)
        return learner, replay, metrics

    def _replay_update_fn(self, learner: LearnerState, replay, axis_name=None):
        key, sub = sample_key(learner.key, axis_name)
        sample = self.replay.sample(replay, sub, self.config.batch_size // self.shards)
        core = (sample.extras["core_c"], sample.extras["core_h"]) if self.recurrent else ()
        batch = TraceBatch(**replayed_steps(sample, self.config.trace_len), core_state=core)
        learner, metrics = self.learner.update(learner._replace(key=key), batch, axis_name)
        return learner, metrics

    # ----------------------------------------------------------------- host driver
    def init(self, key) -> TrainState:
        """Fresh learner, empty replay, reset envs."""
        return TrainState(*self._init_parts(key))

    def num_replay_updates(self, iteration: int, env_steps: int) -> int:
        """Poisson(replay_ratio), a pure function of (seed, iteration): resume-safe, and the
        same in every process, so all of them run the same collective updates."""
        cfg = self.config
        if cfg.replay_ratio <= 0 or iteration < 1 or env_steps < cfg.start_train_at:
            return 0  # a trace becomes sampleable once the next one is written (iteration ≥ 1)
        return int(np.random.default_rng([self.seed, iteration]).poisson(cfg.replay_ratio))

    def _collect_sharded(self, learner, actor):
        """Act on this process's first device with its replica of the params, then split the
        traces over the mesh (each device gets the traces of its own envs)."""
        actor, traj = self._rollout(local_replica(learner.params), actor)
        placed = place_rollout(traj, self.mesh)
        return actor, traj, placed

    def compile(self, state: TrainState) -> float:
        """Ahead-of-time compile the programs; returns the seconds it took."""
        t0 = time.perf_counter()
        if self.mesh is not None and self._host_rollout is None:
            params0 = local_replica(state.learner.params)
            _, traj = jax.eval_shape(self._rollout_fn, params0, state.actor)
            self._rollout = self._rollout.lower(params0, state.actor).compile()
            placed = abstract_rollout(traj, self.mesh)
            self._learn = self._learn.lower(state.learner, state.replay, placed).compile()
        elif self.mesh is not None:
            pass  # host-stepped envs: the sharded learner compiles on its first call
        elif self._host_rollout is None:
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
        if self.mesh is not None:
            actor, traj, placed = self._collect_sharded(learner, actor)
            learner, replay, metrics = self._learn(learner, replay, placed)
        elif self._host_rollout is None:
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

    @property
    def bytes_per_transition(self) -> float:
        return self.replay.bytes_per_transition

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
