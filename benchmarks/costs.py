"""Compute-bound cost models of the agents, as data, for benchmarks.bench_throughput.

An agent's cost model is a function `costs(agent) -> {name: NetworkCost}` of the network
passes it makes per env step, kept here with the benchmark (the agents know nothing of it),
looked up by agent name in `COST_MODELS`; `network_pass_costs` builds the usual one. An agent
without an entry (R2D1, the Reactor, TD3, PQN) gets no ceiling. `COMPARE` holds each agent's
default `--compare` of bench_throughput. A user's registered agent may add entries to both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from agents.dqn.agent import updates_per_env_step
from networks.torsos import _array_shape

Array = jax.Array


class NetworkCost(NamedTuple):
    """One part of an agent's compute-bound cost model (`COST_MODELS`), as data:
    benchmarks.bench_throughput times `apply(params, *inputs(batch))` jitted, alone at its
    best batch size. With an `optimizer`, the timed step is the gradient of a loss over every
    output of `apply` with respect to `params` (the first argument) followed by the
    optimizer's update: a forward+backward pass and the update, whatever the agent's loss.
    `passes`: samples of that part per env step."""

    apply: Callable[..., Any]
    params: Any
    inputs: Callable[[int], tuple]
    passes: float
    optimizer: Any = None  # an optax.GradientTransformation, or None: a forward pass


def random_inputs(shape: tuple[int, ...], dtype) -> Callable[[int], Array]:
    """`batch -> [batch, *shape]` arrays of `dtype` (integers in [0, 255) for image-like
    dtypes), for a `NetworkCost`'s inputs."""

    def make(batch: int) -> Array:
        key = jax.random.PRNGKey(batch)
        if jax.numpy.issubdtype(dtype, jax.numpy.floating):
            return jax.random.normal(key, (batch, *shape), dtype)
        return jax.random.randint(key, (batch, *shape), 0, 255).astype(dtype)

    return make


def network_pass_costs(agent, forward: float, train: float, net, optimizer, obs_shape=None) -> dict:
    """The usual cost model of one network on array observations: `forward` acting or
    target passes and `train` forward+backward passes with `optimizer` per env step (ACER's,
    DQN's, PPO's). `net`: the agent's network (`agent.modules.network`); `obs_shape`: its
    input's shape (default: the env's observations)."""
    spec = agent.env.spec
    shape = spec.obs_shape if obs_shape is None else obs_shape
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, *shape), spec.obs_dtype))
    obs = random_inputs(shape, spec.obs_dtype)
    inputs = lambda b: (obs(b),)  # noqa: E731
    return {
        "forward": NetworkCost(net.apply, params, inputs, forward),
        "forward+backward+adam": NetworkCost(net.apply, params, inputs, train, optimizer),
    }


def acer_costs(agent) -> dict:
    """Per env step ACER runs (1 + replay_ratio)·(T+1)/T forward+backward passes (one
    on-policy and replay_ratio replayed traces of T+1 observations per T steps), as many
    forward passes of the averaged network with the trust region, and one acting forward
    pass. Feed-forward, array observations and discrete actions only."""
    cfg = agent.config
    if cfg.lstm_size or agent.env.spec.pytree_obs or not agent.env.spec.discrete:
        return {}
    n_train = (1 + cfg.replay_ratio) * (cfg.trace_len + 1) / cfg.trace_len
    net, learner = agent.modules.network, agent.modules.learner
    n_fwd = 1 + (n_train if cfg.trust_region else 0)
    return network_pass_costs(agent, n_fwd, n_train, net, learner.optimizer)


def dqn_passes_per_step(config, updates_per_env_step: float) -> tuple[float, float]:
    """DQN's (forward+backward passes, forward passes) of frames per env step: per update,
    batch·L learnt frames with gradient, batch·n online and batch·(L+n−1) target forwards
    (batch·L of each when L < n: `DQNLearner.bootstrap_unroll`); plus one acting forward per
    env step."""
    b, L, n = config.batch_size, config.learn_len, config.n_step
    train = updates_per_env_step * b * L
    ahead = 2 * L if L < n else n + L + n - 1  # DQNLearner.unroll: the bootstrap states only
    fwd = 1.0 + updates_per_env_step * b * ahead
    return float(train), float(np.float64(fwd))


