"""SAC learner: soft Q targets (n-step or V-trace) from a critic ensemble, the actor and the
temperature; continuous (tanh Gaussian) or discrete (exact expectation over actions).

One update on B transitions, each with its n-step window (agents/core/offpolicy.py), in this order
(as CleanRL's sac_continuous_action and the SAC paper's Algorithm 1):
1. critic targets from the target critics, min over M of the N members drawn at random
   (REDQ; M = N = 2 is SAC's clipped double Q), the current policy and α;
2. one Adam step on the N critics, ½ Σ_i w_b (Q_i(x, a) − y)² averaged over the batch
   (w_b: the IS weight of prioritized replay, 0 on the fake auto-reset transition);
3. every `policy_delay` updates, one Adam step on the actor (against the updated critics)
   and one on log α;
4. Polyak averaging of the target critics (`optax.incremental_update`), or with
   --target-update-period N a copy every N updates (`agents.core.learning.update_target`).

The critic ensemble is one module with stacked parameters (networks.sac.QEnsemble), run
with vmap. The critics see actions in [−1, 1] (the tanh output); the env gets them scaled to
its bounds, and log-probabilities are those of the scaled action (tanh_gaussian_log_prob
with the bounds), as CleanRL computes them, so the target entropy −|A| means the same.
The batch comes from the agent (agents/core/offpolicy.py) as the networks should see it: its
observations normalised with --normalize-obs, its rewards with the curiosity's intrinsic
reward added with --rnd-coef or --icm-coef; the state's `obs_stats`, `rnd` and `icm` fields
belong to the agent.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agents import losses
from agents.core.learning import (
    Hyper,
    TraceBatch,
    adam_with_clipping,
    apply,
    at_steps,
    batch_size_of,
    device_keys,
    draw_members,
    ensemble_min,
    grads_and_aux,
    update_target,
)
from agents.sac.prediction import Prediction
from networks.noisy import resample_noise

Array = jax.Array
sg = jax.lax.stop_gradient

METRICS = (
    "value_loss", "policy_loss", "alpha_loss", "alpha", "entropy", "q_mean", "target_mean",
    "td_abs", "rho_mean", "critic_grad_norm", "actor_grad_norm",
)  # fmt: skip


class SACState(NamedTuple):
    params: Any  # {"actor": ..., "critic": ...} (critic: the ensemble's stacked params)
    target_critic: Any
    log_alpha: Array
    opt_state: Any  # {"actor", "critic", "alpha"}
    step: Array  # int32 updates
    key: Array
    env_steps: Array  # int32 env steps absorbed (random actions before start_train_at)
    obs_stats: Any = ()  # RunningStats of --normalize-obs (filled by the agent), or ()
    rnd: Any = ()  # agents.core.rnd.RNDState with --rnd-coef (filled by the agent), or ()
    icm: Any = ()  # agents.core.icm.ICMState with --icm-coef (filled by the agent), or ()
    prediction: Any = ()  # agents.sac.prediction.PredictionState with --prediction, or ()


class SACLearner:
    """Pure functions of the SAC learner, closed over the config, networks and env spec.
    `init_networks(k_actor, k_critic, sample_obs) -> (actor params, critic params)` and
    `representation(critic params, obs)` are the feed-forward networks' unless given (the
    recurrent learner's, agents/sac/recurrent.py, which calls this one's pieces)."""

    def __init__(self, config, actor, critic, spec, *, init_networks=None, representation=None):
        self.config, self.actor, self.critic = config, actor, critic
        self.init_networks = init_networks or self.feed_forward_networks
        self.representation = representation or self.feed_forward_representation
        self.discrete = spec.discrete
        if self.discrete:
            self.low = self.high = None
            default_entropy = config.target_entropy_scale * float(np.log(spec.num_actions))
        else:
            self.low = np.asarray(spec.action_low, np.float32)
            self.high = np.asarray(spec.action_high, np.float32)
            default_entropy = -float(np.prod(spec.action_shape))
        te = config.target_entropy
        self.target_entropy = default_entropy if te is None else float(te)
        self.optimizers = self.make_optimizers(config)
        self.action_dim = None if self.discrete else int(np.prod(spec.action_shape))
        # What a recurrent core's previous-action input holds: A actions, or the vector's D.
        self.core_action_dim = spec.num_actions if self.discrete else self.action_dim
        self.prediction = Prediction(config, spec) if config.prediction else None

    @staticmethod
    def make_optimizers(cfg) -> dict:
        """Adam for the actor, the critics and log α, from the config or a `Hyper` view."""
        g = cfg.max_grad_norm
        return {
            "actor": adam_with_clipping(cfg.actor_lr, g),
            "critic": adam_with_clipping(cfg.critic_lr, g),
            "alpha": optax.adam(cfg.alpha_lr),
        }

    def optimizers_for(self, hparams: dict | None) -> dict:
        """The config's optimisers, or ones built with a population member's (traced)
        hyper-parameters (`hparams`, engine/population.py)."""
        return self.make_optimizers(Hyper(self.config, hparams)) if hparams else self.optimizers

    # ------------------------------------------------------------------ state
    def init(self, key, sample_obs) -> SACState:
        k_actor, k_critic, key = jax.random.split(key, 3)
        actor, critic = self.init_networks(k_actor, k_critic, sample_obs)
        params = {"actor": actor, "critic": critic}
        log_alpha = jnp.asarray(np.log(self.config.init_alpha), jnp.float32)
        prediction = ()
        if self.prediction is not None:
            states = self.representation(critic, sample_obs)
            prediction = self.prediction.init(
                jax.random.fold_in(k_critic, 1), states, sample_obs, self.optimizers["critic"]
            )
        return SACState(
            params=params,
            target_critic=jax.tree.map(jnp.copy, critic),  # distinct buffers: both donated
            log_alpha=log_alpha,
            opt_state=self.init_opt_state(params, log_alpha),
            step=jnp.zeros((), jnp.int32),
            key=key,
            env_steps=jnp.zeros((), jnp.int32),
            prediction=prediction,
        )

    def feed_forward_representation(self, critic_params, obs):
        """The critics' representation of observations `[B, ...]` -> `[B, K]` (what their
        heads read; the prediction model's s_t)."""
        return self.critic.apply(critic_params, obs, method="represent")

    def init_opt_state(self, params, log_alpha, hparams=None) -> dict:
        """Fresh states of the three optimisers (actor, critic, temperature)."""
        opts = self.optimizers_for(hparams)
        return {
            "actor": opts["actor"].init(params["actor"]),
            "critic": opts["critic"].init(params["critic"]),
            "alpha": opts["alpha"].init(log_alpha),
        }

    def reset_params(self, state: SACState, params, hparams=None) -> SACState:
        """`state` restarted from new weights `params` as `init` starts its own: fresh states
        of every optimiser and the target critic equal to the new critic; log α (whose
        optimiser restarts too), the counts, key and statistics kept (a population's CEM
        resampling, engine/population.py). With --prediction the models keep their
        weights (trained on the old critics' representation, they adapt to the new one) and
        their optimiser restarts with the critics'."""
        prediction = state.prediction
        if self.prediction is not None:
            critic_opt = self.optimizers_for(hparams)["critic"]
            prediction = prediction._replace(opt_state=critic_opt.init(prediction.params))
        return state._replace(
            params=params,
            target_critic=jax.tree.map(jnp.copy, params["critic"]),
            opt_state=self.init_opt_state(params, state.log_alpha, hparams),
            prediction=prediction,
        )

    def feed_forward_networks(self, k_actor, k_critic, sample_obs):
        """(actor params, critic params) from observations `[B, ...]`."""
        actor = self.actor.init(k_actor, sample_obs)
        if self.discrete:
            return actor, self.critic.init(k_critic, sample_obs)
        action = jnp.zeros((batch_size_of(sample_obs), self.action_dim), jnp.float32)
        return actor, self.critic.init(k_critic, sample_obs, action)

    # ------------------------------------------------------------------ policy
    def sample(self, actor_params, obs, key):
        """Continuous: a reparameterised action in [−1, 1] and log π of its scaled version,
        `([..., D], [...])`. Discrete: the logits `[..., A]` (and None)."""
        return self.policy_sample(self.actor.apply(actor_params, obs), key)

    def policy_sample(self, policy_out, key):
        """`sample` from the actor's outputs: (mean, log σ) or the logits."""
        if self.discrete:
            return policy_out, None
        mean, log_std = policy_out
        u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
        logp = losses.tanh_gaussian_log_prob(u, mean, log_std, low=self.low, high=self.high)
        return jnp.tanh(u), logp

    def log_prob(self, actor_params, obs, action, mu):
        """log π(a|x) of stored actions under the current policy `[...]` (V-trace's ρ)."""
        return self.log_prob_of(self.actor.apply(actor_params, obs), action, mu)

    def log_prob_of(self, policy_out, action, mu):
        """`log_prob` from the actor's outputs: (mean, log σ) or the logits."""
        if self.discrete:
            logp = jax.nn.log_softmax(policy_out)
            return jnp.take_along_axis(logp, action[..., None], -1)[..., 0]
        mean, log_std = policy_out
        return losses.tanh_gaussian_log_prob(
            mu["pre_tanh"], mean, log_std, low=self.low, high=self.high
        )

    def importance_ratio(self, logp, action, mu):
        """V-trace's ρ = π(a|x)/μ(a|x) of stored actions `[...]` from log π(a|x) `logp`, its
        log clipped at log 100 (`targets` says why)."""
        return jnp.exp(jnp.minimum(logp - self.behaviour_log_prob(action, mu), LOG_RHO_MAX))

    def behaviour_log_prob(self, action, mu):
        """log μ(a|x) stored at acting time `[...]`."""
        if self.discrete:
            p = jnp.take_along_axis(mu, action[..., None], -1)[..., 0]
            return jnp.log(jnp.maximum(p, 1e-30))
        return mu["logp"]

    def soft_value_parts(self, actor_params, critic_params, obs, key, members, alpha):
        """(E_a'[min_M Q'(x, a')], E_a'[log π(a'|x)]) `[...]` at observations `[..., obs]`:
        one sampled a' (continuous) or the exact expectation (discrete)."""
        return self.soft_value(
            self.actor.apply(actor_params, obs),
            lambda a: self.critic.apply(critic_params, obs, a),
            key,
            members,
        )

    def soft_value(self, policy_out, q_of, key, members):
        """`soft_value_parts` from the actor's outputs and `q_of(action) -> [N, ...]` (discrete:
        `q_of(None) -> [N, ..., A]`), the critics at the same observations."""
        if self.config.q_only:  # hard targets: max_a' of the members' min, no entropy
            q = jnp.max(ensemble_min(q_of(None), members), -1)
            return q, jnp.zeros_like(q)
        if self.discrete:  # Σ π log π as −entropy: 0 (not NaN) at −inf logits
            pi = jax.nn.softmax(policy_out)
            q = ensemble_min(q_of(None), members)
            return jnp.sum(pi * q, -1), -losses.entropy(policy_out)
        a, logp = self.policy_sample(policy_out, key)
        return ensemble_min(q_of(a), members), logp

    def q_taken(self, critic_params, obs, action):
        """Q_i(x, a) of every member `[N, ...]` at the stored actions."""
        if self.discrete:
            q = self.critic.apply(critic_params, obs)
            return jnp.take_along_axis(q, action[None, ..., None], -1)[..., 0]
        return self.critic.apply(critic_params, obs, action)

    def q_from_features(self, critic_params, features, action):
        """`q_taken` from the critics' representation `features` `[..., K]` (their
        `represent` or recurrent `unroll`)."""
        if self.discrete:
            q = self.critic.apply(critic_params, features, method="q")  # [N, ..., A]
            return jnp.take_along_axis(q, action[None, ..., None], -1)[..., 0]
        return self.critic.apply(critic_params, features, action, method="q")

    # ------------------------------------------------------------------ targets
    def targets(self, state: SACState, batch: TraceBatch, key, members):
        """Critic targets y `[B]` for step 0 of each window, and the mean ρ (V-trace)."""
        cfg = self.config
        n = batch.reward.shape[0]
        alpha = jnp.exp(state.log_alpha)
        actor = state.params["actor"]
        q_next, logp_next = self.soft_value_parts(
            actor, state.target_critic, at_steps(batch.obs, slice(1, None)), key, members, alpha
        )  # [n, B]: x_1 .. x_n
        r, d, mask = batch.reward, batch.discount, batch.mask
        if cfg.target == "vtrace":
            v = q_next - alpha * logp_next  # soft values of x_1 .. x_n
            if n == 1:
                vs1, rho_mean = v[0], jnp.ones(())
            else:
                obs = at_steps(batch.obs, slice(1, n))
                logp = self.log_prob(actor, obs, batch.action[1:], _tail(batch.mu))
                # ρ = π/μ from log-densities that can both be hugely negative under different
                # policies (a uniform warm-up action far in a narrow Gaussian's tail, or μ
                # overwritten by an earlier π): their difference can exceed float32's exp
                # range. V-trace truncates ρ and c at ρ̄, c̄ <= 100, so clipping log ρ at
                # log 100 leaves its targets unchanged and keeps ρ (and rho_mean) finite.
                rho = self.importance_ratio(logp, batch.action[1:], _tail(batch.mu))
                # Soft V-trace: V_soft(x) = E_π[r − α log π(a|x) + γ V_soft(x')], so each
                # traced step's reward carries the entropy bonus α H(π(·|x_s)); without it the
                # targets' on-policy fixed point is short by α·H per step. H is estimated as
                # V_soft's own: −log π(a'_s|x_s) of the fresh a'_s ~ π (exact when discrete),
                # so δ_s = ρ_s (r_s + γ V_soft(x_{s+1}) − min Q'(x_s, a'_s)). Not −log π of the
                # stored action: that is unbiased only where μ is the true behaviour density;
                # under --overwrite-mu (μ a recent π, ρ ≈ 1 for any replayed action) an old
                # action deep in π's tail brings a bonus of tens per step, and Q diverged
                # (docs/results/sac-overwrite-mu/).
                soft_r = r[1:] - alpha * logp_next[:-1]
                out = losses.vtrace(
                    v[:-1], v[-1], soft_r, d[1:], sg(rho), cfg.vtrace_lambda, cfg.vtrace_rho,
                    cfg.vtrace_c, mask_t=mask[1:],
                )  # fmt: skip
                vs1 = out.vs[0]
                rho_mean = jnp.sum(mask[1:] * rho) / jnp.maximum(jnp.sum(mask[1:]), 1.0)
            return sg(r[0] + d[0] * vs1), sg(rho_mean)
        return self.n_step_targets(r, d, mask, q_next, logp_next, alpha)[0], jnp.ones(())

    def n_step_targets(self, r, d, mask, q_next, logp_next, alpha):
        """n-step soft targets `[T, B]` of every step t of a window of T steps (`r`, `d`,
        `mask` `[T, B]`), from min_M Q' and log π at x_{t+1} (`q_next`, `logp_next`
        `[T, B]`); each full-length (n steps) for t <= T − n, shortened after."""
        n = self.config.n_step
        if n == 1:
            return losses.soft_q_targets(r, d, q_next, logp_next, alpha)
        # x_0's value is only read where step 0 is masked, which is never learnt; its log π
        # (zero here) is taken as step 0's own bonus and given back, so it cancels.
        zeros = jnp.zeros_like(q_next[:1])
        q_t = jnp.concatenate([zeros, q_next[:-1]], 0)
        logp_t = jnp.concatenate([zeros, logp_next[:-1]], 0)
        return losses.n_step_soft_q_targets(
            r, d, q_t, logp_t, q_next[-1], logp_next[-1], alpha, n, mask_t=mask
        )

    # ------------------------------------------------------------------ actor and α
    def q_all(self, critic_params, obs, action):
        """Q_i of every member `[N, ...]` at `action` (continuous), or Q_i(x, ·) `[N, ..., A]`
        (discrete, `action` None)."""
        if self.discrete:
            return self.critic.apply(critic_params, obs)
        return self.critic.apply(critic_params, obs, action)

    def actor_terms(self, policy_out, q_of, key, alpha):
        """The actor's loss per step `[T, B]` (arXiv:1812.05905 eq. 7; discrete:
        arXiv:1910.07207 eq. 12) from the actor's outputs at `[T, B]` steps and `q_of`
        (`soft_value`'s) of the critics there, reduced over the members by --actor-q; with
        log π `[T, B]` (discrete: −entropy) and what the temperature loss takes (log π, or
        the logits)."""
        cfg = self.config

        def reduce(q):
            return jnp.min(q, 0) if cfg.actor_q == "min" else jnp.mean(q, 0)

        if self.discrete:
            logits = policy_out
            per = losses.discrete_sac_actor_loss(logits, reduce(q_of(None)), alpha)
            return per, -losses.entropy(logits), logits
        a, logp = self.policy_sample(policy_out, key)
        return losses.sac_actor_loss(reduce(q_of(a)), logp, alpha), logp, logp

    def alpha_grads(self, log_alpha, aux, mask, axis_name):
        """(loss, gradient) of the temperature loss (arXiv:1812.05905 eq. 18; discrete:
        arXiv:1910.07207 eq. 11) averaged over the valid steps; `aux` and `mask` `[T, B]`."""

        def alpha_loss(log_alpha):
            if self.discrete:
                per = losses.discrete_sac_temperature_loss(
                    log_alpha, aux, self.target_entropy, mask_t=mask
                )
            else:
                per = losses.sac_temperature_loss(log_alpha, aux, self.target_entropy, mask_t=mask)
            loss = jnp.sum(per) / jnp.maximum(jnp.sum(mask), 1.0)
            return loss, loss

        loss, grads, _ = grads_and_aux(alpha_loss, log_alpha, axis_name)
        return loss, grads

    def policy_step(self, state: SACState, actor_grads, alpha_grads, opts: dict):
        """Adam on the actor and on log α (with --autotune) every `policy_delay` updates:
        (actor, its optimizer state, log α, its optimizer state); `opts`: the optimisers
        (`optimizers_for`)."""
        cfg = self.config

        def step(_):
            actor, actor_opt = apply(
                opts["actor"], actor_grads, state.opt_state["actor"],
                state.params["actor"],
            )  # fmt: skip
            log_alpha, alpha_opt = state.log_alpha, state.opt_state["alpha"]
            if cfg.autotune:
                log_alpha, alpha_opt = apply(opts["alpha"], alpha_grads, alpha_opt, log_alpha)
            return actor, actor_opt, log_alpha, alpha_opt

        def skip(_):
            s = state
            return s.params["actor"], s.opt_state["actor"], s.log_alpha, s.opt_state["alpha"]

        return jax.lax.cond(state.step % cfg.policy_delay == 0, step, skip, None)

    # ------------------------------------------------------------------ update
    def update(self, state: SACState, batch: TraceBatch, axis_name=None, hparams=None):
        """One SAC update on a batch of windows (module docstring), with a population
        member's `hparams` or the config's. Pure; returns (state, metrics, |TD| [B] of the
        sampled transitions)."""
        cfg, opts = self.config, self.optimizers_for(hparams)
        if cfg.noisy:
            state = self.fresh_noise(state)
        key, k_members, k_target, k_actor = jax.random.split(state.key, 4)
        members = draw_members(k_members, cfg.num_critics, cfg.critic_subset)  # all devices'
        if axis_name is not None:  # each device its own sampled actions for its rows
            k_target, k_actor = device_keys(axis_name, k_target, k_actor)
        y, rho_mean = self.targets(state, batch, k_target, members)
        obs, action = at_steps(batch.obs, 0), batch.action[0]
        weight = batch.is_weight * batch.mask[0]

        def q_loss(q):  # of the critics' Q [N, B] (with --prediction, on their representation)
            return 0.5 * jnp.sum(jnp.mean(weight[None] * jnp.square(q - y[None]), axis=-1))

        def critic_loss(critic):
            q = self.q_taken(critic, obs, action)  # [N, B]
            loss = q_loss(q)
            return loss, (loss, jnp.mean(q, 0))

        if self.prediction is None:
            (value_loss, q), grads, critic_norm = grads_and_aux(
                critic_loss, state.params["critic"], axis_name
            )
            prediction, prediction_metrics = state.prediction, {}
        else:
            out = self.predicting_critic_grads(state, batch, q_loss, opts, axis_name)
            (value_loss, q), grads, critic_norm, prediction, prediction_metrics = out
        critic, critic_opt = apply(
            opts["critic"], grads, state.opt_state["critic"], state.params["critic"]
        )
        alpha = jnp.exp(state.log_alpha)
        mask0 = batch.mask[0]
        if cfg.q_only:  # no actor, no temperature: the critics' step alone
            zero = jnp.zeros(())
            new, metrics, td = self.finish_update(
                state, key, axis_name, (state.params["actor"], critic, state.log_alpha),
                (state.opt_state["actor"], critic_opt, state.opt_state["alpha"]),
                mask0, q, y, jnp.zeros_like(y), hparams,
                value_loss=value_loss, policy_loss=zero, alpha_loss=zero, alpha=zero,
                rho_mean=rho_mean, critic_grad_norm=critic_norm, actor_grad_norm=zero,
                **prediction_metrics,
            )  # fmt: skip
            return new._replace(prediction=prediction), metrics, td * mask0

        x = at_steps(obs, None)  # the sampled transitions as one step: the losses' [T, B]

        def actor_loss(actor):
            def q_of(a):
                return self.q_all(sg(critic), x, a)

            per, logp, aux = self.actor_terms(self.actor.apply(actor, x), q_of, k_actor, alpha)
            loss = jnp.sum(mask0 * per[0]) / jnp.maximum(jnp.sum(mask0), 1.0)
            return loss, (loss, sg(logp[0]), sg(aux))

        (policy_loss, logp, aux), actor_grads, actor_norm = grads_and_aux(
            actor_loss, state.params["actor"], axis_name
        )
        alpha_l, alpha_grads = self.alpha_grads(state.log_alpha, aux, mask0[None], axis_name)
        actor, actor_opt, log_alpha, alpha_opt = self.policy_step(
            state, actor_grads, alpha_grads, opts
        )
        new, metrics, td = self.finish_update(
            state, key, axis_name, (actor, critic, log_alpha), (actor_opt, critic_opt, alpha_opt),
            mask0, q, y, logp, hparams,
            value_loss=value_loss, policy_loss=policy_loss, alpha_loss=alpha_l, alpha=alpha,
            rho_mean=rho_mean, critic_grad_norm=critic_norm, actor_grad_norm=actor_norm,
            **prediction_metrics,
        )  # fmt: skip
        return new._replace(prediction=prediction), metrics, td * mask0

    def predicting_critic_grads(self, state: SACState, batch: TraceBatch, q_loss, opts, axis_name):
        """--prediction: the critics' gradient on the sampled transitions (step 0 of each
        window; `q_loss(q [N, B])` their loss) with the prediction model's gated in, and the
        model's step (agents/sac/prediction.py). Returns ((loss, the members' mean Q [B]),
        the gradient, its norm, the model's state, its metrics)."""
        obs, action, mask = at_steps(batch.obs, 0), batch.action[0], batch.mask[0]
        next_states = sg(self.representation(state.target_critic, at_steps(batch.obs, 1)))
        reward = env_reward(batch)[0]

        def joint(critic, model):
            s = self.representation(critic, obs)
            q = self.q_from_features(critic, s, action)
            loss = q_loss(q)
            pred_loss, parts = self.prediction.loss(
                model, s[None], obs[None], action[None], reward[None], next_states[None],
                mask[None],
            )  # fmt: skip
            return (loss, pred_loss), ((loss, jnp.mean(q, 0)), parts)

        (aux, parts), grads, norm, prediction, gate = self.prediction.gated_step(
            joint, state.params["critic"], state.prediction, opts["critic"], axis_name
        )
        return aux, grads, norm, prediction, {**parts, **gate}

    def fresh_noise(self, state: SACState) -> SACState:
        """--noisy: the actor, the critics and the target critics under new draws, from the
        update's key (the same on every device: parameters stay replicated)."""
        keys = jax.random.split(jax.random.fold_in(state.key, NOISE_SALT), 3)
        params = {
            "actor": resample_noise(state.params["actor"], keys[0]),
            "critic": resample_noise(state.params["critic"], keys[1]),
        }
        return state._replace(
            params=params, target_critic=resample_noise(state.target_critic, keys[2])
        )

    def finish_update(
        self, state, key, axis_name, stepped, opts, mask, q, y, logp, hparams, **scalars
    ):
        """The end of an update, feed-forward or recurrent: Polyak-average the target
        critics (τ: the member's `hparams` or the config's), the metrics (`scalars`, and the
        masked means of the entropy −log π, the members' mean Q `q`, the targets `y` and
        |q − y| over the learnt steps `mask`), averaged over devices, and the new state.
        `stepped`: (actor, critic, log α) after the step; `opts`: their optimiser states.
        Returns (state, metrics, |q − y|)."""
        actor, critic, log_alpha = stepped
        tau = Hyper(self.config, hparams).tau
        target = update_target(
            critic, state.target_critic, state.step, tau, self.config.target_update_period
        )
        td = sg(jnp.abs(q - y))
        valid = jnp.maximum(jnp.sum(mask), 1.0)
        metrics = {
            **scalars,
            "entropy": -jnp.sum(mask * logp) / valid,
            "q_mean": jnp.sum(mask * q) / valid,
            "target_mean": jnp.sum(mask * y) / valid,
            "td_abs": jnp.sum(mask * td) / valid,
        }
        if axis_name is not None:
            metrics = jax.lax.pmean(metrics, axis_name)
        new = state._replace(
            params={"actor": actor, "critic": critic},
            target_critic=target,
            log_alpha=log_alpha,
            opt_state=dict(zip(("actor", "critic", "alpha"), opts, strict=True)),
            step=state.step + 1,
            key=key,
        )
        return new, metrics, td


def env_reward(batch: TraceBatch):
    """The env's rewards of a batch: `batch.reward` less a curiosity bonus (--rnd-coef,
    --icm-coef), which only the critics' targets see."""
    return batch.reward if isinstance(batch.env_reward, tuple) else batch.env_reward


NOISE_SALT = 0x4E4F  # --noisy's draws: keys folded with it (as agents/sac/agent.py's)
LOG_RHO_MAX = float(np.log(100.0))  # V-trace's ρ is used truncated at <= 100 (`targets`)


def _tail(mu):
    """Behaviour statistics of steps 1.. of a window."""
    return jax.tree.map(lambda x: x[1:], mu)
