"""The ACER agent: env, network, trace replay and learner on the shared seam (AgentBase).

One iteration (ACER §4, Algorithm 1):
1. collect T steps from every env with the current policy, recording μ;
2. one on-policy update on those B traces, and write them to the replay (`absorb`);
3. Poisson(replay_ratio) off-policy updates on traces sampled uniformly from the replay.

Steps 2 and 3 are device programs with the learner and replay donated; in XLA mode step 1
is one too (envpool's step inside a `lax.scan`). Nothing syncs with the host until the
runner fetches the metrics, once per iteration.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agents.acer import actor
from agents.acer.config import ACERConfig
from agents.acer.learner import METRICS, ACERLearner
from agents.base import AgentBase
from agents.learning import TraceBatch
from agents.parallel import check_divisible
from networks import ACERNetwork


class ACERAgent(AgentBase):
    """ACER on a `VecEnv`. All learning maths is in `ACERLearner`."""

    name = "acer"
    metric_names = METRICS

    def __init__(self, config: ACERConfig, env, *, seed=0, mesh=None, replay_memory_limit=None):
        super().__init__(config, env, seed=seed, mesh=mesh, replay_memory_limit=replay_memory_limit)
        if config.microbatch_traces:  # the on-policy update splits the fresh traces too
            check_divisible(
                "--num-envs per device", config.num_envs // self.num_devices,
                config.microbatch_traces, "--microbatch-traces",
            )  # fmt: skip

    def make_network(self, spec):
        cfg = self.config
        return ACERNetwork(spec.obs_spec, spec.num_actions, cfg.hidden, cfg.lstm_size)

    def make_learner(self, network):
        return ACERLearner(self.config, network)

    def policy_logits(self, params, obs, first, core):
        recurrent = bool(self.config.lstm_size)
        return actor.policy_logits(self.network, recurrent, params, obs, first, core)

    def initial_core(self, num_envs):
        return self.network.initial_state(num_envs) if self.config.lstm_size else ()

    def absorb(self, learner, replay, traj, axis_name=None):
        """The on-policy update on the fresh traces, then store them."""
        learner, metrics, _ = self.learner.update(learner, TraceBatch.from_rollout(traj), axis_name)
        learner, replay, _ = super().absorb(learner, replay, traj, axis_name)
        return learner, replay, [metrics]

    def updates_due(self, iteration: int, env_steps: int) -> int:
        """Poisson(replay_ratio), a pure function of (seed, iteration): resume-safe, and the
        same in every process, so all of them run the same collective updates."""
        cfg = self.config
        if cfg.replay_ratio <= 0 or iteration < 1 or env_steps < cfg.start_train_at:
            return 0  # a trace becomes sampleable once the next one is written (iteration ≥ 1)
        return int(np.random.default_rng([self.seed, iteration]).poisson(cfg.replay_ratio))

    bench_compare = "replay_ratio=0,4"  # experiments.bench_throughput's default comparison

    def network_costs(self) -> dict:
        """The cost model of experiments.bench_throughput: per env step ACER runs
        (1 + replay_ratio)·(T+1)/T forward+backward passes (one on-policy and replay_ratio
        replayed traces of T+1 observations per T steps), as many forward passes of the
        averaged network with the trust region, and one acting forward pass. Returns
        name -> (make(batch) -> (jitted fn, args), passes per env step). Feed-forward, array
        observations only."""
        cfg, spec, net = self.config, self.env.spec, self.network
        if cfg.lstm_size or spec.pytree_obs:
            return {}
        params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, *spec.obs_shape), spec.obs_dtype))
        opt = self.learner.optimizer
        opt_state = opt.init(params)

        def obs(b):
            x = jax.random.randint(jax.random.PRNGKey(b), (b, *spec.obs_shape), 0, 255)
            return x.astype(spec.obs_dtype)

        def train_step(p, s, o):
            def loss(p):
                logits, q = net.apply(p, o)
                return jnp.mean(jax.nn.log_softmax(logits)[:, 0]) + jnp.mean(q**2)

            u, s = opt.update(jax.grad(loss)(p), s, p)
            return optax.apply_updates(p, u), s

        fwd, train = jax.jit(net.apply), jax.jit(train_step)
        n_train = (1 + cfg.replay_ratio) * (cfg.trace_len + 1) / cfg.trace_len
        n_fwd = 1 + (n_train if cfg.trust_region else 0)
        return {
            "forward": (lambda b: (fwd, (params, obs(b))), n_fwd),
            "forward+backward+adam": (lambda b: (train, (params, opt_state, obs(b))), n_train),
        }
