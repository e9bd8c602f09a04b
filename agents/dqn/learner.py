"""The value-based learner of DQN and its variants (and, given a recurrent `unroll`, of R2D1).

One update on a batch of sampled windows (`agents.core.learning.TraceBatch`, `[W+1, B]` steps: a
burn-in of `lookback` steps, `L = learn_len` learnt transitions, `n − 1` look-ahead steps):

- Q values of the learnt steps with gradient, of the n look-ahead observations without
  (for double Q's action selection at the bootstrap states), and the target network's at
  every state after the first learnt one (`unroll`; a recurrent learner burns in first);
- n-step targets for every learnt step from `agents.losses` (`double_q_learning_targets` or
  `q_learning_targets`, optionally value-rescaled; the categorical versions with
  --distributional): each bootstraps from x_{t+n}, or earlier at an episode end (a
  termination zeroes the discount, a time-limit truncation bootstraps from the final
  observation: the trace's discount and mask say which);
- Huber (or squared) TD loss, or C51's cross-entropy, averaged over the learnt transitions,
  each sequence weighted by its prioritized-replay importance weight^β;
- new priorities (η·max + (1 − η)·mean of |δ| over a sequence's valid steps)^α;
- the target network copied every `target_update_period` updates (`optax.periodic_update`).

With --noisy (NoisyNet, arXiv:1706.10295 §3.1) each update draws fresh noise from the state's
key: one draw for the online network's passes, an independent one for the target network's.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.core.learning import (
    GradientStep,
    TraceBatch,
    adam_with_clipping,
    bounded_td,
    gradient_step,
    linear_decay,
    member_optimizer,
    per_importance_exponent,
    restart,
)

Array = jax.Array
sg = jax.lax.stop_gradient

METRICS = ("loss", "grad_norm", "q_mean", "target_mean", "td_abs", "epsilon")
RESCALE_EPS = 1e-3  # R2D2's ε of the value rescaling


class DQNLearnerState(NamedTuple):
    params: Any
    target_params: Any
    opt_state: Any
    step: Array  # updates done
    env_steps: Array  # env steps absorbed (drives the ε schedule; checkpointed)
    key: Array
    icm: Any = ()  # agents.core.icm.ICMState with DQN's --icm-coef (filled by its agent), or ()


class Unrolled(NamedTuple):
    """Network outputs over a window, time-major (`agents.core.learning.TraceBatch` layout)."""

    learn: Any  # QOutput of the L learnt steps, with gradient
    ahead: Any  # QOutput of the n observations after them (x_L .. x_{L+n-1}), no gradient
    target: Any  # target network's QOutput of x_1 .. x_{L+n-1}


def priority_mix(td_abs, valid, eta):
    """Per-sequence priority η·max_t |δ_t| + (1 − η)·mean_t |δ_t| over valid steps (R2D2,
    Kapturowski et al. 2019, §2.3, η = 0.9). `td_abs`, `valid` `[T, B]`; returns `[B]`."""
    count = jnp.sum(valid, axis=0)
    mean = jnp.sum(valid * td_abs, axis=0) / jnp.maximum(count, 1.0)
    peak = jnp.max(jnp.where(valid > 0, td_abs, 0.0), axis=0)
    return eta * peak + (1.0 - eta) * mean


def learning_rate(config):
    """`config.lr`, or with `anneal_steps` an optax schedule over the update count: linear
    from lr to 0 over the updates made by env step `anneal_steps` (a DQN/R2D1 config)."""
    per_step = config.replay_ratio / (config.batch_size * config.learn_len)
    return linear_decay(config.lr, config.anneal_steps, config.start_train_at, per_step)


def dqn_optimizer(config) -> optax.GradientTransformation:
    """Clip by global norm, then Adam, or with --optimizer rmsprop centered RMSProp with
    momentum as PyTorch's `RMSprop(centered=True)` (the MinAtar paper's DQN): with g the
    gradient, v ← ρv + (1 − ρ)g², m ← ρm + (1 − ρ)g, b ← μb + g / (√(v − m²) + ε), and the
    step −lr·b; every moment starts at 0 (a DQNConfig)."""
    lr = learning_rate(config)
    if config.optimizer == "adam":
        return adam_with_clipping(lr, config.max_grad_norm, eps=config.adam_eps)
    rmsprop = optax.rmsprop(
        lr, decay=config.rmsprop_decay, eps=config.rmsprop_eps, eps_in_sqrt=False,
        centered=True, momentum=config.rmsprop_momentum,
    )  # fmt: skip
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), rmsprop)


class DQNLearner:
    """See the module docstring. `config` is a `DQNConfig` (or R2D1's, with its fields);
    `make_optimizer(cfg)` builds its optax optimizer from the config or a `Hyper` view of it
    (`dqn_optimizer`, or Adam with clipping for R2D1). `init_params(key, sample_obs)` and
    `unroll(params, target_params, batch, noise) -> Unrolled` are the feed-forward network's
    unless given (R2D1's recurrent ones: agents/r2d1/learner.py). `hparams` everywhere: a
    population member's hyper-parameters (engine/population.py), None for the config's."""

    def __init__(self, config, network, make_optimizer, *, init_params=None, unroll=None):
        self.config, self.network, self.make_optimizer = config, network, make_optimizer
        self.optimizer = make_optimizer(config)
        self.init_params = init_params  # None: the network's own `init`
        self.unroll = unroll or self.feed_forward_unroll
        cfg = config
        self.atoms = (
            jnp.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms, dtype=jnp.float32)
            if getattr(cfg, "distributional", False)
            else None
        )

    def optimizer_for(self, hparams: dict | None) -> optax.GradientTransformation:
        return member_optimizer(self.make_optimizer, self.config, self.optimizer, hparams)

    def reset_params(self, state, params, hparams: dict | None = None):
        """`state` from new weights (`agents.core.learning.restart`), the target equal."""
        return restart(state, params, self.optimizer_for(hparams), "target_params")

    def init(self, key, sample_obs) -> DQNLearnerState:
        init_key, key = jax.random.split(key)
        params = (self.init_params or self.network.init)(init_key, sample_obs)
        return DQNLearnerState(
            params=params,
            target_params=jax.tree.map(jnp.copy, params),
            opt_state=self.optimizer.init(params),
            step=jnp.zeros((), jnp.int32),
            env_steps=jnp.zeros((), jnp.int32),
            key=key,
        )

    # ------------------------------------------------------------------ the loss
    def feed_forward_unroll(
        self, params, target_params, batch: TraceBatch, noise=(None, None)
    ) -> Unrolled:
        """`unroll` of a feed-forward network: the online network on x_0..x_{L−1} (gradient)
        and x_L..x_{L+n−1}, the target network on x_1..x_{L+n−1}. Only what the targets read
        is computed. `noise`: (online, target) keys of --noisy's noise draws (the online
        passes share one draw), or Nones.

        When the trace is shorter than the return (L < n: data-efficient Rainbow's L = 1,
        n = 20), the look-ahead's 2n − 1 passes per sequence would dwarf the L learnt ones,
        and only the bootstrap states are evaluated (`bootstrap_unroll`: 3L passes)."""
        L = self.config.learn_len
        if L < self.config.n_step:
            return self.bootstrap_unroll(params, target_params, batch, noise)
        k_online, k_target = noise
        ahead = jax.tree.map(sg, self._apply(params, batch.obs[L:], k_online))
        return Unrolled(
            self._apply(params, batch.obs[:L], k_online),
            ahead,
            self._apply(target_params, batch.obs[1:], k_target),
        )

    def _apply(self, params, obs, key):
        if key is None:
            return self.network.apply(params, obs)
        return self.network.apply(params, obs, noise_key=key)

    def bootstrap_steps(self, mask) -> Array:
        """`[L, B]` int32: the window step x_{t+m} each learnt step t bootstraps from in
        `losses.n_step_returns` (m = n, or the first k in 1..n−1 whose step is masked: the
        episode's final observation); t + 1 for a masked learnt step (its loss is masked
        out, and the targets read no later step of it)."""
        L, n = self.config.learn_len, self.config.n_step
        t = jnp.arange(L, dtype=jnp.int32)[:, None]  # [L, 1]
        k = jnp.arange(1, n, dtype=jnp.int32)[None, :]  # [1, n−1]
        ends = mask[t + k] == 0  # [L, n−1, B]: step t+k ends the return
        first = jnp.where(ends.any(axis=1), 1 + jnp.argmax(ends, axis=1), n)  # [L, B]
        first = jnp.where(mask[:L] == 0, 1, first)
        return (t + first).astype(jnp.int32)

    def bootstrap_unroll(self, params, target_params, batch: TraceBatch, noise) -> Unrolled:
        """`unroll`'s outputs with the networks evaluated at the learnt steps and at each
        one's bootstrap step only (`bootstrap_steps`), scattered into `Unrolled`'s layout;
        the steps the targets never read hold zeros. The targets and the loss are those of
        the full unroll (up to float rounding: the batches of the passes differ)."""
        L, n = self.config.learn_len, self.config.n_step
        k_online, k_target = noise
        steps = self.bootstrap_steps(batch.mask)  # [L, B] in 1 .. L+n−1
        envs = jnp.arange(steps.shape[1])[None, :]
        boot_obs = jax.tree.map(lambda x: x[steps, envs], batch.obs)  # [L, B, ...]
        online = jax.tree.map(sg, self._apply(params, boot_obs, k_online))
        target = self._apply(target_params, boot_obs, k_target)

        def scatter(values, rows: int, first: int):
            """`values` at window steps `steps` as rows `steps − first` of `rows` (zeros
            elsewhere); a step before `first` is dropped (its row index is set past the end:
            a negative one would count from the end)."""
            if values is None:
                return None
            out = jnp.zeros((rows, *values.shape[1:]), values.dtype)
            row = jnp.where(steps >= first, steps - first, rows)
            return out.at[row, envs].set(values, mode="drop")

        learn = self._apply(params, batch.obs[:L], k_online)
        ahead = jax.tree.map(lambda v: scatter(v, n, L), online)
        return Unrolled(learn, ahead, jax.tree.map(lambda v: scatter(v, L + n - 1, 1), target))

    def targets(self, out: Unrolled, batch: TraceBatch):
        """The n-step targets of the L learnt steps: `[L, B]` (in h-space with value
        rescaling), or `[L, B, K]` probabilities with --distributional."""
        cfg = self.config
        L, n, back = cfg.learn_len, cfg.n_step, cfg.lookback
        # The steps the targets use: x_0 .. x_{L+n−1} of the learnt part and look-ahead.
        sl = slice(back, back + L + n - 1)
        r, disc, mask = batch.reward[sl], batch.discount[sl], batch.mask[sl]
        online_q = jnp.concatenate([sg(out.learn.q_values), out.ahead.q_values], axis=0)
        # The target network's values of x_0 are never read (every target bootstraps at
        # t + 1 or later): a filler row keeps the time index of the losses' layout.
        if self.atoms is not None:
            tgt = jax.nn.softmax(out.target.q_logits, axis=-1)
            filler = jnp.full_like(tgt[:1], 1.0 / tgt.shape[-1])
            tgt = jnp.concatenate([filler, tgt], axis=0)
            if cfg.double:
                target = losses.categorical_double_q_learning_targets(
                    r, disc, tgt[:-1], tgt[-1], online_q[:-1], online_q[-1], self.atoms, n,
                    mask_t=mask,
                )  # fmt: skip
            else:
                target = losses.categorical_q_learning_targets(
                    r, disc, tgt[:-1], tgt[-1], self.atoms, n, mask_t=mask
                )
            return target[:L]
        tgt = out.target.q_values
        tgt = jnp.concatenate([jnp.zeros_like(tgt[:1]), tgt], axis=0)
        eps = RESCALE_EPS if cfg.value_rescale else None
        if cfg.double:
            target = losses.double_q_learning_targets(
                r, disc, tgt[:-1], tgt[-1], online_q[:-1], online_q[-1], n,
                mask_t=mask, rescale_eps=eps,
            )  # fmt: skip
        else:
            target = losses.q_learning_targets(
                r, disc, tgt[:-1], tgt[-1], n, mask_t=mask, rescale_eps=eps
            )
        return target[:L]

    def loss(self, params, batch: TraceBatch, normaliser, target_params, noise=(None, None)):
        """The loss summed over the learnt steps ÷ `normaliser` (rescaled to a mean over the
        learnt steps), its summed statistics, and the new priorities `[B]`."""
        cfg = self.config
        L, back = cfg.learn_len, cfg.lookback
        out = self.unroll(params, target_params, batch, noise)
        target = self.targets(out, batch)
        a_learn = batch.action[back : back + L]
        mask_learn = batch.mask[back : back + L]
        if self.atoms is not None:
            per_step = losses.categorical_q_learning_loss(
                out.learn.q_logits, a_learn, target, mask_t=mask_learn
            )
            # the cross-entropy as C51's priority, as Dopamine's Rainbow (Hessel et al. 2018
            # §3 prioritise by the KL, which is this minus the target's entropy)
            td_abs = sg(per_step)
            target_mean = jnp.einsum("tbk,k->tb", target, self.atoms)
        else:
            delta = cfg.huber_delta or None
            per_step = losses.q_learning_loss(
                out.learn.q_values, a_learn, target, mask_t=mask_learn, huber_delta=delta
            )
            q_a = jnp.take_along_axis(out.learn.q_values, a_learn[..., None], axis=-1)[..., 0]
            td_abs = sg(jnp.abs(target - q_a))
            target_mean = target
        w = sg(batch.is_weight)[None, :]  # already raised to β by `update`
        # gradient_step divides by the window's steps; the loss is a mean over learnt steps.
        window = batch.reward.shape[0]
        total = jnp.sum(w * per_step) / normaliser * (window / L)
        mixed = priority_mix(td_abs, mask_learn, cfg.priority_eta)
        priorities = bounded_td(mixed, cfg) ** cfg.priority_exponent
        stats = {
            "loss": jnp.sum(per_step),
            "q_mean": jnp.sum(mask_learn * sg(jnp.max(out.learn.q_values, axis=-1))),
            "target_mean": jnp.sum(mask_learn * sg(target_mean)),
            "td_abs": jnp.sum(mask_learn * td_abs),
            "valid": jnp.sum(mask_learn),
        }
        return total, (stats, priorities)

    # ------------------------------------------------------------------ the update
    def update(self, state: DQNLearnerState, batch: TraceBatch, axis_name=None, hparams=None):
        """One gradient step and the periodic target copy. Pure. Returns (state, metrics,
        priorities [B]); the metrics' `epsilon` is the acting agent's to fill (0 here)."""

        cfg = self.config
        beta = per_importance_exponent(
            cfg.importance_exponent, cfg.importance_exponent_steps, state.env_steps
        )
        batch = batch._replace(is_weight=batch.is_weight**beta)
        noise = (None, None)
        if getattr(self.config, "noisy", False):  # NoisyNet: fresh draws every update
            key, k_online, k_target = jax.random.split(state.key, 3)
            state, noise = state._replace(key=key), (k_online, k_target)

        def loss_fn(params, chunk, normaliser):
            return self.loss(params, chunk, normaliser, state.target_params, noise)

        step: GradientStep = gradient_step(
            loss_fn, self.optimizer_for(hparams), state.params, state.opt_state, batch,
            chunk=self.config.microbatch_traces, axis_name=axis_name,
        )  # fmt: skip
        count = state.step + 1
        target = optax.periodic_update(
            step.params, state.target_params, count, self.config.target_update_period
        )
        sums = dict(step.sums)
        valid = jnp.maximum(sums.pop("valid"), 1.0)
        metrics = {k: v / valid for k, v in sums.items()}
        metrics["grad_norm"] = step.grad_norm
        metrics["epsilon"] = jnp.zeros(())
        metrics = {k: metrics[k] for k in METRICS}
        new_state = state._replace(
            params=step.params, target_params=target, opt_state=step.opt_state, step=count
        )
        return new_state, metrics, step.per_sequence
