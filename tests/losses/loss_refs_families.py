"""Plain NumPy (float64) references for the PPO, value-based and SAC/TD3/DPG losses of
`agents.losses`, written from the papers' equations.

As in `loss_refs.py`: nothing here calls or mirrors the JAX code. Every reference is an
explicit Python loop over the entries that spells out the published formula, in float64.
Per-step arrays are time-major `[T, B]`; a trace's bootstrap quantities belong to x_T.
"""

from __future__ import annotations

import math

import numpy as np
from loss_refs import project_np

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


# ---------------------------------------------------------------------------------------------
# Value rescaling (Pohlen et al. 2018, arXiv:1805.11593 §3.2 and Prop. A.2) and Huber
# ---------------------------------------------------------------------------------------------


def h_np(x, eps=1e-3):
    """h(x) = sign(x)(√(|x| + 1) − 1) + εx, entry by entry."""
    x = np.asarray(x, np.float64)
    out = np.empty_like(x)
    for i, v in np.ndenumerate(x):
        out[i] = math.copysign(1.0, v) * (math.sqrt(abs(v) + 1.0) - 1.0) + eps * v
    return out


def h_inv_np(x, eps=1e-3):
    """Prop. A.2: h⁻¹(x) = sign(x)[((√(1 + 4ε(|x| + 1 + ε)) − 1)/(2ε))² − 1]; ε = 0 gives
    the limit sign(x)((|x| + 1)² − 1)."""
    x = np.asarray(x, np.float64)
    out = np.empty_like(x)
    for i, v in np.ndenumerate(x):
        if eps == 0:
            root = abs(v) + 1.0
        else:
            root = (math.sqrt(1.0 + 4.0 * eps * (abs(v) + 1.0 + eps)) - 1.0) / (2.0 * eps)
        out[i] = math.copysign(1.0, v) * (root**2 - 1.0)
    return out


def huber_np(x, delta=1.0):
    """(L_δ(x), L_δ'(x)) entry by entry."""
    x = np.asarray(x, np.float64)
    loss, grad = np.empty_like(x), np.empty_like(x)
    for i, v in np.ndenumerate(x):
        if abs(v) <= delta:
            loss[i], grad[i] = 0.5 * v * v, v
        else:
            loss[i], grad[i] = delta * (abs(v) - 0.5 * delta), math.copysign(delta, v)
    return loss, grad


# ---------------------------------------------------------------------------------------------
# n-step Q-learning targets (Sutton & Barto §7.1, van Hasselt et al. 2016, R2D2)
# ---------------------------------------------------------------------------------------------


def n_step_window(r_col, d_col, m_col, t, n):
    """(reward sum, discount product, bootstrap state index) of step t of one trace.

    Walk forward from t for at most n steps; stop at the trace end and before a masked step
    s > t (the fake auto-reset transition; x_s is the episode's final observation, bootstrap
    from it). A masked step t itself bootstraps from its own x_t with nothing summed.
    """
    T = len(r_col)
    if not m_col[t]:
        return 0.0, 1.0, t
    total, disc, s = 0.0, 1.0, t
    while s < T and s - t < n and (s == t or m_col[s]):
        total += disc * r_col[s]
        disc *= d_col[s]
        s += 1
    return total, disc, s


def q_targets_np(r, d, q_target, q_online=None, n=1, mask=None, rescale_eps=None):
    """n-step (double) Q-learning targets. q_target, q_online: `[T + 1, B, A]` at x_0..x_T.

    V(x_s) = max_a Q_target(x_s, a), or Q_target(x_s, argmax_a Q_online(x_s, a)) for double Q.
    With rescale_eps: G = h(reward sum + discount · h⁻¹(V)).
    """
    r, d, q_target = (np.asarray(x, np.float64) for x in (r, d, q_target))
    T, B = r.shape
    mask = np.ones((T, B)) if mask is None else np.asarray(mask)
    out = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            total, disc, s = n_step_window(r[:, b], d[:, b], mask[:, b], t, n)
            if q_online is None:
                value = max(q_target[s, b])
            else:
                value = q_target[s, b, int(np.argmax(q_online[s, b]))]
            if rescale_eps is None:
                out[t, b] = total + disc * value
            else:
                inner = total + disc * float(h_inv_np(value, rescale_eps))
                out[t, b] = float(h_np(inner, rescale_eps))
    return out


