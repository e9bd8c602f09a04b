"""PQN (agents/pqn): its pure functions against what the paper's Algorithm 1 says they do,
computed here from the network and optax directly; sharded learning against one device; the
default learning CartPole (slow tier)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from agents.core.learning import Hyper
from agents.core.rollout import Rollout
from agents.pqn import PQNConfig, make
from envs.core import EnvSpec
from networks import QNetwork
from tests.losses.loss_refs import q_lambda_np

B, T, A, D = 4, 5, 3, 6
SPEC = EnvSpec(
    env_id="toy", num_envs=B, obs_shape=(D,), obs_dtype=np.dtype(np.float32), discrete=True,
    num_actions=A, action_shape=(), action_low=None, action_high=None, frame_stack=1,
    is_atari=False, backend="gymnax", max_episode_steps=None,
)  # fmt: skip
SMALL = dict(num_envs=B, trace_len=T, hidden=(8,), epochs=1, num_minibatches=1, lr=1e-2)


def rollout(seed, q_fn, params, *, fake_step=True):
    """A random rollout whose μ slot holds Q(x_t, ·) as the actor records it, with a
    termination and, after it, the fake auto-reset step (mask 0)."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(T, B, D)).astype(np.float32)
    disc = np.full((T, B), 0.9, np.float32)
    mask = np.ones((T, B), np.float32)
    if fake_step:
        disc[1, 0] = 0.0  # env 0 terminates at step 1; step 2 is its fake reset step
        mask[2, 0] = 0.0
    steps = {
        "action": rng.integers(0, A, (T, B)).astype(np.int32),
        "reward": rng.normal(size=(T, B)).astype(np.float32),
        "discount": disc,
        "mask": mask,
        "mu": np.asarray(q_fn(params, obs)),
    }
    last = rng.normal(size=(B, D)).astype(np.float32)
    zeros = np.zeros((T, B), np.float32)
    return Rollout(obs, steps, (), last, np.zeros(B, bool), zeros, zeros, zeros.astype(bool))


def test_learn_is_one_radam_step_on_the_q_lambda_regression():
    """epochs = minibatches = 1: one step of clip-by-norm then RAdam at the scheduled rate, on
    the masked mean of ½(Q(x_t, a_t) − G_t)² with G the Q(λ) targets (NumPy reference) of the
    scaled rewards, the recorded Q values and Q(x_T, ·)."""
    cfg = PQNConfig(**SMALL, td_lambda=0.7, reward_scale=0.5, anneal_steps=10 * T * B)
    parts = make(cfg, SPEC)
    net = QNetwork((D,), A, (8,), layer_norm=True)
    q_fn = jax.jit(lambda p, o: net.apply(p, o).q_values)  # programs, not op by op
    learner = jax.jit(parts.init)(jax.random.key(0), jnp.zeros((B, D)))._replace(step=jnp.int32(3))
    traj = rollout(1, q_fn, learner.params)
    new, metrics = jax.jit(parts.learn, static_argnums=(2, 3))(learner, traj, Hyper(cfg), None)

    s = traj.steps
    boot = np.asarray(q_fn(learner.params, traj.last_obs))
    g = q_lambda_np(s["reward"] * 0.5, s["discount"], s["mask"], s["mu"], boot, 0.7)

    def loss(params):
        q = q_fn(params, traj.obs)
        q_a = jnp.take_along_axis(q, s["action"][..., None], axis=-1)[..., 0]
        return jnp.sum(s["mask"] * 0.5 * (q_a - g) ** 2) / s["mask"].sum()

    lr = 1e-2 * (1 - 3 / 10)  # update 3 of the 10 that reach anneal_steps
    opt = optax.chain(optax.clip_by_global_norm(10.0), optax.radam(lr))

    @jax.jit
    def step(params):
        updates, _ = opt.update(jax.grad(loss)(params), opt.init(params))
        return optax.apply_updates(params, updates), loss(params)

    expected, want_loss = step(learner.params)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), new.params, expected
    )
    np.testing.assert_allclose(metrics["loss"], want_loss, rtol=1e-5)
    np.testing.assert_allclose(metrics["lr"], lr, rtol=1e-6)
    np.testing.assert_allclose(metrics["target_mean"], g.mean(), rtol=1e-5)
    assert int(new.step) == 4 and not np.array_equal(new.key, learner.key)


