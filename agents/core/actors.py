"""Pure actors: `select_action(params, obs, first, core, key) -> ActorOutput` for rollouts and
`act(greedy) -> ActFn` for evaluation, built from an agent's network.

`ActorOutput.mu` decides what a trace stores for the learner (agents/core/rollout.py): the
categorical actor records the probability vector μ(·|x); the Gaussian actor records the
distribution's statistics `{"mean", "log_std"}`; the ε-greedy and NoisyNet actors of the
value-based agents record nothing (`()`); the on-policy actor (`logp_value_actor`, A2C
and PPO, either action space) records the log-probability of the action taken, the value
estimate and the recurrent state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from agents.core.rollout import ActorOutput
from agents.losses import scale_action


def categorical_actor(policy_logits):
    """The actor of a categorical policy.

    `policy_logits(params, obs, first, core) -> (logits [B, A], core)` is the network's
    policy. Returns `select_action` (samples a ~ π, records μ = π) and `act(greedy)`."""

    def select_action(params, obs, first, core, key) -> ActorOutput:
        logits, core = policy_logits(params, obs, first, core)
        action = jax.random.categorical(key, logits).astype(jnp.int32)
        return ActorOutput(action, jax.nn.softmax(logits), core)

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            logits, core = policy_logits(params, obs, first, core)
            action = jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)
            return action.astype(jnp.int32), core

        return jax.jit(act_fn)

    return select_action, act


def clip_to_bounds(action, low, high):
    """Clip a continuous action to the env's bounds (None: unbounded, returned as is)."""
    if low is None or high is None:
        return action
    low, high = np.asarray(low, np.float32), np.asarray(high, np.float32)
    shape = jnp.shape(action)  # explicit broadcasting of the [D] bounds over the batch
    return jnp.clip(action, jnp.broadcast_to(low, shape), jnp.broadcast_to(high, shape))


def gaussian_actor(policy_gaussian, low=None, high=None, *, normalised: bool = False):
    """The actor of a diagonal Gaussian policy (continuous ACER).

    `policy_gaussian(params, obs, first, core) -> ((mean, log_std), core)`, mean `[B, D]` and
    log_std `[B, D]` or `[D]`. `select_action` samples a ~ N(mean, exp(log_std)²) and stores
    the unclipped sample (the one whose density the learner evaluates) with μ = {"mean",
    "log_std"} (log_std broadcast to `[B, D]`); the env receives it clipped to its bounds
    (`ActorOutput.env_action`), as CleanRL's `ppo_continuous_action` clips in a wrapper.

    `normalised=False`: the Gaussian is over env actions, clipped to [low, high].
    `normalised=True`: the Gaussian is over normalised actions, which are clipped to [−1, 1]
    and mapped onto [low, high] (`losses.scale_action`, the mapping of SAC and TD3); `low`
    and `high` must be finite. `act(greedy)` returns the mean when greedy, else a sample,
    mapped to the env the same way."""
    if normalised and (low is None or high is None):
        raise ValueError("gaussian_actor(normalised=True) needs finite action bounds")

    def to_env(action):
        if normalised:
            return scale_action(jnp.clip(action, -1.0, 1.0), low, high)
        return clip_to_bounds(action, low, high)

    def select_action(params, obs, first, core, key) -> ActorOutput:
        (mean, log_std), core = policy_gaussian(params, obs, first, core)
        log_std = jnp.broadcast_to(log_std, mean.shape)
        action = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
        mu = {"mean": mean, "log_std": log_std}
        return ActorOutput(action, mu, core, to_env(action))

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            (mean, log_std), core = policy_gaussian(params, obs, first, core)
            if greedy:
                return to_env(mean), core
            noise = jax.random.normal(key, mean.shape, mean.dtype)
            return to_env(mean + jnp.exp(jnp.broadcast_to(log_std, mean.shape)) * noise), core

        return jax.jit(act_fn)

    return select_action, act


def linear_epsilon(env_steps, start: float, end: float, decay_steps: int, decay_start: int = 0):
    """The linearly decaying exploration rate of DQN (Mnih et al. 2015): `start` up to env
    step `decay_start`, `end` from `decay_start + decay_steps` on (Dopamine and the MinAtar
    paper's DQN start the decay when learning starts). A pure function of the step count (an
    array or a number), so that a resumed run explores as the original did."""
    steps = jnp.asarray(env_steps, jnp.float32) - decay_start
    frac = jnp.clip(steps / max(decay_steps, 1), 0.0, 1.0)
    return start + frac * (end - start)