def q_loss_np(q, a, target, mask=None, huber_delta=None):
    """(loss `[T, B]`, d loss / d q `[T, B, A]`) of ½(G − Q(x, a))² or the Huber loss."""
    q, target = np.asarray(q, np.float64), np.asarray(target, np.float64)
    T, B, _ = q.shape
    mask = np.ones((T, B)) if mask is None else np.asarray(mask)
    loss, grad = np.zeros((T, B)), np.zeros(q.shape)
    for t in range(T):
        for b in range(B):
            if not mask[t, b]:
                continue
            td = target[t, b] - q[t, b, a[t, b]]
            if huber_delta is None:
                loss[t, b], g = 0.5 * td * td, td
            else:
                lv, gv = huber_np(np.array(td), huber_delta)
                loss[t, b], g = float(lv), float(gv)
            grad[t, b, a[t, b]] = -g  # d/dQ of L(G − Q)
    return loss, grad


def categorical_targets_np(r, d, probs, atoms, q_online=None, n=1, mask=None):
    """n-step (double) C51 targets `[T, B, K]`. probs: `[T + 1, B, A, K]` of the target net.

    a* = argmax of the target net's mean Σ_i z_i p_i (C51) or of q_online `[T + 1, B, A]`
    (double); the target is Algorithm 1's projection of (G + Γ z, p(x_s, a*)).
    """
    r, d, probs, atoms = (np.asarray(x, np.float64) for x in (r, d, probs, atoms))
    T, B = r.shape
    A, K = probs.shape[2], atoms.shape[0]
    mask = np.ones((T, B)) if mask is None else np.asarray(mask)
    out = np.zeros((T, B, K))
    for b in range(B):
        for t in range(T):
            total, disc, s = n_step_window(r[:, b], d[:, b], mask[:, b], t, n)
            if q_online is None:
                means = [sum(atoms[i] * probs[s, b, a, i] for i in range(K)) for a in range(A)]
                a_star = int(np.argmax(means))
            else:
                a_star = int(np.argmax(q_online[s, b]))
            shifted = np.array([total + disc * z for z in atoms])
            out[t, b] = project_np(shifted, probs[s, b, a_star], atoms)
    return out


def log_softmax_np(x):
    x = np.asarray(x, np.float64)
    m = x.max()
    return x - m - math.log(sum(math.exp(v - m) for v in x))


def categorical_loss_np(logits, a, target, mask=None):
    """−Σ_i p_i log softmax(logits(x_t, a_t))_i per step."""
    logits, target = np.asarray(logits, np.float64), np.asarray(target, np.float64)
    T, B = a.shape
    mask = np.ones((T, B)) if mask is None else np.asarray(mask)
    out = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            if mask[t, b]:
                out[t, b] = -float(target[t, b] @ log_softmax_np(logits[t, b, a[t, b]]))
    return out


# ---------------------------------------------------------------------------------------------
# SAC (Haarnoja et al. 2018, arXiv:1812.05905) and discrete SAC (arXiv:1910.07207)
# ---------------------------------------------------------------------------------------------


def tanh_gaussian_log_prob_np(u, mean, log_std, low=None, high=None):
    """Eq. 26: Σ_i [log N(u_i; μ_i, σ_i) − log(1 − tanh²(u_i))], over the last axis; with
    bounds, minus Σ_i log((high_i − low_i)/2). Valid while 1 − tanh² does not round to 0."""
    u, mean, log_std = (np.asarray(x, np.float64) for x in (u, mean, log_std))
    lead, D = u.shape[:-1], u.shape[-1]
    out = np.zeros(lead)
    for idx in np.ndindex(*lead):
        total = 0.0
        for i in range(D):
            sigma = math.exp(log_std[(*idx, i)])
            x = u[(*idx, i)]
            normal = math.exp(-0.5 * ((x - mean[(*idx, i)]) / sigma) ** 2) / (
                sigma * math.sqrt(2.0 * math.pi)
            )
            total += math.log(normal) - math.log(1.0 - math.tanh(x) ** 2)
            if low is not None:
                total -= math.log((high[i] - low[i]) / 2.0)
        out[idx] = total
    return out


def log_sech2_np(u):
    """log(1 − tanh²u) = log sech²u = 2 log(2 / (eᵘ + e⁻ᵘ)), in float64 (|u| < 700)."""
    return np.array([2.0 * math.log(2.0 / (math.exp(v) + math.exp(-v))) for v in np.ravel(u)])


