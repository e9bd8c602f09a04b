"""The on-policy learner shared by PPO and A2C: one pure `update(state, rollout, axis_name,
hparams) -> (state, metrics, ())`, the signature of every learner, that learns from a fresh
rollout (no priorities: nothing is replayed).

One update (Schulman et al. 2017, Algorithm 1; A2C is the special case of one epoch, one
minibatch and no ratio clipping):

1. the rollout's rewards go through the user's `reshape_reward` hook and, with
   `normalize_reward`, are divided by the running standard deviation of the discounted
   return (learner state: the statistics, and each env's discounted return so far);
2. advantages by GAE(λ) (or n-step returns, A2C's `--n-step`) from the values the actor
   recorded and V(x_T). The trace conventions of `agents.losses` make a time-limit
   truncation bootstrap from the value of the final observation (its discount stays γ; the
   fake auto-reset step after it is masked), and a termination from zero;
3. `epochs` passes, each over `num_minibatches` minibatches: feed-forward minibatches are
   shuffled single steps; recurrent ones are whole env streams cut into chunks of
   `recurrence` steps, each chunk starting from the LSTM state stored at acting time (or,
   with `refresh_memories`, recomputed with the current parameters before each epoch after
   the first). With `prev_action_reward` every step also gets the action and the env reward
   of the step before it (`networks.cores.previous_inputs`: at a chunk's first step from the
   rollout, at the rollout's first step from the stored state), zeroed at episode starts by
   the network. Each minibatch is one `agents.core.learning.gradient_step` (microbatches, pmean
   over devices, global-norm clipping);
4. the running observation statistics take in the rollout's observations (after the
   update: the learner normalised the rollout with the statistics the actor used, so the
   recorded log-probabilities and values are those of the same inputs).

The minibatch loop is a Python loop inside the jit (unrolled) or a `lax.scan` (`update_loop`).
Measured on this 2-core CPU (docs/results/ppo-update-loop): with the Nature CNN a scanned
loop runs the convolution's weight gradient inside a rolled loop, which XLA:CPU executes
13-100x slower (jax-ml/jax#12868, ../shared/PERF-NOTES.md), so `auto` unrolls for image
observations on CPU and scans otherwise (an MLP scans at the same speed and compiles
faster).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from agents import losses
from agents.core.actors import entropy, log_prob
from agents.core.hooks import HookError, call_hook, config_hook
from agents.core.icm import masked_mean
from agents.core.learning import Hyper, actor_critic_metrics, gradient_step, restart
from agents.core.normalization import RunningStats, normalize
from networks.cores import previous_inputs

Array = jax.Array

METRICS = (
    "loss", "policy_loss", "value_loss", "entropy", "grad_norm", "approx_kl",
    "clip_fraction", "explained_variance", "lr",
)  # fmt: skip


def _tmap(fn, *trees):
    """`jax.tree.map` over observations (an array or a pytree of arrays)."""
    return jax.tree.map(fn, *trees)


class LearnerState(NamedTuple):
    params: Any
    opt_state: Any
    step: Array  # int32 count of updates (rollouts learnt from)
    key: Array  # minibatch shuffling
    obs_stats: Any  # RunningStats of the (preprocessed) observations, or () when off
    return_stats: Any  # RunningStats of the discounted return (reward scaling), or ()
    # [num_envs] each env's discounted return so far (reward scaling; all envs, replicated
    # over devices), or (). Episode state (`agents.core.learning.episode_fields`):
    # checkpointed with the learner, zeroed by the new episodes' first step after a resume
    # without --exact-resume; PBT leaves each member its own.
    returns: Any
    icm: Any = ()  # agents.core.icm.ICMState with --icm-coef, or ()

    EPISODE_FIELDS = ("returns",)


class MiniBatch(NamedTuple):
    """Time-major `[L, b, ...]` (L = 1 for feed-forward samples, the BPTT length when
    recurrent), with the chunks' initial LSTM states batch-major."""

    obs: Array
    first: Array
    action: Array
    logp: Array  # log π_old(a_t|x_t), recorded when acting
    value: Array  # V_old(x_t), recorded when acting
    adv: Array
    ret: Array
    mask: Array
    prev: Any  # (previous action, previous env reward) of every step, or () (prev_action_reward)
    core_state: Any


