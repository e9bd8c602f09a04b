"""The Reactor agent on the shared seam (AgentBase): recurrent actor, prioritized sequence
replay, learner, and decoupled acting and learning (Gruslys et al. 2018, §3.5).

Decoupled mode (the default): an actor thread steps envpool with the jitted recurrent policy,
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

import queue
import threading
import time

import jax
import jax.numpy as jnp

from agents.core.base import ACTOR_CRITIC_TUNABLE, AgentBase
from agents.core.config import module_from_config
from agents.core.learning import updates_owed
from agents.core.programs import copy_tree
from agents.core.rollout import time_major
from agents.reactor.config import ReactorConfig
from agents.reactor.learner import METRICS, ReactorLearner
from networks import ReactorNetwork
from replay import PrioritizedTraceReplay


class ReactorAgent(AgentBase):
    name = "reactor"
    metric_names = METRICS
    supports_population = True  # lock-step only; tests/agents/test_population.py
    tunable = ACTOR_CRITIC_TUNABLE

    def population_conflict(self) -> str | None:
        if self.config.decoupled:
            return (
                "a population acts and learns in lock-step (one program for every member); "
                "add --no-decoupled"
            )
        return None

    def __init__(self, config: ReactorConfig, env, *, seed=0, mesh=None, replay_memory_limit=None):
        super().__init__(config, env, seed=seed, mesh=mesh, replay_memory_limit=replay_memory_limit)
        self._published = None  # params the actor thread uses
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._actor_error: BaseException | None = None
        self.wait_s = {"learner_waiting_for_actor": 0.0}

    # ------------------------------------------------------------------ hooks
    def make_network(self, spec):
        return module_from_config(
            ReactorNetwork, self.config, obs_spec=spec.obs_spec, num_actions=spec.num_actions
        )

    def make_learner(self, network):
        return ReactorLearner(self.config, network)

    def make_replay(self, trace_replay):
        cfg = self.config
        return PrioritizedTraceReplay(
            trace_replay, epsilon=cfg.priority_epsilon, neighbours=cfg.priority_neighbours
        )

    def policy_logits(self, params, obs, first, core):
        """The log of the uniform-mixed policy (sampling from it samples the mixture)."""
        out, core = self.network.apply(params, time_major(obs), first[None], core)
        return jnp.log(out.policy_probs[0]), core

    def initial_core(self, num_envs):
        return self.network.initial_state(num_envs)

    def updates_due(self, iteration: int, env_steps: int) -> int:
        """Learner updates owed by this iteration's env steps (a sequence becomes sampleable
        once the next one is written, so none in iteration 0)."""
        cfg = self.config
        return updates_owed(
            iteration, env_steps, self.steps_per_iteration, start_train_at=cfg.start_train_at,
            updates_per_env_step=1.0 / cfg.env_steps_per_update,
        )  # fmt: skip

    @property
    def host_driven(self) -> str | None:
        if self.config.decoupled:
            return "--decoupled acts in a thread of its own"
        return super().host_driven

    # ------------------------------------------------------------------ decoupled acting
    def _actor_loop(self, actor):
        try:
            while not self._stop.is_set():
                actor, traj = self.rollout.run(self._published, actor)
                jax.block_until_ready(traj)
                while not self._stop.is_set():
                    try:
                        self._queue.put((actor, traj), timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as err:  # surfaced on the learner thread
            self._actor_error = err

    def collect(self, state):
        if not self.config.decoupled:
            return super().collect(state)
        if self._thread is None:
            self._published = copy_tree(self.acting_params(state.learner))
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
                actor, traj = self._queue.get(timeout=0.1)
                break
            except queue.Empty:
                continue
        self.wait_s["learner_waiting_for_actor"] += time.perf_counter() - t0
        return actor, traj, self.rollout.place(traj)

    def after_learning(self, learner, num_updates: int) -> None:
        if self.config.decoupled and num_updates:
            # A copy: the learner's own buffers are donated to the next update.
            self._published = copy_tree(self.acting_params(learner))

    def close(self):
        """Stop the actor thread (idempotent)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=30)
            self._thread = None
