"""PPO as pure functions, `make(config, spec)` (agents/core/parts.py). No replay: each iteration
acts T steps in every env with the current policy (recording log π(a_t|x_t), V(x_t) and the
LSTM state) and `learn` runs the whole update on that rollout (agents/ppo/learner.py: GAE,
then epochs × minibatches). A2C (agents/a2c/) is `build` with its own config, optimizer and
metrics."""

from __future__ import annotations

import math
import types

import jax
import jax.numpy as jnp
import optax

from agents.core.actors import logp_value_actor
from agents.core.config import ConfigError, module_from_config
from agents.core.hooks import call_hook, config_hook, plugged_torso
from agents.core.icm import icm_of
from agents.core.parallel import DATA, check_divisible
from agents.core.parts import AgentParts, StagedLearn, reset_with
from agents.ppo.learner import METRICS, OnPolicyLearner, buffer_specs
from envs import obs_zeros
from networks import ActorCriticNetwork
from networks.cores import feed_back
from networks.torsos import _array_shape, convolves_on_cpu


def make(config, spec) -> AgentParts:
    """PPO's parts for `config` (agents/ppo/config.py) on an env of `spec`: Adam (the
    gradient clipping is chained in front by the learner)."""
    return build(config, spec, lambda lr: optax.adam(lr, eps=config.adam_eps), METRICS)


def update_loop(config, spec) -> str:
    """`config.update_loop` with `auto` resolved: no rolled loop around a convolution's
    weight gradient on XLA:CPU (agents/ppo/learner.py)."""
    if config.update_loop == "auto":
        return "dispatch" if convolves_on_cpu(spec, config) else "scan"
    return config.update_loop


def network(config, spec) -> ActorCriticNetwork:
    """The actor-critic network, over the `preprocess_obs` hook's output where there is one."""
    obs_spec = spec.obs_spec
    if config.preprocess_obs is not None:  # the network sees the preprocessed observation
        hook = config_hook(config, "preprocess_obs")
        sample = jax.eval_shape(lambda: obs_zeros(spec.obs_spec, (spec.num_envs,), jnp))
        out = jax.eval_shape(lambda o: call_hook("preprocess_obs", hook, o), sample)
        if hasattr(out, "shape"):  # an array; a pytree hook keeps the env's leaves
            obs_spec = tuple(out.shape[1:])
    action_dim = spec.num_actions if spec.discrete else int(math.prod(spec.action_shape))
    return module_from_config(
        ActorCriticNetwork, config, obs_spec=obs_spec, action_dim=action_dim,
        discrete=spec.discrete, plugged=plugged_torso(config, obs_spec) if config.network else None,
    )  # fmt: skip


def build(config, spec, make_optimizer, metric_names) -> AgentParts:
    """The parts of an on-policy agent (PPO, A2C): `make_optimizer(lr)` without clipping."""
    net, loop = network(config, spec), update_loop(config, spec)
    if config.normalize_obs and _array_shape(net.obs_spec) is None:
        raise ConfigError(
            "--normalize-obs needs array observations; "
            f"{spec.env_id} gives a dict (normalise inside --preprocess-obs instead)"
        )
    curiosity = icm_of(config, spec) if config.icm_coef else None
    if curiosity is not None:
        metric_names = (*metric_names, *curiosity.metric_names)
    learner = OnPolicyLearner(
        config, net, make_optimizer, discrete=spec.discrete, unroll=loop == "unroll",
        curiosity=curiosity,
    )  # fmt: skip
    recurrent = bool(config.lstm_size)

    def policy_value(acting_params, obs, first, core):
        """(dist, value [B], core) at one batched step, from (params, obs statistics)."""
        params, obs_stats = acting_params
        x = learner.prepare_obs(obs, obs_stats)
        if not recurrent:
            dist, value = net.apply(params, x)
            return dist, value, core
        x = jax.tree.map(lambda o: o[None], x)  # one time step
        (dist, value), core = net.apply(params, x, first[None], core)
        dist = dist[0] if spec.discrete else (dist[0][0], dist[1])
        return dist, value[0], core

    select_action, act = logp_value_actor(
        policy_value, spec.discrete, spec.action_low, spec.action_high
    )

    def learn(state, traj, hyper, axis_name=None):  # the whole update, one program
        state, metrics, _ = learner.update(state, traj, axis_name, hyper.values or None)
        return state, metrics

    def check_devices(n: int):  # minibatches split each device's envs (or steps) evenly
        per_device = config.num_envs // n
        if config.num_minibatches == 1:
            return
        if recurrent:
            check_divisible(
                "--num-envs per device", per_device, config.num_minibatches, "--num-minibatches"
            )
        else:
            check_divisible(
                "--num-envs x --trace-len per device", per_device * config.trace_len,
                config.num_minibatches, "--num-minibatches",
            )  # fmt: skip

    staged = None
    if loop == "dispatch":
        refresh = recurrent and config.refresh_memories
        staged = StagedLearn(
            prepare=learner.prepare,
            step=learner.minibatch_update,
            refresh=learner.refresh,
            steps=tuple(
                (refresh and i == 0 and e > 0, (jnp.int32(e), jnp.int32(i)))
                for e in range(config.epochs)
                for i in range(config.num_minibatches)
            ),
            buffer_specs=buffer_specs(DATA),
            why="--update-loop dispatch runs each minibatch from the host",
            population="a population runs each member's update as one program, not one "
            "dispatch per minibatch; add --update-loop scan (or unroll)",
        )
    return AgentParts(
        init=learner.init,
        act=select_action,
        acting=lambda state: (state.params, state.obs_stats),
        learn=learn,
        evaluate=act,
        reset_params=reset_with(learner),
        metric_names=metric_names,
        initial_core=lambda n: net.initial_state(n) if recurrent else (),
        feedback=feed_back if config.prev_action_reward else None,
        staged=staged,
        check_devices=check_devices,
        modules=types.SimpleNamespace(network=net, learner=learner, update_loop=loop),
    )
