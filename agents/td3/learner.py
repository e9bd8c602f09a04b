"""The deterministic-actor learner of TD3 and DDPG (rlpyt's QPG family).

One update on B transitions with their n-step windows (agents/core/offpolicy.py):
1. targets: the target actor's action at each next observation, smoothed with clipped
   Gaussian noise and clipped to [−1, 1] (`losses.td3_target_actions`), the min over the target
   critics (`losses.td3_targets`: clipped double Q; one critic gives DDPG's target), and for
   n > 1 the n-step return bootstrapped from that value (`losses.n_step_returns`);
2. one Adam step on the critics, ½ Σ_i w_b (Q_i(x, a) − y)² averaged over the batch;
3. every `policy_delay` updates: one Adam step on the actor along the deterministic policy
   gradient of the first critic (`losses.dpg_loss`), and Polyak averaging of the target
   actor and critics.

Actions are in [−1, 1] for the networks (tanh output); the env gets them scaled to its bounds.
The batch comes from the agent (agents/core/offpolicy.py) as the networks should see it: its
observations normalised with --normalize-obs, its rewards with the curiosity's intrinsic
reward added with --rnd-coef or --icm-coef; the state's `obs_stats`, `rnd` and `icm` fields
belong to the agent.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from agents import losses
from agents.core.learning import (
    Hyper,
    TraceBatch,
    adam_with_clipping,
    apply,
    at_steps,
    batch_size_of,
    device_keys,
    ensemble_min,
    grads_and_aux,
    update_target,
)

Array = jax.Array
sg = jax.lax.stop_gradient

METRICS = (
    "value_loss", "policy_loss", "q_mean", "target_mean", "td_abs", "critic_grad_norm",
    "actor_grad_norm",
)  # fmt: skip

_ONES = (-1.0, 1.0)


class TD3State(NamedTuple):
    params: Any  # {"actor": ..., "critic": ...}
    target_params: Any  # the same, Polyak-averaged
    opt_state: Any  # {"actor", "critic"}
    step: Array
    key: Array
    env_steps: Array
    obs_stats: Any = ()  # RunningStats of --normalize-obs (filled by the agent), or ()
    rnd: Any = ()  # agents.core.rnd.RNDState with --rnd-coef (filled by the agent), or ()
    icm: Any = ()  # agents.core.icm.ICMState with --icm-coef (filled by the agent), or ()


class TD3Learner:
    """Pure functions of TD3 / DDPG, closed over the config, networks and action size."""

    def __init__(self, config, actor, critic, action_dim: int):
        self.config, self.actor, self.critic = config, actor, critic
        self.action_dim = action_dim
        self.optimizers = self.make_optimizers(config)

    @staticmethod
    def make_optimizers(cfg) -> dict:
        """Adam for the actor and the critics, from the config or a `Hyper` view of it."""
        return {
            "actor": adam_with_clipping(cfg.actor_lr, cfg.max_grad_norm),
            "critic": adam_with_clipping(cfg.critic_lr, cfg.max_grad_norm),
        }

    def optimizers_for(self, hparams: dict | None) -> dict:
        """The config's optimisers, or ones built with a population member's (traced)
        hyper-parameters (`hparams`, engine/population.py)."""
        return self.make_optimizers(Hyper(self.config, hparams)) if hparams else self.optimizers

    def init(self, key, sample_obs) -> TD3State:
        k_actor, k_critic, key = jax.random.split(key, 3)
        action = jnp.zeros((batch_size_of(sample_obs), self.action_dim), jnp.float32)
        params = {
            "actor": self.actor.init(k_actor, sample_obs),
            "critic": self.critic.init(k_critic, sample_obs, action),
        }
        return TD3State(
            params=params,
            target_params=jax.tree.map(jnp.copy, params),  # distinct buffers: both donated
            opt_state={k: self.optimizers[k].init(v) for k, v in params.items()},
            step=jnp.zeros((), jnp.int32),
            key=key,
            env_steps=jnp.zeros((), jnp.int32),
        )

    def reset_params(self, state: TD3State, params, hparams=None) -> TD3State:
        """`state` restarted from new weights `params` as `init` starts its own: fresh states
        of both optimisers and the target networks equal to them; the counts, key and
        statistics kept (a population's CEM resampling, engine/population.py)."""
        return state._replace(
            params=params,
            target_params=jax.tree.map(jnp.copy, params),
            opt_state={k: self.optimizers_for(hparams)[k].init(v) for k, v in params.items()},
        )

    def targets(self, state: TD3State, batch: TraceBatch, key, cfg):
        """Critic targets `[B]` of step 0 of each window (`cfg`: the update's `Hyper`)."""
        n = batch.reward.shape[0]
        next_obs = at_steps(batch.obs, slice(1, None))  # x_1 .. x_n
        target = state.target_params
        a = self.actor.apply(target["actor"], next_obs)
        noise = cfg.target_noise * jax.random.normal(key, a.shape, a.dtype)
        ones = jnp.ones((self.action_dim,), jnp.float32)
        a = losses.td3_target_actions(a, noise, cfg.noise_clip, -ones, ones)
        q = self.critic.apply(target["critic"], next_obs, a)  # [N, n, B]
        q_min = ensemble_min(q, jnp.arange(cfg.num_critics))
        r, d = batch.reward, batch.discount
        if n == 1:
            return losses.td3_targets(r, d, q_min, q_min)[0]
        zeros = jnp.zeros_like(q_min[:1])  # V(x_0): read only where step 0 is masked
        v = jnp.concatenate([zeros, q_min[:-1]], 0)
        return losses.n_step_returns(r, d, v, q_min[-1], n, mask_t=batch.mask)[0]

    def update(self, state: TD3State, batch: TraceBatch, axis_name=None, hparams=None):
        """One update (module docstring), with a population member's `hparams` or the
        config's. Pure; returns (state, metrics, |TD| [B])."""
        cfg, opts = Hyper(self.config, hparams), self.optimizers_for(hparams)
        key, k_target = jax.random.split(state.key)
        if axis_name is not None:  # each device its own smoothing noise for its rows
            (k_target,) = device_keys(axis_name, k_target)
        y = self.targets(state, batch, k_target, cfg)
        obs, action = at_steps(batch.obs, 0), batch.action[0]
        mask0 = batch.mask[0]
        weight = batch.is_weight * mask0

        def critic_loss(critic):
            q = self.critic.apply(critic, obs, action)  # [N, B]
            loss = 0.5 * jnp.sum(jnp.mean(weight[None] * jnp.square(q - y[None]), axis=-1))
            return loss, (loss, jnp.mean(q, 0))

        (value_loss, q), grads, critic_norm = grads_and_aux(
            critic_loss, state.params["critic"], axis_name
        )
        critic, critic_opt = apply(
            opts["critic"], grads, state.opt_state["critic"], state.params["critic"]
        )

        def q_first(a):  # Q_1(x, a), summed: each row's own ∂Q/∂a
            return jnp.sum(self.critic.apply(critic, obs, a)[0])

        def actor_loss(actor):
            a = self.actor.apply(actor, obs)  # [B, D]
            dqda = jax.grad(q_first)(sg(a))
            per = losses.dpg_loss(a[None], dqda[None], mask_t=mask0[None])[0]
            valid = jnp.maximum(jnp.sum(mask0), 1.0)
            q_pi = self.critic.apply(sg(critic), obs, sg(a))[0]
            return jnp.sum(per) / valid, -jnp.sum(mask0 * q_pi) / valid

        policy_loss, actor_grads, actor_norm = grads_and_aux(
            actor_loss, state.params["actor"], axis_name
        )

        def policy_step(_):
            actor, actor_opt = apply(
                opts["actor"], actor_grads, state.opt_state["actor"],
                state.params["actor"],
            )  # fmt: skip
            new = {"actor": actor, "critic": critic}
            target = update_target(
                new, state.target_params, state.step, cfg.tau, cfg.target_update_period
            )
            return actor, actor_opt, target

        def skip(_):
            return state.params["actor"], state.opt_state["actor"], state.target_params

        actor, actor_opt, target = jax.lax.cond(
            state.step % cfg.policy_delay == 0, policy_step, skip, None
        )
        td = sg(jnp.abs(q - y))  # q: the members' mean [B]
        valid = jnp.maximum(jnp.sum(mask0), 1.0)
        metrics = {
            "value_loss": value_loss,
            "policy_loss": policy_loss,
            "q_mean": jnp.sum(mask0 * q) / valid,
            "target_mean": jnp.sum(mask0 * y) / valid,
            "td_abs": jnp.sum(mask0 * td) / valid,
            "critic_grad_norm": critic_norm,
            "actor_grad_norm": actor_norm,
        }
        if axis_name is not None:
            metrics = jax.lax.pmean(metrics, axis_name)
        new = state._replace(
            params={"actor": actor, "critic": critic},
            target_params=target,
            opt_state={"actor": actor_opt, "critic": critic_opt},
            step=state.step + 1,
            key=key,
        )
        return new, metrics, td * mask0