class RolloutBuffer(NamedTuple):
    """A prepared rollout (`OnPolicyLearner.prepare`): what the minibatch updates read."""

    data: MiniBatch  # time-major [T, B, ...]; core_state () (the chunks' states are `starts`)
    starts: Any  # LSTM state before each chunk of `bptt` steps, [T / bptt, B, ...], or ()
    core0: Any  # LSTM state before x_0, [B, ...], or ()
    key: Array  # shuffling key (the same on every device; each folds in its index)
    lr: Array  # this update's learning rate
    clip_eps: Array  # this update's clipping range (0 when the agent does not clip)
    explained_variance: Array
    curiosity: dict  # ICM's metrics of this rollout (--icm-coef; logged with every
    # minibatch's), or {}


def buffer_specs(data_axis):
    """PartitionSpecs of a RolloutBuffer sharded over envs."""
    P = jax.sharding.PartitionSpec
    return RolloutBuffer(
        data=P(None, data_axis), starts=P(None, data_axis), core0=P(data_axis),
        key=P(), lr=P(), clip_eps=P(), explained_variance=P(), curiosity=P(),
    )  # fmt: skip


def _chunks(x, length: int):
    """[T, b, ...] -> [length, (T / length)·b, ...] (chunk-major, then env)."""
    T, b = x.shape[:2]
    x = x.reshape((T // length, length, b, *x.shape[2:]))
    return jnp.swapaxes(x, 0, 1).reshape((length, (T // length) * b, *x.shape[3:]))


class OnPolicyLearner:
    """Pure functions of the learner (module docstring), closed over the config, the
    network, the optimizer and the env's action space.

    `make_optimizer(learning_rate) -> optax.GradientTransformation` builds the optimizer
    without clipping (Adam for PPO, RMSprop for A2C); global-norm clipping is chained in
    front and the learning rate is a hyperparameter set before every update (annealing)."""

    def __init__(
        self, config, network, make_optimizer, *, discrete: bool, num_devices: int = 1,
        unroll: bool = False, curiosity=None,
    ):  # fmt: skip
        """`unroll`: `update` runs the epochs x minibatches as a Python loop inside the
        program, not as nested `lax.scan`s (`update_loop`, module docstring); `curiosity`:
        the `agents.core.icm.ICM` of --icm-coef, or None."""
        self.config, self.network, self.discrete = config, network, discrete
        self.curiosity = curiosity
        self.num_devices, self.unroll = num_devices, unroll
        self.recurrent = bool(config.lstm_size)
        self.prev_action_reward = bool(config.prev_action_reward)
        self.reshape_reward, self.preprocess_obs = (
            None if getattr(config, name) is None else config_hook(config, name)
            for name in ("reshape_reward", "preprocess_obs")
        )

        def make(learning_rate):
            return optax.chain(
                optax.clip_by_global_norm(config.max_grad_norm), make_optimizer(learning_rate)
            )

        self.injected = optax.inject_hyperparams(make)
        self.optimizer = self.injected(learning_rate=config.lr)

    # ------------------------------------------------------------------ observations
    def prepare_obs(self, obs, obs_stats):
        """The network's input: the `preprocess_obs` hook, then normalisation (if on)."""
        if self.preprocess_obs is not None:
            obs = call_hook("preprocess_obs", self.preprocess_obs, obs)
        if obs_stats == ():
            return obs
        # an array: --normalize-obs refuses pytrees
        return normalize(obs, obs_stats, self.config.obs_clip)

    def preprocessed(self, obs):
        if self.preprocess_obs is None:
            return obs
        return call_hook("preprocess_obs", self.preprocess_obs, obs)

    def init(self, key, sample_obs) -> LearnerState:
        """sample_obs: one observation batch `[B, *obs_shape]`."""
        cfg = self.config
        init_key, key = jax.random.split(key)
        x = self.preprocessed(sample_obs)
        b = jax.tree.leaves(x)[0].shape[0]
        if self.recurrent:
            params = self.network.init(
                init_key,
                _tmap(lambda o: o[None], x),
                jnp.zeros((1, b), bool),
                self.network.initial_state(b),
            )
        else:
            params = self.network.init(init_key, x)
        return LearnerState(
            params=params,
            opt_state=self.optimizer.init(params),
            step=jnp.zeros((), jnp.int32),
            key=key,
            obs_stats=RunningStats.zeros(x.shape[1:]) if cfg.normalize_obs else (),
            return_stats=RunningStats.zeros() if cfg.normalize_reward else (),
            returns=jnp.zeros((cfg.num_envs,), jnp.float32) if cfg.normalize_reward else (),
            icm=() if self.curiosity is None else self.curiosity.init(
                jax.random.fold_in(init_key, 1), sample_obs
            ),
        )  # fmt: skip

    def forward(self, params, obs, first, core, prev=()):
        """(dist, value) over time-major `[L, b, ...]` inputs (already prepared); `prev`: the
        (previous action, previous reward) of every step, or ()."""
        if self.recurrent:
            (dist, value), _ = self.network.apply(params, obs, first, core, *prev)
            return dist, value
        return self.network.apply(params, obs)

    # ------------------------------------------------------------------ schedules
    def progress(self, step):
        """1 − (env steps so far) / anneal_steps, floored at 0 (1 without annealing)."""
        cfg = self.config
        if not cfg.anneal_steps:
            return jnp.float32(1.0)
        done = step.astype(jnp.float32) * (cfg.num_envs * cfg.trace_len)
        return jnp.maximum(1.0 - done / cfg.anneal_steps, 0.0)

    # ------------------------------------------------------------------ rewards
    def _scale_rewards(self, state: LearnerState, reward, first, axis_name, cfg):
        """Rewards ÷ the running std of the discounted return (statistics over all
        devices); `state.returns` carries each env's discounted return across rollouts
        (under `shard_map` each device's envs are its slice of them). `cfg`: the update's
        `Hyper` (its discount)."""

        def step(acc, x):
            r, f = x
            acc = r + cfg.discount * acc * (1.0 - f)
            return acc, acc

        xs = (reward, first.astype(jnp.float32))
        if axis_name is None:
            returns, per_step = jax.lax.scan(step, state.returns, xs)
        else:  # this device's envs; then all of them again, replicated: a psum of the
            b = reward.shape[1]  # devices' disjoint slices (exact: the rest are zeros)
            start = jax.lax.axis_index(axis_name) * b
            mine = jax.lax.dynamic_slice_in_dim(state.returns, start, b)
            mine, per_step = jax.lax.scan(step, mine, xs)
            zeros = jnp.zeros_like(state.returns)
            returns = jax.lax.psum(
                jax.lax.dynamic_update_slice_in_dim(zeros, mine, start, 0), axis_name
            )
        stats = state.return_stats.update(per_step, 2, axis_name)
        c = cfg.scaled_reward_clip
        scaled = jnp.clip(reward * jax.lax.rsqrt(stats.var + 1e-8), -c, c)
        return state._replace(return_stats=stats, returns=returns), scaled

    def _add_curiosity(self, state: LearnerState, traj, obs, reward, axis_name):
        """ICM (agents/core/icm.py) on the rollout's transitions (x_t, a_t, x_{t+1}), raw
        observations: its statistics take them in, --icm-coef times their intrinsic rewards
        are added to `reward`, and its networks take one step on all of them. Returns
        (state, reward, ICM's metrics)."""
        icm, steps = self.curiosity, traj.steps
        mask, action = steps["mask"], steps["action"]
        own = icm.observe_rollout(state.icm, traj, axis_name)
        r_int = icm.rewards(own, obs[:-1], action, obs[1:], mask)
        own, metrics = icm.train(own, obs[:-1], action, obs[1:], mask, axis_name)
        metrics["intrinsic_reward"] = masked_mean(r_int, mask, axis_name)
        reward = reward + self.config.icm_coef * r_int
        return state._replace(icm=own), reward, metrics

    # ------------------------------------------------------------------ advantages
    def _bootstrap_value(self, params, obs, first, core_t, prev=()):
        """V(x_T) `[B]`. Recurrent: the last step again from its stored state, then x_T."""
        if not self.recurrent:
            return self.network.apply(params, _tmap(lambda o: o[-1], obs))[1]
        core = jax.tree.map(lambda x: x[-1], core_t)
        last = lambda t: _tmap(lambda x: x[-2:], t)  # noqa: E731
        (_, value), _ = self.network.apply(params, last(obs), first[-2:], core, *last(prev))
        return value[-1]

    def _advantages(self, reward, discount, value, bootstrap, mask, cfg):
        if cfg.n_step:
            ret = losses.n_step_returns(reward, discount, value, bootstrap, cfg.n_step, mask_t=mask)
            return mask * (ret - value), ret
        adv = losses.gae(reward, discount, value, bootstrap, cfg.gae_lambda, mask_t=mask)
        return adv, adv + value

    def _chunk_states(self, params, obs, first, core0, prev=()):
        """The LSTM state before every chunk's first step, `[T / L, B, ...]`, recomputed
        with `params` from the rollout's initial state (forward only). With
        `prev_action_reward` only their LSTM part depends on `params`; their previous action
        and reward are those of the chunk's first step in `prev` (as stored when acting)."""
        L = self.config.bptt

        def body(core, xs):
            o, f, p = xs
            _, core_next = self.network.apply(params, o, f, core, *p)
            return core_next, core

        split = lambda t: _tmap(lambda x: x.reshape((x.shape[0] // L, L, *x.shape[1:])), t)  # noqa: E731
        _, starts = jax.lax.scan(body, core0, (split(obs), split(first), split(prev)))
        if prev:
            starts = starts._replace(prev_action=prev[0][::L], prev_reward=prev[1][::L])
        return starts

    # ------------------------------------------------------------------ the loss
    def loss(self, params, mb: MiniBatch, normaliser, clip_eps, hparams=None):
        cfg = Hyper(self.config, hparams)
        dist, value = self.forward(params, mb.obs, mb.first, mb.core_state, mb.prev)
        logp = log_prob(dist, mb.action, self.discrete)
        mask = mb.mask
        if cfg.clip_eps is None:  # A2C: the plain policy gradient −Â·log π
            pg = -mask * jax.lax.stop_gradient(mb.adv) * logp
            log_ratio = mask * jax.lax.stop_gradient(logp - mb.logp)
            kl = mask * (jnp.expm1(log_ratio) - log_ratio)
            clipped = None
        else:
            out = losses.ppo_clip_loss(logp, mb.logp, mb.adv, clip_eps, mask_t=mask)
            pg, kl, clipped = out.loss, out.approx_kl, out.clipped
        if cfg.clip_value:
            value_loss = losses.clipped_value_loss(value, mb.value, mb.ret, clip_eps, mask_t=mask)
        else:
            value_loss = 0.5 * mask * jnp.square(value - jax.lax.stop_gradient(mb.ret))
        ent = mask * entropy(dist, self.discrete)
        total = jnp.sum(pg + cfg.value_weight * value_loss - cfg.entropy_weight * ent)
        stats = {
            "policy_loss": jnp.sum(pg),
            "value_loss": jnp.sum(value_loss),
            "entropy": jnp.sum(ent),
            "approx_kl": jnp.sum(kl),
            "valid": jnp.sum(mask),
        }
        if cfg.clip_eps is not None:
            stats["clip_fraction"] = jnp.sum(clipped)
        return total / normaliser, (stats, None)

    # ------------------------------------------------------------------ the update
    def prepare(self, state: LearnerState, traj, axis_name=None, hparams=None):
        """Steps 1, 2 and 4 of the module docstring: (state, RolloutBuffer). The state's
        step, key, statistics and learning rate advance here; its params do not. `hparams`:
        a population member's hyper-parameters, None for the config's."""
        cfg = Hyper(self.config, hparams)
        steps, mu = traj.steps, traj.steps["mu"]
        T = cfg.trace_len
        obs = _tmap(
            lambda o, last: jnp.concatenate([o, last[None]], axis=0), traj.obs, traj.last_obs
        )
        first = jnp.concatenate([steps["first"], traj.last_first[None]], axis=0)
        action, reward = steps["action"], steps["reward"]
        discount, mask = steps["discount"], steps["mask"]
        # The previous action and env reward of x_0..x_T, as the actor fed them back (before
        # the reward hooks and scaling below).
        prev = previous_inputs(traj.core_state, action, reward) if self.prev_action_reward else ()
        if self.reshape_reward is not None:
            done = discount == 0.0
            reward = call_hook("reshape_reward", self.reshape_reward, obs[1:], action, reward, done)
            if jnp.shape(reward) != mask.shape:
                raise HookError(
                    f"--reshape-reward hook returned shape {jnp.shape(reward)}, expected the "
                    f"reward's [T, B] = {mask.shape}"
                )
            reward = jnp.asarray(reward, jnp.float32)
        curiosity = {}
        if self.curiosity is not None:
            state, reward, curiosity = self._add_curiosity(state, traj, obs, reward, axis_name)
        if cfg.normalize_reward:
            state, reward = self._scale_rewards(state, reward, steps["first"], axis_name, cfg)
        raw_obs = self.preprocessed(obs)
        x = self.prepare_obs(obs, state.obs_stats)  # the statistics the actor used
        value, old_logp, core_t = mu["value"], mu["logp"], mu["core"]
        bootstrap = self._bootstrap_value(state.params, x, first, core_t, prev)
        adv, ret = self._advantages(reward, discount, value, bootstrap, mask, cfg)

        frac = self.progress(state.step)
        lr = jnp.asarray(cfg.lr * frac, jnp.float32)
        clip = 0.0 if cfg.clip_eps is None else cfg.clip_eps * (frac if cfg.anneal_clip else 1.0)
        opt_state = state.opt_state
        opt_state = opt_state._replace(hyperparams={**opt_state.hyperparams, "learning_rate": lr})
        key, shuffle_key = jax.random.split(state.key)
        obs_stats = state.obs_stats
        if obs_stats != ():
            obs_stats = obs_stats.update(raw_obs[:-1], 2, axis_name)
        buffer = RolloutBuffer(
            data=MiniBatch(
                obs=_tmap(lambda o: o[:T], x),
                first=first[:T],
                action=action,
                logp=old_logp,
                value=value,
                adv=adv,
                ret=ret,
                mask=mask,
                prev=_tmap(lambda p: p[:T], prev),
                core_state=(),
            ),
            starts=jax.tree.map(lambda c: c[:: cfg.bptt], core_t) if self.recurrent else (),
            core0=traj.core_state,
            key=shuffle_key,
            lr=lr,
            clip_eps=jnp.asarray(clip, jnp.float32),
            explained_variance=_explained_variance(value, ret, mask, axis_name),
            curiosity=curiosity,
        )
        state = state._replace(
            opt_state=opt_state, step=state.step + 1, key=key, obs_stats=obs_stats
        )
        return state, buffer

    def refresh(self, state: LearnerState, buffer: RolloutBuffer, axis_name=None):
        """The buffer with its chunks' initial LSTM states recomputed with the current
        params (recurrent with more than one chunk; the identity otherwise)."""
        if not self.recurrent or buffer.data.mask.shape[0] == self.config.bptt:
            return buffer  # one chunk: its start is the rollout's stored initial state
        d = buffer.data
        return buffer._replace(
            starts=self._chunk_states(state.params, d.obs, d.first, buffer.core0, d.prev)
        )

    def permutation(self, buffer: RolloutBuffer, epoch, axis_name=None):
        """Epoch `epoch`'s random order of the local steps (feed-forward) or envs
        (recurrent), which its minibatches partition."""
        T, B = buffer.data.mask.shape
        key = jax.random.fold_in(buffer.key, epoch)
        if axis_name is not None:
            key = jax.random.fold_in(key, jax.lax.axis_index(axis_name))
        return jax.random.permutation(key, B if self.recurrent else T * B)

    def minibatch(
        self, buffer: RolloutBuffer, epoch, index, axis_name=None, order=None
    ) -> MiniBatch:
        """Minibatch `index` of epoch `epoch` (ints or int32 arrays): a random partition of
        the local steps (feed-forward) or envs (recurrent), drawn per epoch; `order`: the
        epoch's `permutation`, when the caller drew it once for all its minibatches."""
        cfg, d = self.config, buffer.data
        T, B = d.mask.shape
        M = cfg.num_minibatches
        if order is None:
            order = self.permutation(buffer, epoch, axis_name)
        fields = MiniBatch._fields[:-1]
        if self.recurrent:  # whole env streams, cut into chunks of L steps
            size = B // M
            idx = jax.lax.dynamic_slice_in_dim(order, index * size, size)
            core = jax.tree.map(lambda s: jnp.take(s, idx, axis=1), buffer.starts)
            core = jax.tree.map(lambda s: s.reshape((-1, *s.shape[2:])), core)
            pick = lambda t: _tmap(lambda x: _chunks(jnp.take(x, idx, axis=1), cfg.bptt), t)  # noqa: E731
            return MiniBatch(*(pick(getattr(d, k)) for k in fields), core_state=core)
        size = T * B // M
        idx = jax.lax.dynamic_slice_in_dim(order, index * size, size)

        def flat(t):
            return _tmap(lambda x: jnp.take(x.reshape((T * B, *x.shape[2:])), idx, axis=0)[None], t)

        return MiniBatch(*(flat(getattr(d, k)) for k in fields), core_state=())

    def minibatch_update(
        self, state: LearnerState, buffer: RolloutBuffer, epoch, index, axis_name=None, order=None,
        hparams=None,
    ):  # fmt: skip
        """One gradient step on one minibatch: (state, metrics)."""
        cfg = self.config
        mb = self.minibatch(buffer, epoch, index, axis_name, order)
        if cfg.normalize_advantages:
            mb = mb._replace(
                adv=losses.normalize_advantages(mb.adv, mask_t=mb.mask, axis_name=axis_name)
            )
        clip = None if cfg.clip_eps is None else buffer.clip_eps
        step = self.gradient_step_on(
            state.params, state.opt_state, mb, axis_name, clip_eps=clip, hparams=hparams
        )
        h = Hyper(cfg, hparams)
        metrics = actor_critic_metrics(
            step, value_weight=h.value_weight, entropy_weight=h.entropy_weight
        )
        metrics["explained_variance"] = buffer.explained_variance
        metrics["lr"] = buffer.lr
        metrics.update(buffer.curiosity)
        return state._replace(params=step.params, opt_state=step.opt_state), metrics

    def update(self, state: LearnerState, traj, axis_name=None, hparams=None):
        """The whole update in one program: `prepare`, then epochs x minibatches as a
        Python loop (`unroll`) or nested `lax.scan`s, with a population member's `hparams`
        or the config's. Returns (state, metrics: a dict of `[E·M]` arrays, one entry per
        minibatch update, `()`: no priorities)."""
        cfg = self.config
        state, buffer = self.prepare(state, traj, axis_name, hparams)
        E, M = cfg.epochs, cfg.num_minibatches
        refresh = self.recurrent and cfg.refresh_memories

        def one_update(carry, i):
            st, buf, e, order = carry
            st, m = self.minibatch_update(st, buf, e, i, axis_name, order, hparams)
            return (st, buf, e, order), m

        if self.unroll:
            metrics = []
            for e in range(E):
                if refresh and e > 0:
                    buffer = self.refresh(state, buffer, axis_name)
                order = self.permutation(buffer, e, axis_name)
                for i in range(M):
                    (state, buffer, _, _), m = one_update((state, buffer, e, order), i)
                    metrics.append(m)
            return state, jax.tree.map(lambda *ms: jnp.stack(ms), *metrics), ()

        def one_epoch(carry, e):
            st, buf = carry
            if refresh:
                buf = jax.lax.cond(e > 0, lambda: self.refresh(st, buf, axis_name), lambda: buf)
            order = self.permutation(buf, e, axis_name)
            (st, buf, _, _), ms = jax.lax.scan(one_update, (st, buf, e, order), jnp.arange(M))
            return (st, buf), ms

        (state, _), ms = jax.lax.scan(one_epoch, (state, buffer), jnp.arange(E))
        # [E·M] arrays (engine.programs.metric_sums), not E·M scalar dicts
        return state, jax.tree.map(lambda x: x.reshape((E * M,)), ms), ()

    def optimizer_for(self, hparams):
        """The optimizer whose fresh state holds the member's learning rate (`hparams`) or
        the config's. Its rate lives in its state, which `prepare` sets before every
        update, so one optimizer applies every member's steps."""
        lr = Hyper(self.config, hparams).lr
        return self.injected(learning_rate=lr) if hparams else self.optimizer

    def reset_params(self, state: LearnerState, params, hparams=None) -> LearnerState:
        """`state` from new weights (`agents.core.learning.restart`)."""
        return restart(state, params, self.optimizer_for(hparams))

    def gradient_step_on(self, params, opt_state, mb, axis_name, **extra):
        return gradient_step(
            partial(self.loss, **extra), self.optimizer, params, opt_state, mb,
            chunk=self.config.microbatch_traces, axis_name=axis_name,
        )  # fmt: skip


def _explained_variance(value, ret, mask, axis_name):
    """1 − Var[R − V] / Var[R] over the valid steps (of all devices)."""

    def total(x):
        s = jnp.sum(x)
        return s if axis_name is None else jax.lax.psum(s, axis_name)

    n = jnp.maximum(total(mask), 1.0)

    def var(x):
        m = total(mask * x) / n
        return total(mask * jnp.square(x - m)) / n

    return 1.0 - var(ret - value) / jnp.maximum(var(ret), 1e-8)
