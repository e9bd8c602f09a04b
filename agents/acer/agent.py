"""The ACER agent: env, network, trace replay and learner on the shared seam (AgentBase).

Discrete actions: a categorical policy and Q(x, ·) (networks.ACERNetwork, ACERLearner).
Continuous actions (ACER §5): a diagonal Gaussian over normalised actions, which the env
receives clipped to [−1, 1] and scaled to its bounds as SAC and TD3 scale theirs, and a
stochastic dueling network critic (networks.GaussianSDNNetwork, ACERGaussianLearner); the
trace stores the unclipped sample and the Gaussian's statistics as μ. The loop below is the
same for both.

One iteration (ACER §4, Algorithm 1):
1. collect T steps from every env with the current policy, recording μ;
2. one on-policy update on those B traces, and write them to the replay (`absorb`);
3. Poisson(replay_ratio) off-policy updates on traces sampled uniformly from the replay.

Steps 2 and 3 are device programs with the learner and replay donated; in XLA mode step 1
is one too (envpool's step inside a `lax.scan`). Nothing syncs with the host until the
runner fetches the metrics, once per iteration.
"""

from __future__ import annotations

import numpy as np

from agents.acer import actor
from agents.acer.config import CONTINUOUS_ONLY, ACERConfig
from agents.acer.continuous import ACERGaussianLearner
from agents.acer.learner import METRICS, ACERLearner
from agents.core.actors import gaussian_actor
from agents.core.base import ACTOR_CRITIC_TUNABLE, AgentBase
from agents.core.config import ConfigError, flag
from agents.core.learning import TraceBatch
from agents.core.parallel import check_divisible
from networks import ACERNetwork, GaussianSDNNetwork


class ACERAgent(AgentBase):
    """ACER on a `VecEnv`. All learning maths is in `ACERLearner`."""

    name = "acer"
    metric_names = METRICS
    discrete_only = False
    supports_population = True  # tests/agents/test_population.py
    tunable = ACTOR_CRITIC_TUNABLE

    def __init__(self, config: ACERConfig, env, *, seed=0, mesh=None, replay_memory_limit=None):
        check_action_space(config, env.spec)
        super().__init__(config, env, seed=seed, mesh=mesh, replay_memory_limit=replay_memory_limit)
        if config.microbatch_traces:  # the on-policy update splits the fresh traces too
            check_divisible(
                "--num-envs per device", config.num_envs // self.num_devices,
                config.microbatch_traces, "--microbatch-traces",
            )  # fmt: skip

    @property
    def continuous(self) -> bool:
        return not self.env.spec.discrete

    def make_network(self, spec):
        cfg = self.config
        if not spec.discrete:
            dim = int(np.prod(spec.action_shape))
            return GaussianSDNNetwork(spec.obs_spec, dim, cfg.hidden, cfg.initial_log_std)
        return ACERNetwork(spec.obs_spec, spec.num_actions, cfg.hidden, cfg.lstm_size)

    def make_learner(self, network):
        if self.continuous:
            return ACERGaussianLearner(self.config, network, network.action_dim)
        return ACERLearner(self.config, network)

    def make_actor(self):
        if not self.continuous:
            return super().make_actor()
        spec, net = self.env.spec, self.network

        def policy_gaussian(params, obs, first, core):
            return net.apply(params, obs, method=net.policy), core

        low = np.asarray(spec.action_low, np.float32)
        high = np.asarray(spec.action_high, np.float32)
        return gaussian_actor(policy_gaussian, low, high, normalised=True)

    def policy_logits(self, params, obs, first, core):
        recurrent = bool(self.config.lstm_size)
        return actor.policy_logits(self.network, recurrent, params, obs, first, core)

    def initial_core(self, num_envs):
        return self.network.initial_state(num_envs) if self.config.lstm_size else ()

    def absorb(self, learner, replay, traj, axis_name=None, hparams=None):
        """The on-policy update on the fresh traces, then store them."""
        batch = TraceBatch.from_rollout(traj)
        learner, metrics, _ = self.learner.update(learner, batch, axis_name, hparams)
        learner, replay, _ = super().absorb(learner, replay, traj, axis_name)
        return learner, replay, [metrics]

    def updates_due(self, iteration: int, env_steps: int) -> int:
        """Poisson(replay_ratio), a pure function of (seed, iteration), or of the iteration
        alone with --replay-draw shared: resume-safe, and the same in every process, so all
        of them run the same collective updates."""
        cfg = self.config
        if cfg.replay_ratio <= 0 or iteration < 1 or env_steps < cfg.start_train_at:
            return 0  # a trace becomes sampleable once the next one is written (iteration ≥ 1)
        key = [iteration] if cfg.replay_draw == "shared" else [self.seed, iteration]
        return int(np.random.default_rng(key).poisson(cfg.replay_ratio))


def check_action_space(config: ACERConfig, spec) -> None:
    """The flags that apply to the env's action space only: a one-line ConfigError before
    anything is built (continuous ACER is feed-forward, on vector observations, with finite
    action bounds)."""
    if spec.discrete:
        for name in CONTINUOUS_ONLY:
            if getattr(config, name) is not None:
                raise ConfigError(
                    f"{flag(name)} applies to continuous actions only; {spec.env_id} has "
                    f"{spec.num_actions} discrete actions"
                )
        return
    if config.lstm_size:
        raise ConfigError(
            f"--lstm-size applies to discrete ACER only; continuous ACER on {spec.env_id} "
            "is feed-forward (use --lstm-size 0)"
        )
    if spec.pytree_obs or len(spec.obs_shape) != 1:
        raise ConfigError(
            f"continuous ACER takes vector observations; {spec.env_id} has observations of "
            f"shape {spec.obs_shape if not spec.pytree_obs else 'dict'}"
        )
    low, high = spec.action_low, spec.action_high
    if low is None or not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ConfigError(f"continuous ACER needs finite action bounds; {spec.env_id} has none")
