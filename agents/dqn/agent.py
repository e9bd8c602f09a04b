"""The DQN agent on the shared seam (AgentBase): ε-greedy actor (or NoisyNet's, --noisy), trace
replay with a look-ahead of n − 1 steps (uniform or prioritized), value learner.

One iteration: collect `trace_len` steps of every env with ε-greedy on the online network,
store them (`absorb`, which also counts the env steps that drive ε), then run the updates
owed (`updates_due`: replay_ratio transitions learnt per env step, as rlpyt). ε is a pure
function of the env steps the learner has absorbed, which the checkpoint holds, so a resumed
run explores as the original would have.

Why traces with a look-ahead rather than single transitions: a sampled trace of T steps
comes with the n − 1 steps after it (`replay.TraceReplay`'s `lookahead`), so all T
transitions get full n-step targets, the online pass over them also gives double Q's
selections, and frames are stored once. With T = 1 it is transition replay (per-transition
priorities); the presets use T = 4, which costs (2n + T − 1)/T forward passes per learnt
transition instead of 2n, at the price of learning 4 consecutive transitions together.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from agents.core.actors import epsilon_greedy_actor, linear_epsilon, noisy_q_actor
from agents.core.base import AgentBase, window_replay
from agents.core.config import module_from_config
from agents.core.learning import updates_owed
from agents.dqn.config import DQNConfig
from agents.dqn.learner import METRICS, DQNLearner, dqn_optimizer
from networks import QNetwork
from replay import TraceReplay


class DQNAgent(AgentBase):
    name = "dqn"
    metric_names = METRICS
    # ε comes from the learner's own env-step count and the update counts are a function of
    # the step count: nothing reads the seed. R2D1 inherits both (tests/agents/test_population.py).
    supports_population = True
    tunable: ClassVar[dict[str, tuple[float, float]]] = {"lr": (1e-7, 1.0), "discount": (0.5, 1.0)}
    # --prioritized: a new trace's priority. Schaul et al. 2016 (Algorithm 1, line 6) give
    # every new transition the largest priority so far, so that each is replayed at least
    # once; R2D1 overrides it.
    new_traces_at_max: ClassVar[bool] = True

    def __init__(self, config: DQNConfig, env, *, seed=0, mesh=None, replay_memory_limit=None):
        super().__init__(config, env, seed=seed, mesh=mesh, replay_memory_limit=replay_memory_limit)

    # ------------------------------------------------------------------ hooks
    def make_network(self, spec):
        cfg = self.config
        atoms = ()
        if cfg.distributional:
            atoms = tuple(float(x) for x in jnp.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms))
        return module_from_config(
            QNetwork, cfg, obs_spec=spec.obs_spec, num_actions=spec.num_actions,
            num_atoms=cfg.num_atoms if cfg.distributional else 0, atoms=atoms,
        )  # fmt: skip

    def make_learner(self, network):
        return DQNLearner(self.config, network, dqn_optimizer)

    @property
    def noisy(self) -> bool:
        """--noisy (DQN's flag; R2D1, built on this agent, has no NoisyNet)."""
        return getattr(self.config, "noisy", False)

    def make_actor(self):
        if self.noisy:
            return noisy_q_actor(self.noisy_q_values, self.config.eval_epsilon)
        return epsilon_greedy_actor(self.q_values, self.config.eval_epsilon)

    def q_values(self, params, obs, first, core):
        return self.network.apply(params, obs).q_values, core

    def noisy_q_values(self, params, obs, noise_key):
        return self.network.apply(params, obs, noise_key=noise_key).q_values

    def epsilon(self, env_steps):
        """ε of the training actor after `env_steps` env steps (scalar, or `[num_envs]`); 0
        with --noisy."""
        cfg = self.config
        if self.noisy:
            return jnp.zeros_like(jnp.asarray(env_steps, jnp.float32))
        return linear_epsilon(
            env_steps, cfg.eps_start, cfg.eps_end, cfg.eps_decay_steps, cfg.eps_decay_start
        )

    def policy_params(self, learner):
        return learner.params, self.epsilon(learner.env_steps)

    def make_replay(self, trace_replay: TraceReplay):
        return window_replay(trace_replay, self.config, new_at_max=self.new_traces_at_max)

    def absorb(self, learner, replay, traj, axis_name=None, hparams=None):
        learner, replay, metrics = super().absorb(learner, replay, traj, axis_name)
        learner = learner._replace(env_steps=learner.env_steps + self.steps_per_iteration)
        return learner, replay, metrics

    def replay_update(self, learner, replay, axis_name=None, hparams=None):
        """AgentBase's replay update, logging the acting ε of the learner's env steps."""
        epsilon = jnp.mean(self.epsilon(learner.env_steps))
        learner, replay, metrics = super().replay_update(learner, replay, axis_name, hparams)
        return learner, replay, {**metrics, "epsilon": epsilon}

    def updates_due(self, iteration: int, env_steps: int) -> int:
        """Updates owed by this iteration's env steps: replay_ratio transitions learnt per env
        step, from `start_train_at` on, once a trace and its look-ahead can be sampled. A pure
        function of the step count (resume-safe, the same in every process)."""
        cfg = self.config
        return updates_owed(
            iteration, env_steps, self.steps_per_iteration, start_train_at=cfg.start_train_at,
            updates_per_env_step=self.updates_per_env_step(),
            warmup_iterations=1 + (cfg.lookback + cfg.lookahead) // cfg.trace_len,
        )  # fmt: skip

    def updates_per_env_step(self) -> float:
        cfg = self.config
        return cfg.replay_ratio / (cfg.batch_size * cfg.learn_len)
