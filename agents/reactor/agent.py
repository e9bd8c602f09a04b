"""The Reactor system: recurrent actor, prioritized sequence replay, learner, and
decoupled acting and learning (Gruslys et al. 2018, §3.5 "Parallelism").

Decoupled mode (the default): an actor thread steps envpool with a jitted recurrent policy,
T steps at a time, and hands each rollout (with its behaviour μ and the LSTM states at its
start) to the learner through a bounded queue. The learner, on the calling thread, writes the
rollout into the prioritized replay, runs the learning steps due, and publishes a copy of
its parameters, which the actor picks up for its next rollout. Acting and learning overlap
in time; the actor's policy is at most two rollouts stale, and Retrace/β-LOO correct for that
through the stored μ. The learner runs exactly one update per `env_steps_per_update` env
steps (a pure function of the step count, so it is resume-safe), which fixes the
acting-to-learning ratio; the queue makes the faster side wait.

Lock-step mode (`decoupled=False`) runs the same pieces one after the other on one thread:
deterministic, for debugging and tests.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from agents.base import AgentBase, make_trace_replay, replayed_steps, sample_key
from agents.parallel import (
    DATA,
    ROLLOUT_SPECS,
    P,
    abstract_rollout,
    check_divisible,
    local_replica,
    place_rollout,
    prioritized_replay_specs,
)
from agents.reactor.config import ReactorConfig
from agents.reactor.learner import ReactorLearner, ReactorLearnerState, SequenceBatch
from agents.rollout import (
    ActorOutput,
    make_host_rollout,
    make_xla_rollout,
)
from networks import ReactorNetwork, ReactorState
from replay import PrioritizedTraceReplay

_EXTRAS = ("policy_c", "policy_h", "q_c", "q_h")


class TrainState(NamedTuple):
    learner: ReactorLearnerState
    replay: object  # PrioritizedReplayState
    actor: object  # the ActorState that came with the latest rollout


class IterationOutput(NamedTuple):
    metrics: list
    finished_return: jax.Array
    finished_length: jax.Array
    game_over: jax.Array


def _state_to_extras(core: ReactorState) -> dict:
    return dict(zip(_EXTRAS, (*core.policy, *core.q), strict=True))


def _extras_to_state(extras: dict) -> ReactorState:
    return ReactorState(
        policy=(extras["policy_c"], extras["policy_h"]), q=(extras["q_c"], extras["q_h"])
    )


class ReactorAgent(AgentBase):
    on_policy_updates = 0  # every learning step samples the prioritized replay

    def __init__(
        self, config: ReactorConfig, env, seed: int = 0, replay_memory_limit=None, mesh=None
    ):
        spec = env.spec
        if not spec.discrete:
            raise ValueError(f"Reactor is discrete; {spec.env_id} has continuous actions")
        if config.num_envs != spec.num_envs * jax.process_count():
            raise ValueError(
                f"config.num_envs={config.num_envs} but the env has {spec.num_envs} envs "
                f"x {jax.process_count()} process(es)"
            )
        self.config, self.env, self.seed = config, env, seed
        self.mesh = mesh if mesh is not None and mesh.size > 1 else None
        self.shards = self.mesh.size if self.mesh is not None else 1
        check_divisible("num_envs", config.num_envs, self.shards)
        check_divisible("batch_size", config.batch_size, self.shards)
        self.network = ReactorNetwork(
            obs_shape=spec.obs_shape,
            num_actions=spec.num_actions,
            num_atoms=config.num_atoms,
            v_min=config.v_min,
            v_max=config.v_max,
            hidden=config.hidden,
            torso_out=config.torso_out,
            lstm_size=config.lstm_size,
            uniform_mix=config.uniform_mix,
        )
        self.learner = ReactorLearner(config, self.network)
        core = jax.ShapeDtypeStruct((config.lstm_size,), jnp.float32)
        base = make_trace_replay(
            spec,
            trace_len=config.trace_len,
            buffer_size=config.buffer_size,
            shards=self.shards,
            extras_spec={k: core for k in _EXTRAS},
            memory_limit=replay_memory_limit,
        )
        self.replay = PrioritizedTraceReplay(
            base, epsilon=config.priority_epsilon, neighbours=config.priority_neighbours
        )
        make = make_xla_rollout if env.has_xla else make_host_rollout
        rollout = make(env, self.select_action, config.trace_len, config.discount)
        self._rollout_fn = rollout
        self._rollout = jax.jit(rollout) if env.has_xla else rollout
        if self.mesh is None:
            self._add = jax.jit(self._add_fn, donate_argnums=(0,))
            self._update = jax.jit(self._update_fn, donate_argnums=(0, 1))
        else:
            rs = prioritized_replay_specs()
            shard = partial(jax.shard_map, mesh=self.mesh)
            self._add = jax.jit(
                shard(self._add_fn, in_specs=(rs, ROLLOUT_SPECS), out_specs=rs),
                donate_argnums=(0,),
            )
            self._update = jax.jit(
                shard(
                    partial(self._update_fn, axis_name=DATA),
                    in_specs=(P(), rs),
                    out_specs=(P(), rs, P()),
                ),
                donate_argnums=(0, 1),
            )
            self._replay_init = jax.jit(shard(self.replay.init, in_specs=(), out_specs=rs))
        self._published = None  # params the actor thread uses
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._actor_error: BaseException | None = None
        self.compile_s = 0.0
        self.wait_s = {"learner_waiting_for_actor": 0.0}

    # ------------------------------------------------------------------ pure pieces
    def select_action(self, params, obs, first, core, key) -> ActorOutput:
        out, core = self.network.apply(params, obs[None], first[None], core)
        probs = out.policy_probs[0]
        action = jax.random.categorical(key, jnp.log(probs)).astype(jnp.int32)
        return ActorOutput(action, probs, core)

    def _initial_core(self, n):
        return self.network.initial_state(n)

    def _add_fn(self, replay, traj):
        return self.replay.add(replay, traj.obs, traj.steps, _state_to_extras(traj.core_state))

    def _update_fn(self, learner: ReactorLearnerState, replay, axis_name=None):
        key, sub = sample_key(learner.key, axis_name)
        sample, info = self.replay.sample(replay, sub, self.config.batch_size // self.shards)
        batch = SequenceBatch(
            **replayed_steps(sample, self.config.trace_len),
            core_state=_extras_to_state(sample.extras),
            is_weight=info.is_weight,
        )
        learner, metrics, priorities = self.learner.update(
            learner._replace(key=key), batch, axis_name
        )
        replay = self.replay.update_priorities(replay, info.env_index, info.slot, priorities)
        return learner, replay, metrics

    # ------------------------------------------------------------------ host driver
    def init(self, key) -> TrainState:
        """Fresh learner, empty replay, reset envs."""
        return TrainState(*self._init_parts(key))

    def updates_due(self, env_steps: int) -> int:
        """Learner updates owed after `env_steps` env steps: a pure function of the count."""
        cfg = self.config
        if env_steps < cfg.start_train_at:
            return 0
        return math.floor((env_steps - cfg.start_train_at) / cfg.env_steps_per_update)

    def compile(self, state: TrainState) -> float:
        t0 = time.perf_counter()
        if self.env.has_xla:
            params = self._actor_params(state.learner.params)
            self._rollout = self._rollout.lower(params, state.actor).compile()
            _, traj = jax.eval_shape(self._rollout_fn, params, state.actor)
            if self.mesh is not None:
                traj = abstract_rollout(traj, self.mesh)
            self._add = self._add.lower(state.replay, traj).compile()
        self._update = self._update.lower(state.learner, state.replay).compile()
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def _actor_params(self, params):
        """The params the actor uses: this process's replica when data parallel."""
        return params if self.mesh is None else local_replica(params)

    def _actor_loop(self, actor):
        try:
            while not self._stop.is_set():
                actor, traj = self._rollout(self._published, actor)
                jax.block_until_ready(traj)
                while not self._stop.is_set():
                    try:
                        self._queue.put((actor, traj), timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as err:  # surfaced on the learner thread
            self._actor_error = err

    def _next_rollout(self, state: TrainState):
        if not self.config.decoupled:
            return self._rollout(self._actor_params(state.learner.params), state.actor)
        if self._thread is None:
            self._published = jax.tree.map(jnp.copy, self._actor_params(state.learner.params))
            self._queue = queue.Queue(maxsize=1)
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._actor_loop, args=(state.actor,), daemon=True, name="reactor-actor"
            )
            self._thread.start()
        t0 = time.perf_counter()
        while True:
            if self._actor_error is not None:
                raise RuntimeError("the actor thread failed") from self._actor_error
            try:
                item = self._queue.get(timeout=0.1)
                break
            except queue.Empty:
                continue
        self.wait_s["learner_waiting_for_actor"] += time.perf_counter() - t0
        return item

    def train_iteration(self, state: TrainState, iteration: int, env_steps: int):
        learner, replay, _ = state
        actor, traj = self._next_rollout(state)
        replay = self._add(replay, traj if self.mesh is None else place_rollout(traj, self.mesh))
        steps = self.config.trace_len * self.config.num_envs
        n_updates = self.updates_due(env_steps + steps) - self.updates_due(env_steps)
        if iteration < 1:
            n_updates = 0  # a sequence becomes sampleable once the next one is written
        metrics = []
        for _ in range(n_updates):
            learner, replay, m = self._update(learner, replay)
            metrics.append(m)
        if self.config.decoupled and n_updates:
            # A copy: the learner's own buffers are donated to the next update.
            self._published = jax.tree.map(jnp.copy, self._actor_params(learner.params))
        out = IterationOutput(metrics, traj.finished_return, traj.finished_length, traj.game_over)
        return TrainState(learner, replay, actor), out

    def act_fn(self, greedy: bool):
        def act(params, obs, first, core, key):
            out, core = self.network.apply(params, obs[None], first[None], core)
            if greedy:
                action = jnp.argmax(out.policy_probs[0], axis=-1)
            else:
                action = jax.random.categorical(key, jnp.log(out.policy_probs[0]))
            return action.astype(jnp.int32), core

        return jax.jit(act)

    def close(self):
        """Stop the actor thread (idempotent)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
            self._thread = None

    @property
    def bytes_per_transition(self) -> float:
        return self.replay.base.bytes_per_transition