def dqn_costs(agent) -> dict:
    """Per env step, one acting forward pass, and per update batch·L frames forward+backward
    with Adam, batch·n online and batch·(L+n−1) target forward passes
    (`dqn_passes_per_step`)."""
    if agent.env.spec.pytree_obs:
        return {}
    n_train, n_fwd = dqn_passes_per_step(agent.config, updates_per_env_step(agent.config))
    net, learner = agent.modules.network, agent.modules.learner
    return network_pass_costs(agent, n_fwd, n_train, net, learner.optimizer)


def ppo_costs(agent) -> dict:
    """PPO's and A2C's: per env step `epochs` forward+backward passes (each sample once per
    epoch), one acting forward pass and 1/T bootstrap forward passes. Feed-forward only."""
    net, learner = agent.modules.network, agent.modules.learner
    shape = _array_shape(net.obs_spec)
    if agent.config.lstm_size or shape is None:
        return {}
    cfg = agent.config
    return network_pass_costs(
        agent, 1 + 1 / cfg.trace_len, cfg.epochs, net, learner.optimizer, shape
    )


def sac_costs(agent) -> dict:
    """Per env step: one acting actor forward; per update (update_to_data per env step,
    batch B) the target pass (actor + N critics forward on B·n next observations), the
    critic step (N critics forward + backward + Adam on B) and the actor step (actor + N
    critics forward + backward on B). The batch axis is transitions here, so the bench's best
    batch size stands for B."""
    cfg, spec, learner = agent.config, agent.env.spec, agent.modules.learner
    if cfg.recurrent:  # the unroll's cost depends on the sequence layout
        return {}
    state = learner.init(jax.random.PRNGKey(0), jnp.zeros((1, *spec.obs_shape), jnp.float32))
    actor, critic = state.params["actor"], state.params["critic"]
    members, key = jnp.arange(cfg.critic_subset), jax.random.PRNGKey(0)
    obs = random_inputs(spec.obs_shape, jnp.float32)
    shape = () if spec.discrete else (learner.action_dim,)
    dtype = jnp.int32 if spec.discrete else jnp.float32

    def actor_loss(p, c, o):
        if spec.discrete:
            return learner.sample(p, o, None)[0] * learner.critic.apply(c, o)[0]
        a, logp = learner.sample(p, o, key)
        return logp - learner.critic.apply(c, o, a)[0]

    per_step = cfg.update_to_data * cfg.batch_size  # transitions learnt per env step
    return {
        "act forward": NetworkCost(
            lambda p, o: learner.sample(p, o, key)[0], actor, lambda b: (obs(b),), 1.0
        ),
        "target forward": NetworkCost(
            lambda p, c, o: learner.soft_value_parts(p, c, o, key, members, 1.0),
            actor, lambda b: (critic, obs(b)), per_step * cfg.n_step,
        ),
        "critic step": NetworkCost(
            learner.q_taken, critic, lambda b: (obs(b), jnp.zeros((b, *shape), dtype)),
            per_step, learner.optimizers["critic"],
        ),
        "actor step": NetworkCost(
            actor_loss, actor, lambda b: (critic, obs(b)), per_step / cfg.policy_delay,
            learner.optimizers["actor"],
        ),
    }  # fmt: skip


# agent name -> its cost model (bench_throughput gives no ceiling for an agent not here)
COST_MODELS: dict[str, Callable[[Any], dict]] = {
    "a2c": ppo_costs, "acer": acer_costs, "dqn": dqn_costs, "ppo": ppo_costs, "sac": sac_costs,
}  # fmt: skip

# agent name -> bench_throughput's default `--compare` ("field=a,b")
COMPARE: dict[str, str] = {
    "a2c": "num_envs=16,32",
    "acer": "replay_ratio=0,4",
    "dqn": "prioritized=false,true",
    "ppo": "epochs=1,4",
    "r2d1": "replay_ratio=1,4",
    "reactor": "decoupled=true,false",
    "sac": "update_to_data=1,4",
}