def scale_action_np(a, low, high):
    a = np.asarray(a, np.float64)
    out = np.empty_like(a)
    for idx in np.ndindex(*a.shape):
        i = idx[-1]
        out[idx] = low[i] + (a[idx] + 1.0) * (high[i] - low[i]) / 2.0
    return out


def soft_targets_np(r, d, next_q_min, next_logp, alpha):
    """Eq. 3 + 5: y = r + γ (min Q'(x', a') − α log π(a'|x'))."""
    T, B = np.shape(r)
    out = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            out[t, b] = r[t, b] + d[t, b] * (next_q_min[t, b] - alpha * next_logp[t, b])
    return out


def n_step_soft_targets_np(r, d, q_min, logp, alpha, n, mask=None):
    """q_min, logp: `[T + 1, B]` at x_0..x_T; bootstrap from V_soft = min Q − α log π.

    The soft Bellman backup Q(x_t, a_t) = r_t + γ_t V_soft(x_{t+1}) with V_soft(x_s) =
    r_s − α log π(a'_s|x_s) + γ_s V_soft(x_{s+1}) along the stored trace (Haarnoja et al. 2018,
    eq. 3): every state after x_t adds −α log π of its fresh action, discounted as its reward.
    Walked step by step here (not through n_step_window's reward sums).
    """
    r, d = np.asarray(r, np.float64), np.asarray(d, np.float64)
    T, B = r.shape
    mask = np.ones((T, B)) if mask is None else np.asarray(mask)
    out = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            total, disc, s = 0.0, 1.0, t
            if mask[t, b]:  # a masked step t bootstraps from its own x_t, nothing summed
                while s < T and s - t < n and (s == t or mask[s, b]):
                    bonus = 0.0 if s == t else -alpha * logp[s, b]
                    total += disc * (r[s, b] + bonus)
                    disc *= d[s, b]
                    s += 1
            out[t, b] = total + disc * (q_min[s, b] - alpha * logp[s, b])
    return out


def softmax_row_np(x):
    lp = log_softmax_np(x)
    return np.array([math.exp(v) for v in lp]), lp


def discrete_soft_targets_np(r, d, next_q_min, next_logits, alpha):
    """Christodoulou eq. 10: V(x') = Σ_a π(a|x') [min Q'(x', a) − α log π(a|x')]."""
    T, B, A = np.shape(next_q_min)
    out = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            pi, log_pi = softmax_row_np(next_logits[t, b])
            v = sum(pi[a] * (next_q_min[t, b, a] - alpha * log_pi[a]) for a in range(A) if pi[a])
            out[t, b] = r[t, b] + d[t, b] * v
    return out


def discrete_actor_np(logits, q_min, alpha):
    """Eq. 12: Σ_a π(a|x) [α log π(a|x) − Q(x, a)] per step."""
    T, B, A = np.shape(logits)
    out = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            pi, log_pi = softmax_row_np(logits[t, b])
            out[t, b] = sum(pi[a] * (alpha * log_pi[a] - q_min[t, b, a]) for a in range(A) if pi[a])
    return out


def discrete_temperature_np(log_alpha, logits, target_entropy):
    """Eq. 11: −α Σ_a π(a|x) (log π(a|x) + H̄) per step (also its derivative in log α)."""
    T, B, A = np.shape(logits)
    alpha = math.exp(log_alpha)
    out = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            pi, log_pi = softmax_row_np(logits[t, b])
            out[t, b] = -alpha * sum(
                pi[a] * (log_pi[a] + target_entropy) for a in range(A) if pi[a]
            )
    return out


# ---------------------------------------------------------------------------------------------
# TD3 (Fujimoto et al. 2018, arXiv:1802.09477 eq. 10, 15)
# ---------------------------------------------------------------------------------------------


def td3_actions_np(next_action, noise, noise_clip, low, high):
    next_action, noise = np.asarray(next_action, np.float64), np.asarray(noise, np.float64)
    out = np.empty_like(next_action)
    for idx in np.ndindex(*next_action.shape):
        i = idx[-1]
        eps = min(max(noise[idx], -noise_clip), noise_clip)
        out[idx] = min(max(next_action[idx] + eps, low[i]), high[i])
    return out


def td3_targets_np(r, d, q1, q2):
    T, B = np.shape(r)
    out = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            out[t, b] = r[t, b] + d[t, b] * min(q1[t, b], q2[t, b])
    return out
