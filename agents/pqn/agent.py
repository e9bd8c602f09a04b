"""PQN as pure functions, `make(config, spec)` (agents/core/parts.py). An iteration (Algorithm
1 of arXiv:2407.04811): act ε-greedily for T steps in every env, recording Q(x_t, ·); the Q(λ)
targets of the rollout; `epochs` passes over its T·B transitions in shuffled minibatches, each
a RAdam step on ½(Q(x, a) − G)². No replay, no target network: LayerNorms keep it stable."""

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.core.actors import epsilon_greedy, linear_epsilon
from agents.core.hooks import plugged_torso
from agents.core.learning import grads_and_aux
from agents.core.parts import AgentParts
from agents.core.rollout import ActorOutput
from networks import QNetwork

METRICS = ("loss", "grad_norm", "q_mean", "target_mean", "epsilon", "lr")


class PQNLearner(NamedTuple):
    params: Any
    opt_state: Any
    step: jax.Array  # int32: rollouts learnt from (ε and the lr schedule follow it)
    key: jax.Array  # minibatch shuffling


def make(config, spec) -> AgentParts:
    """PQN's parts for `config` (agents/pqn/config.py) on an env of `spec`."""
    net = QNetwork(
        spec.obs_spec, spec.num_actions, config.hidden, layer_norm=config.layer_norm,
        plugged=plugged_torso(config, spec.obs_spec) if config.network else None,
    )  # fmt: skip
    # RAdam without its rate, applied below from the schedule and a member's own `lr`
    optimizer = optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.scale_by_radam())
    steps_per_iteration = config.num_envs * config.trace_len
    updates_per_iteration = config.epochs * config.num_minibatches
    decay = config.anneal_steps / steps_per_iteration * updates_per_iteration  # lr: by update
    q_values = lambda params, obs: net.apply(params, obs).q_values  # noqa: E731

    def init(key, sample_obs):
        init_key, key = jax.random.split(key)
        params = net.init(init_key, sample_obs)
        return PQNLearner(params, optimizer.init(params), jnp.int32(0), key)

    def epsilon(step):
        n = step * steps_per_iteration
        return linear_epsilon(n, config.eps_start, config.eps_end, config.eps_decay_steps)

    def acting(learner):
        return learner.params, epsilon(learner.step)

    def act(acting_params, obs, first, core, key):  # records Q(x_t, ·) in the μ slot
        q = q_values(acting_params[0], obs)
        return ActorOutput(epsilon_greedy(q, acting_params[1], key), q, core)

    def policy(acting_params, obs, first, core, key, eps=0.0):  # evaluation: ε of its own
        return epsilon_greedy(q_values(acting_params[0], obs), eps, key), core

    evaluate = lambda greedy: functools.partial(policy, eps=0.0 if greedy else config.eval_epsilon)  # noqa: E731

    def learn(learner, traj, hyper, axis_name=None):
        steps, q_t = traj.steps, traj.steps["mu"]
        r, boot = steps["reward"] * hyper.reward_scale, q_values(learner.params, traj.last_obs)
        targets = losses.q_lambda_targets(
            r, steps["discount"], q_t, boot, hyper.td_lambda, mask_t=steps["mask"]
        )
        n, m = targets.size, config.num_minibatches
        if n % m:
            raise ValueError(f"--num-minibatches {m} does not divide the {n} transitions of a "
                             "rollout on one device")  # fmt: skip
        flat = lambda x: x.reshape((n, *x.shape[2:]))  # noqa: E731
        data = (jax.tree.map(flat, traj.obs), *map(flat, (steps["action"], targets, steps["mask"])))

        def loss_fn(params, obs, action, target, mask):
            q = q_values(params, obs)[None]  # one time step of n transitions: [1, n, A]
            per_step = losses.q_learning_loss(q, action[None], target[None], mask_t=mask[None])
            loss = per_step.sum() / jnp.maximum(mask.sum(), 1.0)  # over the real transitions
            return loss, loss

        def minibatch(carry, batch):
            params, opt_state, update = carry
            loss, grads, grad_norm = grads_and_aux(lambda p: loss_fn(p, *batch), params, axis_name)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            lr = hyper.lr * (jnp.clip(1.0 - update / decay, 0.0, 1.0) if decay else 1.0)
            params = optax.apply_updates(params, jax.tree.map(lambda u: -lr * u, updates))
            return (params, opt_state, update + 1), (loss, grad_norm, lr)

        def epoch(carry, key):
            order = jax.random.permutation(key, n).reshape(m, -1)
            return jax.lax.scan(minibatch, carry, jax.tree.map(lambda x: x[order], data))

        key, shuffle = jax.random.split(learner.key)
        first_update = learner.step * updates_per_iteration
        (params, opt_state, _), (loss, grad_norm, lr) = jax.lax.scan(
            epoch, (learner.params, learner.opt_state, first_update),
            jax.random.split(shuffle, config.epochs),
        )  # fmt: skip
        metrics = dict(loss=loss.mean(), grad_norm=grad_norm.mean(), q_mean=q_t.mean(),
                       target_mean=targets.mean(), epsilon=epsilon(learner.step),
                       lr=lr.mean())  # fmt: skip
        if axis_name is not None:
            metrics = jax.lax.pmean(metrics, axis_name)
        return PQNLearner(params, opt_state, learner.step + 1, key), metrics

    def reset_params(learner, params, hyper):
        return learner._replace(params=params, opt_state=optimizer.init(params))

    return AgentParts(init, act, acting, learn, evaluate, reset_params, METRICS)
