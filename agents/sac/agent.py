"""SAC as pure functions, `make(config, spec)` over the off-policy seam's `build`
(agents/core/offpolicy.py): networks, actor and learner; continuous or discrete by the env's
action space.

One iteration: collect `trace_len` steps of every env (uniformly random actions until
`start_train_at`, then a ~ π), store them, then run num_envs·trace_len·update_to_data
updates (one scanned program where the host drives).

Recurrent mode (--recurrent; R2D2, Kapturowski et al. 2019, ICLR): the networks have LSTM
cores (networks.sac.RecurrentPolicy / RecurrentQEnsemble) and acting carries their state
(`networks.sac.RecurrentSACState`), stepping the critics' core too so that its state can be
stored. Each core is fed the previous action (in [−1, 1] for continuous actions: the actor
writes the action it takes into the state itself, so that evaluation, whose loop sees the
env's scaled action, feeds the same) and the previous reward (`AgentParts.feedback`). The
replay stores the state at every trace's start and is sampled in windows of burn-in +
sequence + n − 1 steps starting at a trace (`sample_sequences`), learnt by
agents/sac/recurrent.py; after each update the states it recomputed are written back
(`after_update`, --refresh-stored-state).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from agents import losses
from agents.core.actors import epsilon_greedy
from agents.core.config import ConfigError
from agents.core.hooks import plugged_torso
from agents.core.learning import TraceBatch, at_steps
from agents.core.offpolicy import build, observation, per_beta, step_position
from agents.core.parts import AgentParts, no_core
from agents.core.rollout import ActorOutput, time_major
from agents.sac.config import SACConfig
from agents.sac.learner import METRICS, NOISE_SALT, SACLearner
from agents.sac.prediction import METRICS as PREDICTION_METRICS
from agents.sac.recurrent import RecurrentSACLearner
from networks.noisy import clear_noise, resample_noise
from networks.sac import (
    PolicyMLP,
    QEnsemble,
    RecurrentPolicy,
    RecurrentQEnsemble,
    RecurrentSACState,
    obs_torso,
)


def make(config: SACConfig, spec) -> AgentParts:
    """SAC's parts for `config` (agents/sac/config.py) on an env of `spec`."""
    if config.recurrent and config.network is not None:
        raise ConfigError("--network: not with --recurrent (its cores have their own torso)")
    if config.recurrent and (spec.obs_shape is None or len(spec.obs_shape) != 1):
        kind = "dict" if spec.obs_shape is None else f"shape {spec.obs_shape}"
        raise ConfigError(
            f"--recurrent takes vector observations; {spec.env_id} has observations of {kind}"
        )
    if config.q_only and not spec.discrete:
        raise ConfigError(f"--q-only applies to discrete actions only; {spec.env_id} has none")
    if config.prediction and (spec.obs_shape is None or len(spec.obs_shape) != 1):
        kind = "dict" if spec.obs_shape is None else f"shape {spec.obs_shape}"
        raise ConfigError(
            f"--prediction reconstructs vector observations; {spec.env_id} has observations of "
            f"{kind}"
        )
    if spec.privileged_obs:
        given = [
            flag for flag, on in (("--network", config.network is not None),
                                  ("--rnd-coef", config.rnd_coef > 0),
                                  ("--icm-coef", config.icm_coef > 0)) if on
        ]  # fmt: skip
        if given:
            raise ConfigError(
                f"{given[0]}: not with --privileged-obs (it would read the privileged "
                "dimensions of the observations)"
            )
    actor_net, critic_net = networks(config, spec)
    cls = RecurrentSACLearner if config.recurrent else SACLearner
    learner = cls(config, actor_net, critic_net, spec)
    recurrent = config.recurrent

    def policy(params, obs, first, core, noise_key=None):
        """The actor's outputs at one batched step `[B, ...]` and the next core state (the
        critics' core stepped too when recurrent; the previous action is set by the
        caller). --noisy: under a fresh draw from `noise_key`, or the means when None."""
        if config.noisy:
            params = acting_noise(params, noise_key)
        x = observation(config, obs, params.obs_stats)
        if not recurrent:
            return actor_net.apply(params.actor, x), core
        x, f = time_major(x), first[None]
        out, actor_core = actor_net.apply(params.actor, x, f, core.actor)
        _, critic_core = critic_net.apply(params.critic, x, f, core.critic, method="unroll")
        return jax.tree.map(lambda y: y[0], out), RecurrentSACState(actor_core, critic_core)

    def record_action(core, action):
        """The action taken becomes the cores' previous-action input (recurrent)."""
        if not recurrent:
            return core

        def record(c):
            return c._replace(prev_action=jnp.asarray(action, c.prev_action.dtype))

        return RecurrentSACState(record(core.actor), record(core.critic))

    if config.q_only:
        actor = q_only_actor(config, critic_net, spec.num_actions)
    elif spec.discrete:
        actor = discrete_actor(policy, record_action)
    else:
        actor = continuous_actor(policy, record_action, learner.low, learner.high)
    return build(
        config, spec, "sac", learner, actor,
        METRICS + (PREDICTION_METRICS if config.prediction else ()),
        sample=functools.partial(sample_sequences, config) if recurrent else None,
        after_update=functools.partial(after_update, config, learner),
        acting_critic=recurrent or config.q_only,
        initial_core=learner.initial_state if recurrent else no_core,
        feedback=feed_reward if recurrent else None,
    )  # fmt: skip


