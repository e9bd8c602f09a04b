"""A single-file PPO whose whole training run is one jitted function over gymnax:
`python -m benchmarks.fused_ppo_peer --env CartPole-v1`.

The reference that `benchmarks.bench_gymnax` runs beside our PPO, alternated in the same
rounds, instead of quoting another machine's figure. It follows the design of PureJaxRL's
`ppo.py` (Lu et al. 2022, "Discovered Policy Optimisation"; github.com/luchris429/purejaxrl):
`lax.scan` over iterations, each a scan over env steps, GAE, then epochs × minibatches of
clipped-PPO updates, all inside one `jax.jit`. Written here from the algorithm (Schulman et
al. 2017), not copied. Its settings are issue 27's: 4 envs × 128 steps, 4 epochs × 4
minibatches, separate actor and critic MLPs 64-64 tanh on flattened observations, Adam with
a linearly annealed learning rate, gradients clipped to norm 0.5. It has no sticky actions
(our `gymnax/*-MinAtar` envs do), no observation or reward normalisation, no logging inside
the run, no checkpoints: the least work a PPO iteration can be.

Prints one JSON line: env steps/s of the compiled run (compilation timed apart), the
compile time, and the mean return of the episodes that ended in the last 10% of iterations.
"""

from __future__ import annotations

import argparse
import json
import time

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax


class ActorCritic(nn.Module):
    num_actions: int
    hidden: int = 64

    @nn.compact
    def __call__(self, obs):
        x = obs.reshape(obs.shape[0], -1).astype(jnp.float32)

        def mlp(h, out: int, scale: float):
            orthogonal = nn.initializers.orthogonal
            for _ in range(2):
                h = nn.tanh(nn.Dense(self.hidden, kernel_init=orthogonal(2**0.5))(h))
            return nn.Dense(out, kernel_init=orthogonal(scale))(h)

        return mlp(x, self.num_actions, 0.01), mlp(x, 1, 1.0)[:, 0]


def make_train(
    env_id: str,
    total_steps: int,
    num_envs: int = 4,
    num_steps: int = 128,
    epochs: int = 4,
    num_minibatches: int = 4,
    lr: float = 2.5e-4,
    gamma: float = 0.99,
    gae_lambda: float = 0.95,
    clip_eps: float = 0.2,
    value_coef: float = 0.5,
    entropy_coef: float = 0.01,
    max_grad_norm: float = 0.5,
):
    """`train(key) -> (final params, [iterations] mean return of the episodes that ended)`."""
    env, env_params = gymnax.make(env_id)
    net = ActorCritic(env.action_space(env_params).n)
    iterations = total_steps // (num_envs * num_steps)
    batch = num_envs * num_steps
    updates_per_iteration = epochs * num_minibatches

    def schedule(count):
        return lr * (1.0 - (count // updates_per_iteration) / iterations)

    tx = optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(schedule, eps=1e-5))
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def loss_fn(params, mb):
        obs, action, old_logp, adv, target = mb
        logits, value = net.apply(params, obs)
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, action[:, None], 1)[:, 0]
        ratio = jnp.exp(logp - old_logp)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
        policy = -jnp.minimum(ratio * adv, clipped * adv).mean()
        entropy = -(jnp.exp(logp_all) * logp_all).sum(-1).mean()
        value_loss = 0.5 * jnp.square(value - target).mean()
        return policy + value_coef * value_loss - entropy_coef * entropy

    def train(key):
        key, k_init, k_reset = jax.random.split(key, 3)
        obs, env_state = reset(jax.random.split(k_reset, num_envs), env_params)
        params = net.init(k_init, obs)
        opt_state = tx.init(params)

        def env_step(carry, _):
            params, env_state, obs, ep_ret, key = carry
            key, k_act, k_step = jax.random.split(key, 3)
            logits, value = net.apply(params, obs)
            action = jax.random.categorical(k_act, logits)
            logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], 1)[:, 0]
            keys = jax.random.split(k_step, num_envs)
            next_obs, env_state, reward, terminated, truncated, _ = step(
                keys, env_state, action, env_params
            )
            done = terminated | truncated  # PureJaxRL's: a truncation is treated as an end
            ep_ret = ep_ret + reward
            ended = (done, ep_ret)
            ep_ret = jnp.where(done, 0.0, ep_ret)
            out = (obs, action, logp, value, reward, done.astype(jnp.float32), ended)
            return (params, env_state, next_obs, ep_ret, key), out

        def minibatch(carry, mb):
            params, opt_state = carry
            grads = jax.grad(loss_fn)(params, mb)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        def epoch(carry, data):
            params, opt_state, key = carry
            key, k_perm = jax.random.split(key)
            perm = jax.random.permutation(k_perm, batch)
            mbs = jax.tree.map(lambda x: x[perm].reshape(num_minibatches, -1, *x.shape[1:]), data)
            (params, opt_state), _ = jax.lax.scan(minibatch, (params, opt_state), mbs)
            return (params, opt_state, key), None

        def iteration(carry, _):
            params, opt_state, env_state, obs, ep_ret, key = carry
            (_, env_state, obs, ep_ret, key), traj = jax.lax.scan(
                env_step, (params, env_state, obs, ep_ret, key), None, num_steps
            )
            obs_t, action_t, logp_t, value_t, reward_t, done_t, (ended, returns) = traj
            _, last_value = net.apply(params, obs)

            def gae(carry, x):
                adv, next_value = carry
                reward, done, value = x
                delta = reward + gamma * next_value * (1.0 - done) - value
                adv = delta + gamma * gae_lambda * (1.0 - done) * adv
                return (adv, value), adv

            init = (jnp.zeros(num_envs), last_value)
            _, adv = jax.lax.scan(gae, init, (reward_t, done_t, value_t), reverse=True)
            data = (obs_t, action_t, logp_t, adv, adv + value_t)
            data = jax.tree.map(lambda x: x.reshape(batch, *x.shape[2:]), data)
            (params, opt_state, key), _ = jax.lax.scan(
                lambda c, _: epoch(c, data), (params, opt_state, key), None, epochs
            )
            mean_return = (returns * ended).sum() / jnp.maximum(ended.sum(), 1)
            return (params, opt_state, env_state, obs, ep_ret, key), mean_return

        carry = (params, opt_state, env_state, obs, jnp.zeros(num_envs), key)
        (params, *_), returns = jax.lax.scan(iteration, carry, None, iterations)
        return params, returns

    return train, iterations * batch


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fused_ppo_peer",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--env", default="CartPole-v1", help="a gymnax id (gymnax.registered_envs)")
    parser.add_argument("--total-steps", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.env not in gymnax.registered_envs:
        parser.error(f"--env {args.env!r} is not a gymnax id")
    if args.total_steps < 512:
        parser.error(f"--total-steps must be >= 512 (one iteration), got {args.total_steps}")
    train, steps = make_train(args.env, args.total_steps)
    key = jax.random.PRNGKey(args.seed)
    t0 = time.perf_counter()
    compiled = jax.jit(train).lower(key).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, returns = jax.block_until_ready(compiled(key))
    run_s = time.perf_counter() - t0
    returns = np.asarray(returns)
    tail = returns[-max(1, len(returns) // 10) :]
    result = {"env": args.env, "env_steps": steps, "sps": steps / run_s, "run_s": run_s,
              "compile_s": compile_s, "final_return": float(tail.mean())}  # fmt: skip
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
