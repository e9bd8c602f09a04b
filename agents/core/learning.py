"""The learner steps every agent shares, written once.

`gradient_step` takes a per-chunk loss and does the rest of an update: it marks replicated
params as device-varying under `shard_map` (so each device differentiates its own shard),
splits the batch into microbatches whose gradients it sums inside the same jit, averages
gradients over devices with `lax.pmean` and sums statistics with `lax.psum`, and applies the
optax optimizer (gradient clipping is part of the optax chain, see `adam_with_clipping`).

`TraceBatch` is the batch every trace learner takes, whether the traces come fresh from a
rollout (`TraceBatch.from_rollout`) or from a replay (`TraceBatch.from_sample`).

Why microbatches: on XLA:CPU one big batch is slower per sample than several small ones (a
Nature CNN update on 256 frames ran 2.4x faster as 8 chunks of 32 in one jit, same maths).
The chunks are a Python loop inside the jit, unrolled on purpose: a convolution's weight
gradient inside a rolled `lax.scan` is 13-100x slower on XLA:CPU (jax-ml/jax#12868).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

Array = jax.Array


class TraceBatch(NamedTuple):
    """A time-major batch of B traces of T steps. obs/first have T+1 steps, the rest T."""

    obs: Any  # [T+1, B, ...]; a pytree with leaves [T+1, B, ...] for dict observations
    first: Array  # [T+1, B]
    action: Array  # [T, B] (int32) or [T, B, *action_shape] (float)
    mu: Any  # behaviour statistics, leaves [T, B, ...] (μ(·|x_t) [T, B, A] when discrete)
    reward: Array  # [T, B]
    discount: Array  # [T, B]  γ·(1 − terminated_{t+1})
    mask: Array  # [T, B]  1 − first_{t+1}
    core_state: Any  # recurrent state before x_0, leaves [B, ...], or ()
    is_weight: Array  # [B] importance weights of prioritized replay (ones otherwise)
    # [T, B] the env's reward where `reward` carries a curiosity bonus (agents/core/offpolicy.py:
    # what a recurrent core is fed as its previous reward, as when acting), or ()
    env_reward: Any = ()

    @classmethod
    def from_rollout(cls, traj) -> TraceBatch:
        """The traces of a fresh rollout (agents.core.rollout.Rollout)."""
        steps = traj.steps
        return cls(
            obs=jax.tree.map(
                lambda xs, x: jnp.concatenate([xs, x[None]], axis=0), traj.obs, traj.last_obs
            ),
            first=jnp.concatenate([steps["first"], traj.last_first[None]], axis=0),
            action=steps["action"],
            mu=steps["mu"],
            reward=steps["reward"],
            discount=steps["discount"],
            mask=steps["mask"],
            core_state=traj.core_state,
            is_weight=jnp.ones(traj.last_first.shape, jnp.float32),
        )

    @classmethod
    def from_sample(cls, sample, trace_len: int) -> TraceBatch:
        """The traces of a `replay.ReplaySample` of `trace_len` transitions (`trace_len + 1`
        stored steps, the replay's `window_len` + 1 with a look-back or look-ahead; the
        transition fields of the last one belong to the next trace and are dropped)."""
        steps = sample.traces.steps

        def first_t(x):
            return jax.tree.map(lambda y: y[:trace_len], x)

        return cls(
            obs=sample.traces.obs,
            first=steps["first"],
            action=first_t(steps["action"]),
            mu=first_t(steps["mu"]),
            reward=first_t(steps["reward"]),
            discount=first_t(steps["discount"]),
            mask=first_t(steps["mask"]),
            core_state=sample.traces.extras,
            is_weight=sample.info.is_weight,
        )


BATCH_MAJOR = ("core_state", "is_weight")


def slice_batch(batch, start: int, size: int, batch_major: tuple[str, ...] = BATCH_MAJOR):
    """Sequences start..start+size of a NamedTuple batch: fields are time-major `[T, B, ...]`
    except those named in `batch_major` (`[B, ...]`)."""
    fields = {}
    for name, value in batch._asdict().items():
        axis = 0 if name in batch_major else 1
        fields[name] = jax.tree.map(
            lambda x, axis=axis: jax.lax.slice_in_dim(x, start, start + size, axis=axis), value
        )
    return type(batch)(**fields)


# What a population may vary in the actor-critic agents' configs (ACER, the Reactor, PPO, A2C):
# fields read only as numbers in their learners, and the discount the rollout writes.
ACTOR_CRITIC_TUNABLE: dict[str, tuple[float, float]] = {
    "lr": (1e-7, 1.0),
    "entropy_weight": (0.0, 1.0),
    "discount": (0.5, 1.0),
}


class Hyper:
    """The hyper-parameters one update reads: a population member's `values` (`field ->
    scalar`, traced inside the population's programs; engine/population.py) where
    given, the config's fields otherwise. A learner reads its config through it
    (`cfg = Hyper(self.config, hparams)`, then `cfg.lr` as before), so a member's values
    reach the update as an argument: nothing is written into a (frozen) config."""

    __slots__ = ("config", "values")

    def __init__(self, config, values: dict | None = None):
        self.config, self.values = config, values or {}

    def __getattr__(self, name: str):
        values = self.values  # found by normal lookup: __getattr__ only sees other names
        return values[name] if name in values else getattr(self.config, name)


def linear_decay(lr, anneal_steps: int, start_train_at: int, updates_per_env_step):
    """`lr`, or with `anneal_steps` > 0 an optax schedule over the optimizer's update count:
    lr·(1 − k/U) at update k, 0 from U on, where U = (anneal_steps − start_train_at) ·
    updates_per_env_step is the number of updates made by env step `anneal_steps`."""
    if not anneal_steps:
        return lr
    updates = max(1.0, (anneal_steps - start_train_at) * updates_per_env_step)
    return lambda count: lr * jnp.clip(1.0 - count / updates, 0.0, 1.0)


def adam_with_clipping(lr, max_grad_norm, **adam_kwargs) -> optax.GradientTransformation:
    """Clip by global norm, then Adam; `max_grad_norm` <= 0: Adam alone (the off-policy
    agents' --max-grad-norm 0)."""
    if max_grad_norm <= 0:
        return optax.adam(lr, **adam_kwargs)
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(lr, **adam_kwargs))


def draw_members(key, num_critics: int, subset: int):
    """`subset` distinct critic indices drawn uniformly (REDQ's M of N), `[M]` int32."""
    if subset == num_critics:
        return jnp.arange(num_critics)
    return jax.random.permutation(key, num_critics)[:subset]


def ensemble_min(q, members):
    """min over the drawn members of an ensemble's outputs `[N, ...]`."""
    return jnp.min(jnp.take(q, members, axis=0), axis=0)


class GradientStep(NamedTuple):
    params: Any  # after the optimizer step
    opt_state: Any
    grad_norm: Array  # global L2 norm of the (device-averaged) gradient, before clipping
    sums: dict  # the loss's summed statistics, over chunks and devices
    per_sequence: Any  # the loss's per-sequence outputs, [B_local] leaves, in batch order
    num_steps: Array | int  # T·B over all devices: the steps the sums are over


def gradient_step(
    loss_fn,
    optimizer: optax.GradientTransformation,
    params,
    opt_state,
    batch: TraceBatch,
    *,
    chunk: int = 0,
    axis_name: str | None = None,
) -> GradientStep:
    """One optimizer step on a batch of traces (module docstring).

    Args:
      loss_fn: `loss_fn(params, chunk_batch, normaliser) -> (loss, (sums, per_sequence))`,
        where `loss` is the chunk's summed loss divided by `normaliser` (T·B of the whole
        local batch, so chunk gradients add up to the batch gradient), `sums` a dict of
        summed statistics and `per_sequence` a pytree of `[chunk]` arrays (or None).
      chunk: sequences per microbatch (0: the whole batch at once).
      axis_name: the mesh axis under `shard_map` (None on one device).
    """
    T, num_sequences = batch.mask.shape
    chunk = chunk or num_sequences
    if num_sequences % chunk:
        raise ValueError(f"batch of {num_sequences} is not divisible by microbatch {chunk}")
    diff_params = params
    if axis_name is not None:
        # Mark the replicated params device-varying before differentiating: otherwise
        # shard_map's autodiff psums the cotangent of a replicated input itself and the
        # gradients come out summed over devices. Each device then holds its local gradient
        # and the pmean below averages them (equal shards: the gradient of the global mean).
        diff_params = jax.tree.map(lambda x: jax.lax.pcast(x, (axis_name,), to="varying"), params)
    grad_fn = jax.grad(loss_fn, has_aux=True)
    grads, sums, per_sequence = None, None, []
    for start in range(0, num_sequences, chunk):
        g, (s, p) = grad_fn(diff_params, slice_batch(batch, start, chunk), T * num_sequences)
        grads = g if grads is None else jax.tree.map(jnp.add, grads, g)
        sums = s if sums is None else jax.tree.map(jnp.add, sums, s)
        per_sequence.append(p)
    per_sequence = jax.tree.map(lambda *xs: jnp.concatenate(xs), *per_sequence)
    total = num_sequences
    if axis_name is not None:
        grads = jax.lax.pmean(grads, axis_name)
        sums = jax.lax.psum(sums, axis_name)
        total = num_sequences * jax.lax.psum(1, axis_name)
    grad_norm = optax.tree.norm(grads)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return GradientStep(
        optax.apply_updates(params, updates), opt_state, grad_norm, sums, per_sequence, T * total
    )


def grads_and_aux(loss_fn, params, axis_name):
    """(aux, grads, grad norm) of `loss_fn(params) -> (loss, aux)`, gradients averaged over
    the data-parallel axis (replicated params marked varying first, as in
    `gradient_step`). `aux` stays this device's own: its per-row arrays (Q values, TD
    errors, recurrent states) belong to this device's rows; the callers average their
    metrics over devices themselves."""
    diff = params
    if axis_name is not None:
        diff = jax.tree.map(lambda x: jax.lax.pcast(x, (axis_name,), to="varying"), params)
    grads, aux = jax.grad(loss_fn, has_aux=True)(diff)
    if axis_name is not None:
        grads = jax.lax.pmean(grads, axis_name)
    return aux, grads, optax.tree.norm(grads)


def apply(optimizer, grads, opt_state, params):
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def actor_critic_metrics(step: GradientStep, *, value_weight, entropy_weight) -> dict:
    """The metrics every actor-critic learner logs, with one meaning (docs/command-line.md,
    "Metrics"), from sums over steps: `policy_loss` and `value_loss` (per step), `entropy` (over
    `valid`, the real steps) and any other statistic (averaged over `valid`)."""
    sums = dict(step.sums)
    valid = jnp.maximum(sums.pop("valid"), 1.0)
    n = step.num_steps
    metrics = {k: sums.pop(k) / n for k in ("policy_loss", "value_loss")}
    entropy = sums.pop("entropy")
    metrics["loss"] = (
        metrics["policy_loss"] + value_weight * metrics["value_loss"] - entropy_weight * entropy / n
    )
    metrics["entropy"] = entropy / valid
    metrics["grad_norm"] = step.grad_norm
    metrics.update({k: v / valid for k, v in sums.items()})
    return metrics


def burn_in_state(run, params, state0, steps: int):
    """R2D2's stored state with burn-in (Kapturowski et al. 2019, ICLR, §3): the recurrent
    state stored before a sampled window, `state0`, advanced over the window's first `steps`
    steps by `run(params, start, stop, state) -> (outputs, state)`, then stop_gradient'ed.
    The burn-in steps only refresh the stale stored state; no gradient reaches them (nor
    `state0`). `steps = 0` returns `state0` as it is."""
    if steps == 0:
        return state0
    _, state = run(params, 0, steps, state0)
    return jax.tree.map(jax.lax.stop_gradient, state)


def updates_owed(
    iteration: int,
    env_steps: int,
    steps_per_iteration: int,
    *,
    start_train_at: int,
    updates_per_env_step: float,
    warmup_iterations: int = 1,
) -> int:
    """The replay updates an iteration owes (issue 66: the one update schedule of DQN, R2D1,
    the Reactor, SAC and TD3): `updates_per_env_step` per env step after `start_train_at`,
    counted as floor(steps · rate) of the env steps before and after the iteration, none in
    the first `warmup_iterations` (until a trace and the look-ahead it needs are written). A
    pure function of the counts before the iteration, so a resumed run and every process
    agree. The 1e-9 keeps a rate that is a float's rounding of 1/k (the Reactor's one update
    per k env steps) from landing below a whole number."""
    if iteration < warmup_iterations:
        return 0

    def owed(steps: int) -> int:
        return math.floor(max(0, steps - start_train_at) * updates_per_env_step + 1e-9)

    return owed(env_steps + steps_per_iteration) - owed(env_steps)


def per_importance_exponent(start: float, steps: int, env_steps):
    """Prioritized replay's importance-sampling exponent β after `env_steps` env steps:
    linear from `start` to 1 over `steps` env steps, then 1 (Schaul et al. 2016, §3.4:
    "linearly annealing β from its initial value β0 to 1" at the end of learning); held at
    `start` when `steps` is 0."""
    if not steps:
        return jnp.asarray(start, jnp.float32)
    frac = jnp.clip(jnp.asarray(env_steps).astype(jnp.float32) / steps, 0.0, 1.0)
    return start + (1.0 - start) * frac


def at_steps(obs, index):
    """`obs[index]` of a time-major observation, an array or a pytree of arrays (a dict
    observation: every leaf indexed the same way)."""
    return jax.tree.map(lambda x: x[index], obs)


def batch_size_of(obs) -> int:
    """The leading axis of a batched observation (an array or a pytree of arrays)."""
    return jax.tree.leaves(obs)[0].shape[0]


def bounded_td(td_abs, config):
    """|δ| (or a sequence's mixed |δ|) held in [--td-error-min, --td-error-max] before it
    becomes a priority (the flags every agent with prioritized replay has)."""
    return jnp.clip(td_abs, config.td_error_min, config.td_error_max)


def update_target(online, target, update, tau, period: int):
    """The target networks after update number `update` (0-based): a copy of the online
    networks every `period` updates (updates 0, period, 2·period, ...), or, with `period`
    0, Polyak averaging θ' ← τ·θ + (1 − τ)·θ'."""
    if period:
        return optax.periodic_update(online, target, update, period)
    return optax.incremental_update(online, target, tau)


def sample_key(key, axis_name=None):
    """Split the learner's key; under data parallelism each device folds in its index so it
    samples its own envs' traces. Returns (next learner key, sampling key)."""
    key, sub = jax.random.split(key)
    if axis_name is not None:
        (sub,) = device_keys(axis_name, sub)
    return key, sub


def replay_step(replay, replay_state, learner, batch_size: int, update, axis_name=None):
    """One update from a trace replay: `batch_size` traces (this device's share) sampled with
    the learner's key (split; each device draws its own), `update(learner, TraceBatch) ->
    (learner, metrics, priorities [B])`, then the new priorities stored. Returns (learner,
    replay state, metrics)."""
    key, sub = sample_key(learner.key, axis_name)
    sample = replay.sample(replay_state, sub, batch_size, axis_name=axis_name)
    batch = TraceBatch.from_sample(sample, replay.window_len)
    learner, metrics, priorities = update(learner._replace(key=key), batch)
    info = sample.info
    replay_state = replay.set_priorities(replay_state, info.env_index, info.slot, priorities)
    return learner, replay_state, metrics


def device_keys(axis_name, *keys):
    """`keys`, each with this device's index folded in (under data parallelism, where every
    device starts from the same learner key): each device then draws its own noise for its
    rows of the batch, as one device drawing for the whole batch would."""
    index = jax.lax.axis_index(axis_name)
    return tuple(jax.random.fold_in(k, index) for k in keys)


def episode_fields(state) -> tuple[str, ...]:
    """The fields of a learner state (a NamedTuple) that hold state of the member's envs
    rather than of its learning, as its class's `EPISODE_FIELDS` names them (PPO's per-env
    discounted returns): PBT leaves them with each member when it copies a parent's learner
    (engine/population.py), and a checkpoint saved before such a field existed restores
    it as zeros (engine.common.restore_checkpoint; a resumed run starts new episodes)."""
    return tuple(getattr(type(state), "EPISODE_FIELDS", ()))


def member_optimizer(make_optimizer, config, optimizer, hparams: dict | None):
    """The optimizer one update applies: `optimizer` (the config's), or for a population
    member's hyper-parameters `hparams` (traced values; engine/population.py)
    `make_optimizer` of them (a `Hyper` view), whose state has the same structure."""
    return make_optimizer(Hyper(config, hparams)) if hparams else optimizer


def restart(state, params, optimizer, copy_field: str | None = None):
    """A learner's `state` restarted from new weights `params` as its `init` starts its own
    (a population's CEM resampling, engine/population.py): a fresh state of `optimizer` (the
    member's, `member_optimizer`) and the field `copy_field` (a Polyak average, a target
    network), where named, equal to them; the counts, key and statistics kept."""
    fields = {"params": params, "opt_state": optimizer.init(params)}
    if copy_field is not None:  # distinct buffers: both are donated
        fields[copy_field] = jax.tree.map(jnp.copy, params)
    return state._replace(**fields)