def acting_noise(params, key):
    """--noisy: the acting networks (`ActingParams`) under a fresh draw from `key`, or their
    means when None (evaluation)."""
    if key is None:
        return params._replace(actor=clear_noise(params.actor), critic=clear_noise(params.critic))
    k_actor, k_critic = jax.random.split(jax.random.fold_in(key, NOISE_SALT))
    return params._replace(
        actor=resample_noise(params.actor, k_actor), critic=resample_noise(params.critic, k_critic)
    )


def networks(config: SACConfig, spec):
    """(actor, critic ensemble): MLPs (after an encoder each for images and dict
    observations, `networks.sac.obs_torso`), or with --recurrent LSTM cores fed the previous
    action and reward (vector observations); a categorical or squashed-Gaussian actor by the
    action space. Each reads the observation without its privileged dimensions
    (--privileged-obs); with --prediction the feed-forward critics' torso ends in a ReLU
    layer of width hidden[0], their representation (with --network: the plug-in's
    features)."""
    discrete = spec.discrete
    size = spec.num_actions if discrete else int(np.prod(spec.action_shape))
    keep = spec.visible_obs  # without the privileged dimensions (--privileged-obs)
    noisy = config.noisy_std if config.noisy else 0.0
    if config.recurrent:
        common = dict(
            action_dim=size, discrete=discrete, hidden=config.hidden, keep=keep, noisy_std=noisy
        )
        if discrete:
            actor = RecurrentPolicy(size, **common, lstm_size=config.lstm_size, head="categorical")
        else:
            actor = RecurrentPolicy(
                size, **common, lstm_size=config.lstm_size, log_std_min=config.log_std_min,
                log_std_max=config.log_std_max,
            )  # fmt: skip
        return actor, RecurrentQEnsemble(config.num_critics, **common, lstm_size=config.lstm_size)
    plugged = plugged_torso(config, spec.obs_spec) if config.network else None
    clone = None if plugged is None else plugged.clone
    width = config.hidden[0] if config.prediction else 0  # the critics' representation
    torsos = (
        {"torso": obs_torso(spec.obs_spec, clone, keep)},
        {"torso": obs_torso(spec.obs_spec, clone, keep, width)},
    )
    if discrete:
        actor = PolicyMLP(size, config.hidden, head="categorical", noisy_std=noisy, **torsos[0])
        return actor, QEnsemble(
            config.num_critics, config.hidden, size, noisy_std=noisy, **torsos[1]
        )
    actor = PolicyMLP(
        size, config.hidden, "gaussian", config.log_std_min, config.log_std_max,
        noisy_std=noisy, **torsos[0],
    )  # fmt: skip
    return actor, QEnsemble(config.num_critics, config.hidden, 0, noisy_std=noisy, **torsos[1])


def continuous_actor(policy, record_action, low, high):
    """(select_action, act) of the squashed Gaussian on `ActingParams`: a ~ tanh(N(mean,
    σ²)) scaled to [low, high], uniform on the box while `explore`; μ = {"logp", "pre_tanh"}."""

    def select_action(params, obs, first, core, key):
        explore = params.explore
        k_pi, k_uniform = jax.random.split(key)
        (mean, log_std), core = policy(params, obs, first, core, key)
        u = mean + jnp.exp(log_std) * jax.random.normal(k_pi, mean.shape, mean.dtype)
        logp = losses.tanh_gaussian_log_prob(u, mean, log_std, low=low, high=high)
        # Before start_train_at: uniform actions on the box (density 1/Π(high − low)).
        a_uniform = jax.random.uniform(k_uniform, mean.shape, mean.dtype, -1.0, 1.0)
        u_uniform = jnp.arctanh(jnp.clip(a_uniform, -1.0 + 1e-6, 1.0 - 1e-6))
        logp_uniform = jnp.full(logp.shape, -float(np.sum(np.log(high - low))))
        u = jnp.where(explore, u_uniform, u)
        action = jnp.where(explore, a_uniform, jnp.tanh(u))
        logp = jnp.where(explore, logp_uniform, logp)
        mu = {"logp": logp, "pre_tanh": u}
        core = record_action(core, action)
        return ActorOutput(action, mu, core, losses.scale_action(action, low, high))

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            (mean, log_std), core = policy(params, obs, first, core)
            if not greedy:
                mean = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
            action = jnp.tanh(mean)
            return losses.scale_action(action, low, high), record_action(core, action)

        return act_fn

    return select_action, act


