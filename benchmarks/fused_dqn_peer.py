"""A single-file DQN whose whole training run is one jitted function over gymnax:
`python -m benchmarks.fused_dqn_peer --env Breakout-MinAtar`.

The reference that `benchmarks.bench_gymnax` runs beside our DQN (its `dqn-*` cases),
alternated in the same rounds, as `fused_ppo_peer` is for PPO. It follows the design of
PureJaxRL's `dqn.py` (github.com/luchris429/purejaxrl): a `lax.scan` over iterations, each
one step of every env, its transitions written into a device-resident ring buffer, and
every iteration past the learning start one update on a uniformly sampled batch, all inside
one `jax.jit`. Written here from the algorithm (Mnih et al. 2015), not copied. Its settings
are issue 66's: 10 envs, a ring of 10,000 transitions, batch 128, an update per 10 env steps
(one per iteration of 10 envs), learning from 1,000 env steps, an MLP 120-84 on flattened
observations, Adam 2.5e-4 with gradients clipped to norm 10, Huber loss, a target copy every
5,000 env steps (500 updates; copied every 50 updates, as CleanRL's 500 env steps at one env
would be, both this program and our DQN diverge on CartPole: Q values in the thousands, episodes
of 9.6 steps), ε linear from 1 to 0.05 over half the run. Plain DQN: no double Q, no dueling
head, one-step targets. It has no sticky actions (our `gymnax/*-MinAtar` envs do), no
logging inside the run and no checkpoints: the least work a DQN iteration can be.

Prints one JSON line: env steps/s of the compiled run (compilation timed apart), the compile
time, and the mean return of the episodes that ended in the last 10% of iterations.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import NamedTuple

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax


class QMLP(nn.Module):
    num_actions: int
    hidden: tuple[int, ...] = (120, 84)

    @nn.compact
    def __call__(self, obs):
        x = obs.reshape(obs.shape[0], -1).astype(jnp.float32)
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(self.num_actions)(x)


class Ring(NamedTuple):
    """Transitions `[capacity, ...]`, written `num_envs` at a time at `write`."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    discount: jax.Array  # γ, or 0 after a termination
    next_obs: jax.Array
    write: jax.Array  # int32: the next row written
    size: jax.Array  # int32: rows written so far, at most capacity


