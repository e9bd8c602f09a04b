"""PPO's and A2C's minibatch loss, assembled from its terms, against NumPy written from the
equations: the clipped surrogate (Schulman et al. 2017, arXiv:1707.06347, eq. 7) or A2C's
−Â·log π (Mnih et al. 2016), the value loss ½(V − R)² or its clipped form (baselines' ppo2),
minus the entropy bonus, summed over the valid steps and divided by the normaliser; a masked
step contributes nothing. The network's outputs come from the network itself (the loss's
assembly is under test, not the MLP); everything after them is NumPy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.a2c.config import A2CConfig
from agents.ppo.config import PPOConfig
from agents.ppo.learner import MiniBatch
from envs import make_env
from tests.agent_classes import A2CAgent, PPOAgent


def _log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def reference_loss(logits, v, mb, normaliser, clip_eps, clip_value, vw, ew):
    logp_all = _log_softmax(logits)
    logp = np.take_along_axis(logp_all, np.asarray(mb.action)[..., None], -1)[..., 0]
    adv, ret, mask = (np.asarray(x, np.float64) for x in (mb.adv, mb.ret, mb.mask))
    old_logp, old_v = np.asarray(mb.logp, np.float64), np.asarray(mb.value, np.float64)
    if clip_eps is None:  # A2C
        pg = -adv * logp
    else:
        ratio = np.exp(logp - old_logp)
        pg = -np.minimum(ratio * adv, np.clip(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
    if clip_value:
        v_clip = old_v + np.clip(v - old_v, -clip_eps, clip_eps)
        vl = 0.5 * np.maximum((v - ret) ** 2, (v_clip - ret) ** 2)
    else:
        vl = 0.5 * (v - ret) ** 2
    ent = -(np.exp(logp_all) * logp_all).sum(-1)
    per_step = mask * (pg + vw * vl - ew * ent)
    return per_step.sum() / normaliser, {
        "policy_loss": (mask * pg).sum(),
        "value_loss": (mask * vl).sum(),
        "entropy": (mask * ent).sum(),
        "valid": mask.sum(),
    }


@pytest.mark.parametrize(
    "kind, clip_value", [("ppo", False), ("ppo", True), ("a2c", False)], ids=str
)
def test_minibatch_loss_against_numpy(kind, clip_value):
    env = make_env("CartPole-v1", 2, 0)
    extra = {"clip_value": clip_value, "clip_eps": 0.15} if kind == "ppo" else {}
    common = dict(num_envs=2, trace_len=4, hidden=(8,), value_weight=0.7, entropy_weight=0.03)
    if kind == "ppo":
        agent = PPOAgent(PPOConfig(**common, **extra), env)
    else:
        agent = A2CAgent(A2CConfig(**common), env)
    learner = agent.modules.learner
    params = learner.init(jax.random.PRNGKey(0), jnp.zeros((2, 4))).params
    rng = np.random.default_rng(1)
    L, b = 1, 12
    obs = jnp.asarray(rng.normal(size=(L, b, 4)), jnp.float32)
    logits, value = learner.forward(params, obs, None, ())
    logits, value = np.asarray(logits, np.float64), np.asarray(value, np.float64)
    action = rng.integers(0, 2, size=(L, b))
    logp_now = np.take_along_axis(_log_softmax(logits), action[..., None], -1)[..., 0]
    mb = MiniBatch(
        obs=obs,
        first=jnp.zeros((L, b), bool),
        action=jnp.asarray(action, jnp.int32),
        # old policies both near and far from the current one: some ratios clip
        logp=jnp.asarray(logp_now + rng.normal(scale=0.4, size=(L, b)), jnp.float32),
        value=jnp.asarray(value + rng.normal(scale=0.4, size=(L, b)), jnp.float32),
        adv=jnp.asarray(rng.normal(size=(L, b)), jnp.float32),
        ret=jnp.asarray(value + rng.normal(size=(L, b)), jnp.float32),
        mask=jnp.asarray(rng.random((L, b)) > 0.25, jnp.float32),
        prev=(),
        core_state=(),
    )
    clip_eps = 0.15 if kind == "ppo" else None
    normaliser = 9.0
    total, (stats, _) = learner.loss(params, mb, normaliser, clip_eps)
    want, want_stats = reference_loss(
        logits, value, mb, normaliser, clip_eps, clip_value, 0.7, 0.03
    )
    np.testing.assert_allclose(float(total), want, rtol=1e-5, atol=1e-6)
    for k, v in want_stats.items():
        np.testing.assert_allclose(float(stats[k]), v, rtol=1e-5, atol=1e-6)
    if kind == "ppo":
        ratio = np.exp(logp_now - np.asarray(mb.logp))
        outside = np.abs(ratio - 1) > 0.15
        assert outside[np.asarray(mb.mask) > 0].any() and (~outside).any()  # both branches
        np.testing.assert_allclose(
            float(stats["clip_fraction"]), (np.asarray(mb.mask) * outside).sum(), rtol=1e-6
        )
