"""Plain NumPy (float64) references for the PPO, value-based and SAC/TD3/DPG losses of
`agents.losses`, written from the papers' equations.

As in `loss_refs.py`: nothing here calls or mirrors the JAX code. Every reference is an
explicit Python loop over the entries that spells out the published formula, in float64.
Per-step arrays are time-major `[T, B]`; a trace's bootstrap quantities belong to x_T.
"""

from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------------------------------------
# PPO (Schulman et al. 2017, arXiv:1707.06347 eq. 7; baselines ppo2 / CleanRL)
# ---------------------------------------------------------------------------------------------


def ppo_clip_np(logp, old_logp, adv, eps, mask=None):
    """(loss, clipped, approx_kl, d loss / d logp), each `[T, B]`, one step at a time."""
    logp, old_logp, adv = (np.asarray(x, np.float64) for x in (logp, old_logp, adv))
    T, B = logp.shape
    mask = np.ones((T, B)) if mask is None else np.asarray(mask, np.float64)
    out = [np.zeros((T, B)) for _ in range(4)]
    for t in range(T):
        for b in range(B):
            if mask[t, b] == 0:
                continue
            ratio = math.exp(logp[t, b] - old_logp[t, b])
            a = adv[t, b]
            unclipped = ratio * a
            clipped_ratio = min(max(ratio, 1.0 - eps), 1.0 + eps)
            objective = min(unclipped, clipped_ratio * a)
            out[0][t, b] = -objective
            out[1][t, b] = 1.0 if abs(ratio - 1.0) > eps else 0.0
            out[2][t, b] = (ratio - 1.0) - math.log(ratio)
            # d objective / d logp = ratio · A on the unclipped branch; the clipped branch is
            # constant outside [1 − ε, 1 + ε] and equals the unclipped one inside.
            inside = 1.0 - eps < ratio < 1.0 + eps
            out[3][t, b] = -ratio * a if (unclipped <= clipped_ratio * a or inside) else 0.0
    return tuple(out)


def clipped_value_np(v, old_v, ret, eps, mask=None):
    """(loss, d loss / d v), `[T, B]`: ½ max((v − R)², (old_v + clip(v − old_v, ±ε) − R)²)."""
    v, old_v, ret = (np.asarray(x, np.float64) for x in (v, old_v, ret))
    T, B = v.shape
    mask = np.ones((T, B)) if mask is None else np.asarray(mask, np.float64)
    loss, grad = np.zeros((T, B)), np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            if mask[t, b] == 0:
                continue
            diff = v[t, b] - old_v[t, b]
            v_clip = old_v[t, b] + min(max(diff, -eps), eps)
            plain = (v[t, b] - ret[t, b]) ** 2
            clipped = (v_clip - ret[t, b]) ** 2
            loss[t, b] = 0.5 * max(plain, clipped)
            if plain >= clipped:
                grad[t, b] = v[t, b] - ret[t, b]
            else:
                grad[t, b] = (v_clip - ret[t, b]) if abs(diff) < eps else 0.0
    return loss, grad


def normalize_np(adv, mask=None, eps=1e-8):
    """(A − mean)/(std + eps) over the entries with mask 1 (population std); 0 elsewhere."""
    adv = np.asarray(adv, np.float64)
    T, B = adv.shape
    mask = np.ones((T, B)) if mask is None else np.asarray(mask, np.float64)
    values = [adv[t, b] for t in range(T) for b in range(B) if mask[t, b]]
    out = np.zeros((T, B))
    if not values:
        return out
    mean = sum(values) / len(values)
    std = math.sqrt(sum((x - mean) ** 2 for x in values) / len(values))
    for t in range(T):
        for b in range(B):
            if mask[t, b]:
                out[t, b] = (adv[t, b] - mean) / (std + eps)
    return out