def make_train(
    env_id: str,
    total_steps: int,
    num_envs: int = 10,
    capacity: int = 10_000,
    batch_size: int = 128,
    learning_starts: int = 1_000,
    target_every: int = 5_000,
    lr: float = 2.5e-4,
    gamma: float = 0.99,
    max_grad_norm: float = 10.0,
    eps_end: float = 0.05,
    eps_fraction: float = 0.5,
    hidden: tuple[int, ...] = (120, 84),
):
    """`train(key) -> (final params, ([iterations] summed return, [iterations] count) of the
    episodes that ended in each iteration)`."""
    env, env_params = gymnax.make(env_id)
    num_actions = env.action_space(env_params).n
    net = QMLP(num_actions, tuple(hidden))
    iterations = total_steps // num_envs
    tx = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(lr))
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    copy_every = max(1, target_every // num_envs)  # iterations between target copies
    decay_steps = eps_fraction * iterations * num_envs

    def loss_fn(params, target_params, batch: Ring):
        q = net.apply(params, batch.obs)
        q_taken = jnp.take_along_axis(q, batch.action[:, None], 1)[:, 0]
        q_next = net.apply(target_params, batch.next_obs).max(-1)
        target = batch.reward + batch.discount * jax.lax.stop_gradient(q_next)
        return optax.huber_loss(q_taken, target, delta=1.0).mean()

    def train(key):
        key, k_init, k_reset = jax.random.split(key, 3)
        obs, env_state = reset(jax.random.split(k_reset, num_envs), env_params)
        params = net.init(k_init, obs)
        zeros = lambda x, dtype: jnp.zeros((capacity, *x.shape[1:]), dtype)  # noqa: E731
        ring = Ring(zeros(obs, jnp.float32), jnp.zeros(capacity, jnp.int32),
                    jnp.zeros(capacity), jnp.zeros(capacity), zeros(obs, jnp.float32),
                    jnp.int32(0), jnp.int32(0))  # fmt: skip

        def update(learner, ring, key):
            params, target_params, opt_state = learner
            rows = jax.random.randint(key, (batch_size,), 0, ring.size)
            fields = (ring.obs, ring.action, ring.reward, ring.discount, ring.next_obs)
            batch = Ring(*(x[rows] for x in fields), ring.write, ring.size)
            grads = jax.grad(loss_fn)(params, target_params, batch)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), target_params, opt_state

        def iteration(carry, i):
            learner, ring, env_state, obs, ep_ret, key = carry
            key, k_act, k_explore, k_step, k_batch = jax.random.split(key, 5)
            eps = jnp.maximum(eps_end, 1.0 - (1.0 - eps_end) * i * num_envs / decay_steps)
            greedy = net.apply(learner[0], obs).argmax(-1)
            random = jax.random.randint(k_act, (num_envs,), 0, num_actions)
            explore = jax.random.uniform(k_explore, (num_envs,)) < eps
            action = jnp.where(explore, random, greedy)
            keys = jax.random.split(k_step, num_envs)
            next_obs, env_state, reward, terminated, truncated, _ = step(
                keys, env_state, action, env_params
            )
            # gymnax resets inside `step`: the observation after an end is the next
            # episode's; like PureJaxRL, the stored next observation is that one (masked by
            # the discount only at a termination)
            rows = (ring.write + jnp.arange(num_envs)) % capacity
            ring = Ring(
                ring.obs.at[rows].set(obs.astype(jnp.float32)),
                ring.action.at[rows].set(action),
                ring.reward.at[rows].set(reward),
                ring.discount.at[rows].set(gamma * (1.0 - terminated.astype(jnp.float32))),
                ring.next_obs.at[rows].set(next_obs.astype(jnp.float32)),
                (ring.write + num_envs) % capacity,
                jnp.minimum(ring.size + num_envs, capacity),
            )
            learn = (i + 1) * num_envs > learning_starts
            learner = jax.lax.cond(learn, update, lambda lr_, r, k: lr_, learner, ring, k_batch)
            params, target_params, opt_state = learner
            target_params = jax.lax.cond(
                (i + 1) % copy_every == 0, lambda: params, lambda: target_params
            )
            done = terminated | truncated
            ep_ret = ep_ret + reward
            finished = (jnp.where(done, ep_ret, 0.0).sum(), done.sum())
            ep_ret = jnp.where(done, 0.0, ep_ret)
            carry = ((params, target_params, opt_state), ring, env_state, next_obs, ep_ret, key)
            return carry, finished

        learner = (params, params, tx.init(params))
        carry = (learner, ring, env_state, obs, jnp.zeros(num_envs), key)
        (learner, *_), (sums, counts) = jax.lax.scan(iteration, carry, jnp.arange(iterations))
        return learner[0], (sums, counts)

    return train, iterations * num_envs


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fused_dqn_peer",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--env", default="Breakout-MinAtar", help="a gymnax id")
    parser.add_argument("--total-steps", type=int, default=200_000)
    parser.add_argument("--hidden", type=int, nargs="+", default=[120, 84])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.env not in gymnax.registered_envs:
        parser.error(f"--env {args.env!r} is not a gymnax id")
    if args.total_steps < 2_000:
        parser.error(f"--total-steps must be >= 2000 (learning starts at 1000): {args.total_steps}")
    train, steps = make_train(args.env, args.total_steps, hidden=tuple(args.hidden))
    key = jax.random.PRNGKey(args.seed)
    t0 = time.perf_counter()
    compiled = jax.jit(train).lower(key).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, (sums, counts) = jax.block_until_ready(compiled(key))
    run_s = time.perf_counter() - t0
    sums, counts = np.asarray(sums), np.asarray(counts)
    tail = slice(-max(1, len(sums) // 10), None)
    final = float(sums[tail].sum() / max(counts[tail].sum(), 1))
    result = {"env": args.env, "env_steps": steps, "sps": steps / run_s, "run_s": run_s,
              "compile_s": compile_s, "final_return": final}  # fmt: skip
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