def discrete_actor(policy, record_action):
    """(select_action, act) of the categorical policy on `ActingParams`: uniform while
    `explore`; μ = the probabilities."""

    def select_action(params, obs, first, core, key):
        logits, core = policy(params, obs, first, core, key)
        logits = jnp.where(params.explore, jnp.zeros_like(logits), logits)  # uniform at first
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        core = record_action(core, action)
        return ActorOutput(action, jax.nn.softmax(logits), core)

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            logits, core = policy(params, obs, first, core)
            a = jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)
            a = a.astype(jnp.int32)
            return a, record_action(core, a)

        return act_fn

    return select_action, act


def q_only_actor(config, critic_net, num_actions: int):
    """(select_action, act) of --q-only on `ActingParams`: ε-greedy (--q-only-epsilon) on
    the mean of the critics' Q values, uniform while `explore`; μ = the ε-greedy
    probabilities. Evaluation: greedy, or ε-greedy when sampled."""
    eps = config.q_only_epsilon

    def q_values(params, obs, key=None):
        if config.noisy:  # a fresh draw when acting, the means in evaluation
            params = acting_noise(params, key)
        x = observation(config, obs, params.obs_stats)
        return jnp.mean(critic_net.apply(params.critic, x), 0)  # [B, A]

    def probabilities(q, epsilon):  # the ε-greedy policy's `[B, A]`: μ for the replay
        greedy = jax.nn.one_hot(jnp.argmax(q, -1), num_actions, dtype=q.dtype)
        return epsilon / num_actions + (1.0 - epsilon) * greedy

    def select_action(params, obs, first, core, key):
        k_noise, k_action = jax.random.split(key)
        q = q_values(params, obs, k_noise)
        epsilon = jnp.where(params.explore, 1.0, eps)  # uniform before start_train_at
        action = epsilon_greedy(q, epsilon, k_action)
        return ActorOutput(action, probabilities(q, epsilon), core)

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            q = q_values(params, obs)
            if greedy:
                return jnp.argmax(q, -1).astype(jnp.int32), core
            return epsilon_greedy(q, eps, key), core

        return act_fn

    return select_action, act


def sample_sequences(config, replay, replay_state, learner, key, batch_size, axis_name=None):
    """Recurrent: B windows of burn-in + seq_len + n − 1 steps, each starting `burn_in` steps
    before a drawn trace (uniformly, or by priority with --prioritized: a sequence's priority
    is its mean |δ| over the learnt steps, agents/sac/recurrent.py), with the state stored
    there: (TraceBatch, info, zero offsets). Importance weights as the feed-forward
    sampling's (`per_beta`)."""
    sample = replay.sample(replay_state, key, batch_size, axis_name=axis_name)
    batch = TraceBatch.from_sample(sample, replay.window_len)
    if config.prioritized:
        batch = batch._replace(is_weight=batch.is_weight ** per_beta(config, learner.env_steps))
    return batch, sample.info, jnp.zeros((batch_size,), jnp.int32)


def after_update(config, learner, replay, replay_state, state, batch, info, offset, computed=()):
    """--overwrite-mu: the stored behaviour log-probs (continuous) or probabilities
    (discrete) of the window's steps become the updated policy's. Recurrent with
    --refresh-stored-state: the states `computed` by the update's unroll (leaves `[M, B,
    ...]`, at window positions T, 2T, .., burn_in + seq_len) become the stored states of the
    traces starting there: slots k − burn_in/T + m, m = 1 .. M, of a window sampled at slot k
    (agents/sac/recurrent.py)."""
    if config.recurrent:
        if not config.refresh_stored_state:
            return replay_state
        m = jax.tree.leaves(computed)[0].shape[0]
        later = jnp.arange(1, m + 1, dtype=jnp.int32)[:, None]
        slots = (info.slot[None, :] - config.burn_in // config.trace_len + later) % (
            replay.traces_per_env
        )
        values = jax.tree.map(jax.lax.stop_gradient, computed)
        return replay.overwrite_extras(replay_state, info.env_index, slots, values)
    if not config.overwrite_mu:
        return replay_state
    n = batch.reward.shape[0]
    actor = state.params["actor"]
    obs = at_steps(batch.obs, slice(None, n))
    if learner.discrete:
        new_mu = jax.nn.softmax(learner.actor.apply(actor, obs))
    else:
        logp = learner.log_prob(actor, obs, batch.action, batch.mu)
        new_mu = {"logp": logp, "pre_tanh": batch.mu["pre_tanh"]}
    start = step_position(config, info, offset)
    return replay.overwrite_steps(
        replay_state, "mu", info.env_index, start, jax.lax.stop_gradient(new_mu)
    )


def feed_reward(core: RecurrentSACState, action, reward) -> RecurrentSACState:
    """`AgentParts.feedback` of recurrent SAC: the reward just received becomes both cores'
    previous-reward input; the action is already there (`record_action` in `make`)."""
    del action

    def feed(c):
        return c._replace(prev_reward=jnp.asarray(reward, c.prev_reward.dtype))

    return RecurrentSACState(feed(core.actor), feed(core.critic))