def apex_epsilons(num_envs: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X's fixed per-actor exploration rates (Horgan et al. 2018, arXiv:1803.00933, §4.1),
    as R2D2 uses them: ε_i = base^(1 + alpha·i/(N−1)) for env i of N (base for N = 1)."""
    i = np.arange(num_envs, dtype=np.float64)
    return (base ** (1.0 + alpha * i / max(num_envs - 1, 1))).astype(np.float32)


def epsilon_greedy(q, epsilon, key):
    """ε-greedy actions from Q values `[B, A]`: with probability ε (a scalar or `[B]`) an
    action uniform over all A, else argmax Q (ties to the lowest index); int32 `[B]`."""
    explore_key, action_key = jax.random.split(key)
    greedy = jnp.argmax(q, axis=-1)
    random = jax.random.randint(action_key, greedy.shape, 0, q.shape[-1])
    explore = jax.random.uniform(explore_key, greedy.shape) < epsilon
    return jnp.where(explore, random, greedy).astype(jnp.int32)


def epsilon_greedy_actor(q_values, eval_epsilon: float = 0.001):
    """The actor of a value-based agent (DQN, R2D1): ε-greedy on Q values.

    `q_values(params, obs, first, core) -> (q [B, A], core)` is the network's. The actor's
    params are `(network params, epsilon)`, epsilon a scalar or `[B]` (one rate per env) array,
    so the exploration schedule is data, not a constant compiled into the rollout. With
    probability ε an action uniform over all A actions, else argmax Q (ties to the lowest
    index). It records no behaviour statistics (`mu = ()`): Q-learning needs none. `act(greedy)`
    plays argmax Q when greedy, else ε-greedy with `eval_epsilon` (0.001: the Atari evaluation
    protocol of Mnih et al. 2015 uses 0.05, later work, e.g. Rainbow and R2D2, 0.001)."""

    def select_action(params, obs, first, core, key) -> ActorOutput:
        net_params, epsilon = params
        q, core = q_values(net_params, obs, first, core)
        return ActorOutput(epsilon_greedy(q, epsilon, key), (), core)

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            q, core = q_values(params[0], obs, first, core)
            if greedy:
                return jnp.argmax(q, axis=-1).astype(jnp.int32), core
            return epsilon_greedy(q, eval_epsilon, key), core

        return jax.jit(act_fn)

    return select_action, act


def noisy_q_actor(q_values, eval_epsilon: float = 0.0):
    """The actor of a value-based agent with NoisyNet layers (Fortunato et al. 2018,
    arXiv:1706.10295): argmax Q under a noise draw, no ε.

    `q_values(params, obs, noise_key) -> q [B, A]` is the network with its noise drawn from
    `noise_key` (None: the noise-free means). The actor's params are `(network params, ε)` as
    the ε-greedy actor's (ε unused). Every step draws new noise, independently for each env
    (each env explores with its own perturbed network, as the paper's parallel actors do);
    it records nothing (`mu = ()`). `act(greedy)`: argmax of the noise-free network when
    greedy, else ε-greedy with `eval_epsilon` on it (the evaluation of Dopamine's and
    Kaixhin/Rainbow's noisy agents: the means, ε = 0.001)."""

    def noisy_q(params, obs, key):
        b = jax.tree.leaves(obs)[0].shape[0]

        def one(o, k):  # one env: its own noise draw
            return q_values(params, jax.tree.map(lambda x: x[None], o), k)[0]

        return jax.vmap(one)(obs, jax.random.split(key, b))

    def select_action(params, obs, first, core, key) -> ActorOutput:
        q = noisy_q(params[0], obs, key)
        return ActorOutput(jnp.argmax(q, axis=-1).astype(jnp.int32), (), core)

    def act(greedy: bool):
        eps = 0.0 if greedy else eval_epsilon

        def act_fn(params, obs, first, core, key):
            return epsilon_greedy(q_values(params[0], obs, None), eps, key), core

        return jax.jit(act_fn)

    return select_action, act


# ---------------------------------------------------------------------- on-policy actors
# The policies of the on-policy agents, as pure functions of the network's distribution
# parameters: `dist` is the logits `[..., A]` (categorical) or `(mean [..., D], log_std)`
# (diagonal Gaussian; log_std broadcasts against mean).

_LOG_2PI = float(np.log(2.0 * np.pi))


def log_prob(dist, action, discrete: bool):
    """log π(a|x): `[...]`."""
    if discrete:
        logp = jax.nn.log_softmax(dist)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), -1)[..., 0]
    mean, log_std = dist
    log_std = jnp.broadcast_to(log_std, mean.shape)  # a state-independent [D] too
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * _LOG_2PI, axis=-1)


def entropy(dist, discrete: bool):
    """H(π(·|x)): `[...]` (the differential entropy for a Gaussian)."""
    if discrete:
        logp = jax.nn.log_softmax(dist)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)
    mean, log_std = dist
    return jnp.sum(jnp.broadcast_to(log_std, mean.shape) + 0.5 * (_LOG_2PI + 1.0), axis=-1)


def sample(dist, key, discrete: bool):
    if discrete:
        return jax.random.categorical(key, dist).astype(jnp.int32)
    mean, log_std = dist
    noise = jax.random.normal(key, mean.shape, mean.dtype)
    return mean + jnp.exp(jnp.broadcast_to(log_std, mean.shape)) * noise


def mode(dist, discrete: bool):
    return jnp.argmax(dist, -1).astype(jnp.int32) if discrete else dist[0]


def logp_value_actor(policy_value, discrete: bool, low=None, high=None):
    """The actor of an on-policy agent, which records at acting time what its learner needs
    (as CleanRL's PPO stores them): `mu = {"logp": log π(a_t|x_t), "value": V(x_t), "core":
    the recurrent state before x_t}` (`core` is `()` for a feed-forward network).

    `policy_value(params, obs, first, core) -> (dist, value [B], core)`. Continuous actions
    are stored unclipped (their log-probability is the one the learner evaluates); the env
    receives them clipped to [low, high] (`ActorOutput.env_action`). `act(greedy)`: the mode
    (argmax, or the clipped mean) when greedy, else a sample."""

    def select_action(params, obs, first, core, key) -> ActorOutput:
        dist, value, new_core = policy_value(params, obs, first, core)
        action = sample(dist, key, discrete)
        mu = {"logp": log_prob(dist, action, discrete), "value": value, "core": core}
        env_action = None if discrete else clip_to_bounds(action, low, high)
        return ActorOutput(action, mu, new_core, env_action)

    def act(greedy: bool):
        def act_fn(params, obs, first, core, key):
            dist, _, core = policy_value(params, obs, first, core)
            action = mode(dist, discrete) if greedy else sample(dist, key, discrete)
            return (action if discrete else clip_to_bounds(action, low, high)), core

        return jax.jit(act_fn)

    return select_action, act
