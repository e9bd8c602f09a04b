"""Recurrent SAC's learner (--recurrent): the SAC learner (agents/sac/learner.py) over sequences,
with R2D2's stored state, burn-in and stored-state refresh (Kapturowski et al. 2019, "Recurrent
Experience Replay in Distributed Reinforcement Learning", ICLR, §3).

A sampled window (agents/sac/agent.py, replay.TraceReplay "Windows") holds b = `burn_in`
steps, the L = `seq_len` learnt steps and n − 1 look-ahead steps, with the recurrent state
stored before its first observation (`batch.core_state`, a `networks.sac.RecurrentSACState`:
the actor's core and the critics' core). Window positions: 0 .. b − 1 burn-in, b .. b + L − 1
learnt, b + L .. W − 1 look-ahead, W = b + L + n − 1 the last observation. The
previous-action and -reward inputs of position i are the window's action and reward of
position i − 1 (the stored ones for i = 0), zeroed at episode starts by the core.

One update:
1. the online actor, the online critics' core and the target critics' core each start from
   their stored state and unroll the burn-in; the burnt-in state is stop_gradient'ed
   (`agents.core.learning.burn_in_state`, shared with R2D1), so the burn-in steps get no
   gradient and only refresh the stale stored state. Then the learnt steps, with gradient for
   the online networks, and for the actor and the target critics the look-ahead, without;
2. critic targets of every learnt step: the feed-forward learner's n-step soft targets
   (`SACLearner.n_step_targets`) over the time axis, from the target critics and a fresh
   a' ~ π(·|x_{t+1}) at x_{t+1}, cut at episode ends (a termination stops the return, a
   time-limit truncation bootstraps from the final observation, as the window's discounts and
   masks say); with --target vtrace, each learnt step's V-trace target over the n − 1 steps
   after it (`vtrace_targets`: the feed-forward learner's, step by step);
3. one Adam step on the critics (the shared core and the N heads): ½ Σ_i of the mean over
   the valid learnt steps of (Q_i(h_t, a_t) − y_t)²;
4. every `policy_delay` updates, one Adam step on the actor and one on log α. The actor's
   loss at the learnt steps uses the critics before this update's step, reusing their unroll
   (SAC's simultaneous updates; the feed-forward learner, which has no unroll to save, uses
   the stepped critics); its forward pass is shared with the targets' a' (`jax.vjp`);
5. Polyak averaging of the target critics.

Stored-state refresh (--refresh-stored-state): the update also returns the states its online
unrolls reached at window positions T, 2T, .., b + L (T = --trace-len), i.e. before the first
observation of every later trace of the window up to the end of the learnt steps, computed
with the online networks of this update (before its step), and with the window's previous
action and reward at each. The agent writes them into the replay as those traces' stored
states, so later windows starting there burn in from a recent network's state rather than the
acting one's. The window's own first state (the one the unroll starts from) is not rewritten.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.core.learning import (
    TraceBatch,
    apply,
    burn_in_state,
    device_keys,
    draw_members,
    grads_and_aux,
)
from agents.sac.learner import SACLearner, SACState, env_reward
from networks.cores import ActionRewardState, previous_inputs
from networks.sac import RecurrentSACState

sg = jax.lax.stop_gradient


class RecurrentSACLearner:
    """See the module docstring. `actor` is a `networks.sac.RecurrentPolicy`, `critic` a
    `networks.sac.RecurrentQEnsemble`. The state, its init and restart, the policy's
    distributions, the targets' algebra, the actor's and the temperature's losses and steps
    are the feed-forward learner's (`self.sac`, built with this one's networks)."""

    def __init__(self, config, actor, critic, spec):
        self.config, self.actor, self.critic = config, actor, critic
        self.sac = SACLearner(
            config, actor, critic, spec, init_networks=self.init_networks,
            representation=self.representation,
        )  # fmt: skip
        self.discrete, self.prediction = self.sac.discrete, self.sac.prediction
        self.low, self.high = self.sac.low, self.sac.high
        # the same state, restart and noise draws as the feed-forward learner's
        self.init, self.reset_params = self.sac.init, self.sac.reset_params
        self.fresh_noise = self.sac.fresh_noise

    def init_networks(self, k_actor, k_critic, sample_obs):
        b = sample_obs.shape[0]
        obs, first = sample_obs[None], jnp.ones((1, b), bool)
        state = self.initial_state(b)
        actor = self.actor.init(k_actor, obs, first, state.actor)
        action = None if self.discrete else jnp.zeros((1, b, self.sac.action_dim), jnp.float32)
        return actor, self.critic.init(k_critic, obs, first, state.critic, action)

    def representation(self, critic_params, obs):
        """The shape of the critics' representation (their core's output) of observations
        `[B, ...]`: zeros `[B, lstm_size]` (for the prediction model's init)."""
        del critic_params
        return jnp.zeros((obs.shape[0], self.config.lstm_size), jnp.float32)

    def initial_state(self, batch_size: int) -> RecurrentSACState:
        return RecurrentSACState.zeros(
            batch_size, self.config.lstm_size, self.sac.core_action_dim, self.discrete
        )

    # ------------------------------------------------------------------ unrolls
    def _segments(self, run, params, state0):
        """Burn-in (no gradient) then the learnt steps, from `state0`: (outputs of the learnt
        steps `[L, B, ...]`, the state after them, the states at positions T, 2T, .., b + L
        for the refresh, stop_gradient'ed, or [] without it). With the refresh the unroll is
        cut at every trace start; the gradient still flows through the learnt cuts."""
        cfg = self.config
        T, b, L = cfg.trace_len, cfg.burn_in, cfg.seq_len
        if not cfg.refresh_stored_state:
            state = burn_in_state(run, params, state0, b)
            out, state = run(params, b, b + L, state)
            return out, state, []
        states, state = [], state0
        for start in range(0, b, T):

            def shifted(p, i, j, s, start=start):
                return run(p, start + i, start + j, s)

            state = burn_in_state(shifted, params, state, T)
            states.append(state)
        outs = []
        for start in range(b, b + L, T):
            out, state = run(params, start, start + T, state)
            outs.append(out)
            states.append(jax.tree.map(sg, state))
        out = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *outs)
        return out, state, states

    def _refreshed(self, actor_states, critic_states, batch: TraceBatch):
        """The states to write back, leaves `[M, B, ...]` (M = (b + L)/T), each with the
        previous action and reward of its position, as acting stored them."""
        T = self.config.trace_len
        prev_action, prev_reward = previous_inputs(
            batch.core_state.actor, batch.action, env_reward(batch)
        )
        positions = jnp.arange(1, len(actor_states) + 1) * T

        def stack(states):
            lstm = jax.tree.map(lambda *xs: jnp.stack(xs), *[s.lstm for s in states])
            return ActionRewardState(lstm, prev_action[positions], prev_reward[positions])

        return RecurrentSACState(stack(actor_states), stack(critic_states))

    def _check(self, batch: TraceBatch):
        cfg = self.config
        want = cfg.burn_in + cfg.seq_len + cfg.n_step
        got = jax.tree.leaves(batch.obs)[0].shape[0]
        if got != want:
            raise ValueError(
                f"recurrent SAC takes windows of burn_in + seq_len + n_step = {want} "
                f"observations [W+1, B, ...]; got {got}"
            )
        if not isinstance(batch.core_state, RecurrentSACState):
            raise ValueError(
                "recurrent SAC needs the stored state of each window (batch.core_state, a "
                f"RecurrentSACState); got {type(batch.core_state).__name__}"
            )

    # ------------------------------------------------------------------ update
    def runners(self, batch: TraceBatch):
        """`run(params, start, stop, state) -> (outputs, state)` of the actor and of the
        critics' core over window positions start .. stop − 1 of `batch`, with each
        position's previous action and reward (module docstring)."""
        prev_action, prev_reward = previous_inputs(
            batch.core_state.actor, batch.action, env_reward(batch)
        )

        def runner(module_apply):
            def run(p, start, stop, s):
                sl = slice(start, stop)
                return module_apply(
                    p, batch.obs[sl], batch.first[sl], s, prev_action[sl], prev_reward[sl]
                )

            return run

        critic_core = lambda p, *args: self.critic.apply(p, *args, method="unroll")  # noqa: E731
        return runner(self.actor.apply), runner(critic_core)

    def actor_forward(self, actor_params, batch: TraceBatch):
        """The actor over the burn-in (no gradient) and the learnt steps: (its outputs at the
        L learnt steps, (the state after them, the refresh states), both stop_gradient'ed)."""
        run_actor, _ = self.runners(batch)
        out, end, states = self._segments(run_actor, actor_params, batch.core_state.actor)
        return out, (jax.tree.map(sg, end), states)

    def critic_loss(self, critic_params, batch: TraceBatch, y):
        """The critics' loss against targets `y` `[L, B]` (module docstring, 3.): (loss,
        (loss, the members' mean Q `[L, B]`, the core's features of the learnt steps and
        the refresh states, stop_gradient'ed))."""
        loss, q, feats, states = self.critic_terms(critic_params, batch, y)
        return loss, (loss, q, sg(feats), states)

    def critic_terms(self, critic_params, batch: TraceBatch, y):
        """`critic_loss`'s (loss, the members' mean Q, the core's features of the learnt steps
        `[L, B, K]` (with gradient), the refresh states)."""
        cfg = self.config
        b, L = cfg.burn_in, cfg.seq_len
        _, run_critic = self.runners(batch)
        feats, _, states = self._segments(run_critic, critic_params, batch.core_state.critic)
        q = self.sac.q_from_features(critic_params, feats, batch.action[b : b + L])  # [N, L, B]
        mask = batch.mask[b : b + L]
        per = 0.5 * jnp.sum(jnp.square(q - sg(y)[None]), axis=0)  # [L, B]: Σ over members
        loss = jnp.sum(batch.is_weight[None] * mask * per) / jnp.maximum(jnp.sum(mask), 1.0)
        return loss, jnp.mean(q, 0), feats, states

    def predicting_critic_grads(self, state: SACState, batch: TraceBatch, y, next_states, opts,
                                axis_name):  # fmt: skip
        """--prediction: the critics' gradient on the learnt steps with the prediction
        model's gated in, and the model's step (agents/sac/prediction.py), the model
        predicting the target critics' core states `next_states` `[L, B, K]` at x_{t+1}.
        Returns (`critic_loss`'s aux, the gradient, its norm, the model's state, its
        metrics)."""
        cfg = self.config
        sl = slice(cfg.burn_in, cfg.burn_in + cfg.seq_len)
        obs, action, mask, reward = (
            batch.obs[sl],
            batch.action[sl],
            batch.mask[sl],
            env_reward(batch)[sl],
        )

        def joint(critic, model):
            loss, q, feats, states = self.critic_terms(critic, batch, y)
            pred_loss, parts = self.prediction.loss(
                model, feats, obs, action, reward, next_states, mask
            )
            return (loss, pred_loss), ((loss, q, sg(feats), states), parts)

        (aux, parts), grads, norm, prediction, gate = self.prediction.gated_step(
            joint, state.params["critic"], state.prediction, opts["critic"], axis_name
        )
        return aux, grads, norm, prediction, {**parts, **gate}

    def actor_loss(self, policy, critic_params, features, batch: TraceBatch, key, alpha):
        """The actor's loss (module docstring, 4.) from its outputs `policy` at the learnt
        steps and the critics' (`critic_params`, no gradient) on their core's `features` of
        the same steps: (loss, (loss, log π or −entropy `[L, B]`, the temperature loss's
        input))."""
        cfg = self.config
        mask = batch.mask[cfg.burn_in : cfg.burn_in + cfg.seq_len]
        critic_params = sg(critic_params)

        def q_of(a):
            return self.critic.apply(critic_params, sg(features), a, method="q")

        per, logp, aux = self.sac.actor_terms(policy, q_of, key, alpha)
        loss = jnp.sum(mask * per) / jnp.maximum(jnp.sum(mask), 1.0)
        return loss, (loss, sg(logp), sg(aux))

    def sequence_targets(self, state: SACState, batch: TraceBatch, policy, actor_end, key, members):
        """The critics' targets of the L learnt steps `[L, B]` (module docstring, 2.), from
        the actor's outputs at the learnt steps and its state after them: n-step or V-trace
        targets, with the mean ρ (V-trace; 1 otherwise) and the target critics' core states
        at x_{b+1} .. x_{b+L} `[L, B, K]` (stop_gradient'ed: what the prediction model
        predicts)."""
        cfg = self.config
        b, L, n = cfg.burn_in, cfg.seq_len, cfg.n_step
        W = b + L + n - 1
        run_actor, run_critic = self.runners(batch)
        ahead, _ = run_actor(state.params["actor"], b + L, W + 1, actor_end)  # x_{b+L} .. x_W
        policy_next = jax.tree.map(
            lambda x, z: jnp.concatenate([sg(x[1:]), z], axis=0), policy, ahead
        )  # x_{b+1} .. x_W
        target = state.target_critic
        target_state = burn_in_state(run_critic, target, batch.core_state.critic, b)
        features, _ = run_critic(target, b, W + 1, target_state)
        features = features[1:]  # x_{b+1} .. x_W

        def target_q(a):
            return self.critic.apply(target, features, a, method="q")

        q_next, logp_next = self.sac.soft_value(policy_next, target_q, key, members)
        sl = slice(b, W)
        alpha = jnp.exp(state.log_alpha)
        r, d, mask = batch.reward[sl], batch.discount[sl], batch.mask[sl]
        next_states = sg(features[:L])
        if cfg.target == "vtrace":
            y, rho_mean = self.vtrace_targets(policy_next, q_next, logp_next, batch, alpha)
            return y, rho_mean, next_states
        y = self.sac.n_step_targets(r, d, mask, q_next, logp_next, alpha)[:L]
        return y, jnp.ones(()), next_states

    def vtrace_targets(self, policy_next, q_next, logp_next, batch: TraceBatch, alpha):
        """--target vtrace: each learnt step's target r_t + γ v_{t+1}, v_{t+1} V-trace's over
        the n − 1 steps after it, bootstrapped from x_{t+n}: the feed-forward learner's
        targets (`SACLearner.targets`), step by step, on the window's soft values
        (`policy_next`, `q_next`, `logp_next`: at x_{b+1} .. x_W). Returns (targets `[L,
        B]`, the mean ρ over the valid traced steps)."""
        cfg = self.config
        b, L, n = cfg.burn_in, cfg.seq_len, cfg.n_step
        W = b + L + n - 1
        r, d, mask = batch.reward[b:W], batch.discount[b:W], batch.mask[b:W]
        v = q_next - alpha * logp_next  # soft values of x_{b+1} .. x_W
        if n == 1:
            return sg(r + d * v), jnp.ones(())
        # Steps b+1 .. W−1 (index j: position b + 1 + j): their ρ, rewards with the entropy
        # bonus of x_{b+1+j} (as `SACLearner.targets`), discounts and masks.
        mu = jax.tree.map(lambda x: x[b + 1 : W], batch.mu)
        policy = jax.tree.map(lambda x: x[:-1], policy_next)
        action = batch.action[b + 1 : W]
        rho = sg(self.sac.importance_ratio(self.sac.log_prob_of(policy, action, mu), action, mu))
        soft_r = r[1:] - alpha * logp_next[:-1]
        windows = jnp.arange(L)[:, None] + jnp.arange(n - 1)[None, :]  # [L, n − 1]

        def traced(j):  # the V-trace value at x_{t+1} of learnt step t, over steps j
            out = losses.vtrace(
                v[j], v[j[-1] + 1], soft_r[j], d[1:][j], rho[j], cfg.vtrace_lambda,
                cfg.vtrace_rho, cfg.vtrace_c, mask_t=mask[1:][j],
            )  # fmt: skip
            return out.vs[0]

        vs1 = jax.vmap(traced)(windows)  # [L, B]
        valid = mask[1:]
        rho_mean = jnp.sum(valid * rho) / jnp.maximum(jnp.sum(valid), 1.0)
        return sg(r[:L] + d[:L] * vs1), sg(rho_mean)

    def update(self, state: SACState, batch: TraceBatch, axis_name=None, hparams=None):
        """One update on B windows (module docstring), with a population member's
        `hparams` or the config's. Pure; returns (state, metrics, the mean |TD| over each
        sequence's valid learnt steps [B], the refreshed states (leaves `[M, B, ...]`) or ()
        without --refresh-stored-state)."""
        self._check(batch)
        cfg, opts = self.config, self.sac.optimizers_for(hparams)
        if cfg.noisy:
            state = self.fresh_noise(state)
        b, L = cfg.burn_in, cfg.seq_len
        key, k_members, k_target, k_actor = jax.random.split(state.key, 4)
        members = draw_members(k_members, cfg.num_critics, cfg.critic_subset)  # all devices'
        if axis_name is not None:  # each device its own sampled actions for its rows
            k_target, k_actor = device_keys(axis_name, k_target, k_actor)
        alpha = jnp.exp(state.log_alpha)

        # The actor: one forward pass over burn-in and learnt steps, differentiated later.
        diff = state.params["actor"]
        if axis_name is not None:
            diff = jax.tree.map(lambda x: jax.lax.pcast(x, (axis_name,), to="varying"), diff)
        policy, pull_back, (actor_end, actor_states) = jax.vjp(
            lambda p: self.actor_forward(p, batch), diff, has_aux=True
        )
        y, rho_mean, next_states = self.sequence_targets(
            state, batch, policy, actor_end, k_target, members
        )
        mask = batch.mask[b : b + L]

        if self.prediction is None:
            (value_loss, q, feats, critic_states), grads, critic_norm = grads_and_aux(
                lambda c: self.critic_loss(c, batch, y), state.params["critic"], axis_name
            )
            prediction, prediction_metrics = state.prediction, {}
        else:
            (
                (value_loss, q, feats, critic_states),
                grads,
                critic_norm,
                prediction,
                prediction_metrics,
            ) = self.predicting_critic_grads(state, batch, y, next_states, opts, axis_name)
        critic, critic_opt = apply(
            opts["critic"], grads, state.opt_state["critic"], state.params["critic"]
        )

        # The actor against the critics before their step, on their unroll's features.
        def actor_loss(policy):
            return self.actor_loss(policy, state.params["critic"], feats, batch, k_actor, alpha)

        cotangent, (policy_loss, logp, aux) = jax.grad(actor_loss, has_aux=True)(policy)
        (actor_grads,) = pull_back(cotangent)
        if axis_name is not None:
            actor_grads = jax.lax.pmean(actor_grads, axis_name)
        actor_norm = optax.tree.norm(actor_grads)
        alpha_l, alpha_grads = self.sac.alpha_grads(state.log_alpha, aux, mask, axis_name)
        actor, actor_opt, log_alpha, alpha_opt = self.sac.policy_step(
            state, actor_grads, alpha_grads, opts
        )
        new, metrics, td = self.sac.finish_update(
            state,
            key,
            axis_name,
            (actor, critic, log_alpha),
            (actor_opt, critic_opt, alpha_opt),
            mask,
            q,
            y,
            logp,
            hparams,
            value_loss=value_loss,
            policy_loss=policy_loss,
            alpha_loss=alpha_l,
            alpha=alpha,
            rho_mean=rho_mean,
            critic_grad_norm=critic_norm,
            actor_grad_norm=actor_norm,
            **prediction_metrics,
        )  # td: [L, B] (q: the members' mean)
        new = new._replace(prediction=prediction)
        td_seq = jnp.sum(mask * td, 0) / jnp.maximum(jnp.sum(mask, 0), 1.0)
        refreshed = ()
        if cfg.refresh_stored_state:
            refreshed = self._refreshed(actor_states, critic_states, batch)
        return new, metrics, td_seq, refreshed
