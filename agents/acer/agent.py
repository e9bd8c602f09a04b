"""ACER as pure functions, `make(config, spec)` (agents/core/parts.py): the env's network,
the trace replay and the learner.

Discrete actions: a categorical policy and Q(x, ·) (networks.ACERNetwork, ACERLearner).
Continuous actions (ACER §5): a diagonal Gaussian over normalised actions, which the env
receives clipped to [−1, 1] and scaled to its bounds as SAC and TD3 scale theirs, and a
stochastic dueling network critic (networks.GaussianSDNNetwork, ACERGaussianLearner); the
trace stores the unclipped sample and the Gaussian's statistics as μ. The iteration is the
same for both.

One iteration (ACER §4, Algorithm 1):
1. collect T steps from every env with the current policy, recording μ;
2. one on-policy update on those B traces (`learn`), and write them to the replay;
3. Poisson(replay_ratio) off-policy updates on traces sampled uniformly from the replay
   (`updates_due`, drawn on the host: a pure function of the seed and iteration).
"""

from __future__ import annotations

import types

import numpy as np

from agents.acer.config import CONTINUOUS_ONLY, ACERConfig
from agents.acer.continuous import ACERGaussianLearner
from agents.acer.learner import METRICS, ACERLearner
from agents.core.actors import categorical_actor, gaussian_actor
from agents.core.config import ConfigError, flag
from agents.core.hooks import plugged_torso
from agents.core.learning import TraceBatch
from agents.core.parallel import check_divisible
from agents.core.parts import AgentParts, ReplayParts, no_core, reset_with
from agents.core.rollout import time_major
from networks import ACERNetwork, GaussianSDNNetwork


def make(config: ACERConfig, spec) -> AgentParts:
    """ACER's parts for `config` (agents/acer/config.py) on an env of `spec`."""
    check_action_space(config, spec)
    if spec.discrete:
        net = ACERNetwork(
            spec.obs_spec, spec.num_actions, config.hidden, config.lstm_size,
            plugged=plugged_torso(config, spec.obs_spec) if config.network else None,
            cnn=config.cnn,
        )  # fmt: skip
        learner = ACERLearner(config, net)
        recurrent = bool(config.lstm_size)
        actor = categorical_actor(
            lambda params, obs, first, core: policy_logits(net, recurrent, params, obs, first,
                                                           core)
        )  # fmt: skip
    else:
        if config.network is not None:
            raise ConfigError("--network: discrete actions only (not continuous ACER's SDN)")
        dim = int(np.prod(spec.action_shape))
        net = GaussianSDNNetwork(spec.obs_spec, dim, config.hidden, config.initial_log_std)
        learner = ACERGaussianLearner(config, net, dim)
        low = np.asarray(spec.action_low, np.float32)
        high = np.asarray(spec.action_high, np.float32)
        actor = gaussian_actor(
            lambda params, obs, first, core: (net.apply(params, obs, method=net.policy), core),
            low, high, normalised=True,
        )  # fmt: skip
    select_action, act = actor

    def update(state, batch, hyper, axis_name=None):
        """One ACER update on a batch of traces: (state, metrics, priorities)."""
        return learner.update(state, batch, axis_name, hyper.values or None)

    def learn(state, rollout, hyper, axis_name=None):
        """The on-policy update on the iteration's fresh traces."""
        state, metrics, _ = update(state, TraceBatch.from_rollout(rollout), hyper, axis_name)
        return state, metrics

    def updates_due(iteration: int, env_steps: int, seed: int) -> int:
        """Poisson(replay_ratio), a pure function of (seed, iteration), or of the iteration
        alone with --replay-draw shared: resume-safe, and the same in every process, so all
        of them run the same collective updates."""
        if config.replay_ratio <= 0 or iteration < 1 or env_steps < config.start_train_at:
            return 0  # a trace becomes sampleable once the next one is written (iteration ≥ 1)
        key = [iteration] if config.replay_draw == "shared" else [seed, iteration]
        return int(np.random.default_rng(key).poisson(config.replay_ratio))

    def check_devices(num_devices: int) -> None:
        if config.microbatch_traces:  # the on-policy update splits the fresh traces too
            check_divisible(
                "--num-envs per device", config.num_envs // num_devices,
                config.microbatch_traces, "--microbatch-traces",
            )  # fmt: skip

    return AgentParts(
        init=learner.init,
        act=select_action,
        acting=lambda state: state.params,
        learn=learn,
        evaluate=act,
        reset_params=reset_with(learner),
        metric_names=METRICS,
        initial_core=net.initial_state if spec.discrete and config.lstm_size else no_core,
        replay=ReplayParts(wrap=lambda replay: replay, update=update, updates_due=updates_due),
        check_devices=check_devices,
        modules=types.SimpleNamespace(network=net, learner=learner),
    )


def policy_logits(network, recurrent: bool, params, obs, first, core):
    """`(logits [B, A], core)` of ACER's discrete network at one batched step (the
    categorical sampling is shared: `agents.core.actors.categorical_actor`)."""
    if recurrent:
        (logits, _), core = network.apply(params, time_major(obs), first[None], core)
        return logits[0], core
    logits, _ = network.apply(params, obs)
    return logits, core


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