def test_acting_is_epsilon_greedy_on_the_schedule_and_records_q():
    cfg = PQNConfig(**SMALL, eps_start=1.0, eps_end=0.1, eps_decay_steps=4 * T * B)
    parts = make(cfg, SPEC)
    learner = parts.init(jax.random.key(0), jnp.zeros((B, D)))
    for step, eps in [(0, 1.0), (2, 0.55), (4, 0.1), (9, 0.1)]:
        _, got = parts.acting(learner._replace(step=jnp.int32(step)))
        np.testing.assert_allclose(got, eps, rtol=1e-6)
    obs = jax.random.normal(jax.random.key(1), (B, D))
    out = parts.act((learner.params, 0.0), obs, jnp.zeros(B, bool), (), jax.random.key(2))
    q = QNetwork((D,), A, (8,), layer_norm=True).apply(learner.params, obs).q_values
    np.testing.assert_allclose(out.mu, q, rtol=1e-6)
    np.testing.assert_array_equal(out.action, np.argmax(q, -1))
    greedy, _ = parts.evaluate(True)((learner.params, 1.0), obs, None, (), jax.random.key(3))
    np.testing.assert_array_equal(greedy, np.argmax(q, -1))  # evaluation ignores training's ε


def test_two_devices_learn_as_one():
    """Data parallel (`shard_map` over the envs, gradients `pmean`ed): with the whole rollout
    in one minibatch and no masked step, the same update as on one device, over 2 epochs.
    The fast tier's sharded-equals-single test of `agents.core.learning.grads_and_aux`'s
    pmean (PQN, SAC, TD3); tests/agents/test_parallel.py's is of `gradient_step`'s."""
    cfg = PQNConfig(**{**SMALL, "epochs": 2})
    parts = make(cfg, SPEC)
    learner = parts.init(jax.random.key(0), jnp.zeros((B, D)))
    q_fn = lambda p, o: QNetwork((D,), A, (8,), layer_norm=True).apply(p, o).q_values  # noqa: E731
    traj = rollout(2, q_fn, learner.params, fake_step=False)
    one, m_one = jax.jit(lambda lr, tr: parts.learn(lr, tr, Hyper(cfg), None))(learner, traj)
    mesh = Mesh(np.array(jax.devices()[:2]), ("data",))
    tb, b = P(None, "data"), P("data")  # [T, B, ...] and [B, ...] split by env
    envs = Rollout(tb, tb, P(), b, b, tb, tb, tb)
    two, m_two = jax.jit(
        jax.shard_map(
            lambda lr, tr: parts.learn(lr, tr, Hyper(cfg), "data"),
            mesh=mesh,
            in_specs=(P(), envs),
            out_specs=(P(), P()),
        )
    )(learner, traj)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6), two.params, one.params
    )
    np.testing.assert_allclose(m_two["loss"], m_one["loss"], rtol=1e-5)


def test_a_minibatch_count_that_does_not_divide_a_devices_share_is_named():
    cfg = PQNConfig(**{**SMALL, "num_minibatches": 4})  # 20 transitions: 4 | 20, but not 10
    parts = make(cfg, SPEC)
    learner = parts.init(jax.random.key(0), jnp.zeros((B, D)))
    half = SPEC.num_envs // 2
    traj = rollout(3, lambda p, o: jnp.zeros((*o.shape[:-1], A)), None)
    traj = traj._replace(obs=traj.obs[:, :half], last_obs=traj.last_obs[:half],
                         steps={k: v[:, :half] for k, v in traj.steps.items()})  # fmt: skip
    with pytest.raises(ValueError, match="--num-minibatches 4 does not divide the 10"):
        parts.learn(learner, traj, Hyper(cfg), None)


@pytest.mark.slow
def test_the_default_solves_cartpole_on_another_seed(tmp_path):
    """The default command (gymnax CartPole-v1, 500k steps) on seed 11: greedy evaluation
    over 20 episodes at CartPole's maximum return of 500 (docs/results/defaults-10-seeds has
    seeds 0-9)."""
    from experiments.train import main

    summary = main(["--agent", "pqn", "--seed", "11", "--run-dir", str(tmp_path / "run"),
                    "--no-progress"])  # fmt: skip
    assert summary["eval_return_mean"] >= 475.0, summary["eval_return_mean"]
