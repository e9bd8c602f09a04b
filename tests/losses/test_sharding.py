"""Every loss runs inside `jax.shard_map` over 2 devices (with the default replication
checks) and gives the same values as the unsharded call: safe for data-parallel learners."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from agents import losses

T, B, A, K = 6, 4, 3, 7


def _inputs():
    ks = jax.random.split(jax.random.PRNGKey(0), 10)
    q = jax.random.normal(ks[0], (T, B, A))
    logits = jax.random.normal(ks[1], (T, B, A))
    mu = jax.nn.softmax(jax.random.normal(ks[2], (T, B, A)))
    a = jax.random.randint(ks[3], (T, B), 0, A)
    r = jax.random.normal(ks[4], (T, B))
    d = jnp.where(jax.random.uniform(ks[5], (T, B)) < 0.2, 0.0, 0.9)
    m = jnp.where(jax.random.uniform(ks[6], (T, B)) < 0.15, 0.0, 1.0)
    boot = jax.random.normal(ks[7], (B,))
    qp = jax.nn.softmax(jax.random.normal(ks[8], (T, B, A, K)))
    bp = jax.nn.softmax(jax.random.normal(ks[9], (B, K)))
    return q, logits, mu, a, r, d, m, boot, qp, bp


def _cases():
    q, logits, mu, a, r, d, m, boot, qp, bp = _inputs()
    pi = jax.nn.softmax(logits)
    atoms = jnp.linspace(-5.0, 5.0, K)
    q_ret = losses.retrace_targets(q, pi, mu, a, r, d, boot, mask_t=m)
    v = q[..., 0]
    rho = jnp.exp(-jnp.abs(r))
    return {
        "retrace": (lambda q, pi, mu, a, r, d, b, m: losses.retrace_targets(
            q, pi, mu, a, r, d, b, mask_t=m), (q, pi, mu, a, r, d, boot, m)),
        "retrace_nomask": (lambda q, pi, mu, a, r, d, b: losses.retrace_targets(
            q, pi, mu, a, r, d, b), (q, pi, mu, a, r, d, boot)),
        "acer_policy": (lambda lg, q, mu, a, qr: losses.acer_policy_loss(
            lg, q, mu, a, qr), (logits, q, mu, a, q_ret)),
        "trust_region": (lambda lg, avg, q, mu, a, qr: losses.trust_region_policy_loss(
            functools.partial(losses.acer_policy_loss, q_t=q, mu_t=mu, a_t=a, q_ret_t=qr),
            lg, avg, 1.0).loss, (logits, logits + 0.5, q, mu, a, q_ret)),
        "beta_loo": (lambda lg, q, a, mua, ret: losses.beta_loo_policy_loss(
            lg, q, a, mua, ret), (logits, q, a, mu[..., 0], q_ret)),
        "vtrace": (lambda v, b, r, d, rho: losses.vtrace(v, b, r, d, rho).vs,
                   (v, boot, r, d, rho)),
        "lambda_returns": (lambda r, d, v, b: losses.lambda_returns(r, d, v, b, 0.8),
                           (r, d, v, boot)),
        "n_step": (lambda r, d, v, b: losses.n_step_returns(r, d, v, b, 3), (r, d, v, boot)),
        "gae": (lambda r, d, v, b: losses.gae(r, d, v, b), (r, d, v, boot)),
        "dist_retrace": (lambda qp, pi, mu, a, r, d, bp: losses.distributional_retrace_targets(
            qp, pi, mu, a, r, d, bp, atoms), (qp, pi, mu, a, r, d, bp)),
    }  # fmt: skip


def _spec(x):
    # batch axis: 1 for time-major arrays, 0 for [B] / [B, K]
    if x.ndim >= 2 and x.shape[0] == T:
        return P(None, "d")
    return P("d")


# "retrace_nomask" is the slow tier's (issue 67): the same function as "retrace" without its
# mask, whose sharding the "retrace" case already checks.
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.slow] * (n == "retrace_nomask")) for n in sorted(_cases())],
)
def test_loss_under_shard_map_matches_unsharded(name):
    fn, args = _cases()[name]
    mesh = Mesh(np.array(jax.devices()[:2]), ("d",))
    sharded = jax.jit(
        jax.shard_map(fn, mesh=mesh, in_specs=tuple(_spec(x) for x in args), out_specs=P(None, "d"))
    )
    np.testing.assert_allclose(sharded(*args), jax.jit(fn)(*args), rtol=1e-5, atol=1e-6)
