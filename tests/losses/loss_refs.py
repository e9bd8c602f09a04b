"""Plain NumPy (float64) references for `agents.losses`, written from the papers' equations.

Nothing here calls or mirrors the JAX code: every reference is an explicit Python loop over
time (and batch) that spells out the published formula. Shapes follow the library: time-major
`[T, B, ...]`, `bootstrap_value` is V(x_T) `[B]`.

Importance ratios are π/(μ + ε) with ε = `MU_EPS` (the library's documented `MU_EPSILON`,
stated here again rather than imported; a test checks that the two agree).
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------------------------
# Random inputs
# ---------------------------------------------------------------------------------------------

GAMMA = 0.9
MU_EPS = 1e-8  # ε in every importance ratio π/(μ + ε)


def softmax_np(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def rand_probs(rng, shape, floor=0.02):
    """Random distributions over the last axis, every entry ≥ floor / n (no zeros)."""
    p = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
    return (1.0 - floor) * p + floor / shape[-1]


def rand_discounts(rng, shape, p_term=0.3, gamma=GAMMA):
    """γ·(1 − terminated) with terminations (zeros) appearing at random."""
    return gamma * (rng.random(shape) >= p_term)


def f32(*xs):
    out = tuple(np.asarray(x, np.float32) for x in xs)
    return out if len(out) > 1 else out[0]


# ---------------------------------------------------------------------------------------------
# Retrace (Munos et al. 2016; ACER eq. 5)
# ---------------------------------------------------------------------------------------------


def retrace_recursive(q, pi, mu, a, r, d, boot, lam=1.0, c_max=1.0):
    """ACER eq. 5, backwards in time, one trace at a time."""
    q, pi, mu, r, d, boot = (np.asarray(x, np.float64) for x in (q, pi, mu, r, d, boot))
    T, B, _ = q.shape
    out = np.zeros((T, B))
    for b in range(B):
        for t in reversed(range(T)):
            if t == T - 1:
                out[t, b] = r[t, b] + d[t, b] * boot[b]
                continue
            an = a[t + 1, b]
            v_next = sum(pi[t + 1, b, i] * q[t + 1, b, i] for i in range(q.shape[2]))
            c_next = lam * min(c_max, pi[t + 1, b, an] / (mu[t + 1, b, an] + MU_EPS))
            corr = c_next * (out[t + 1, b] - q[t + 1, b, an])
            out[t, b] = r[t, b] + d[t, b] * (corr + v_next)
    return out


def retrace_sum_form(q, pi, mu, a, r, d, boot, lam=1.0, c_max=1.0):
    """Munos et al. eq. 3 as an explicit sum of discounted, traced TD errors:

    Q_ret(t) − Q(x_t, a_t) = Σ_{s≥t} (Π_{u=t+1}^{s} d_{u−1} c_u) δ_s,
    δ_s = r_s + d_s V(x_{s+1}) − Q(x_s, a_s),  V(x_T) = bootstrap.
    """
    q, pi, mu, r, d, boot = (np.asarray(x, np.float64) for x in (q, pi, mu, r, d, boot))
    T, B, A = q.shape
    out = np.zeros((T, B))
    for b in range(B):
        v = [sum(pi[t, b, i] * q[t, b, i] for i in range(A)) for t in range(T)] + [boot[b]]
        qa = [q[t, b, a[t, b]] for t in range(T)]
        c = [lam * min(c_max, pi[t, b, a[t, b]] / (mu[t, b, a[t, b]] + MU_EPS)) for t in range(T)]
        for t in range(T):
            total = 0.0
            for s in range(t, T):
                weight = 1.0
                for u in range(t + 1, s + 1):
                    weight *= d[u - 1, b] * c[u]
                delta = r[s, b] + d[s, b] * v[s + 1] - qa[s]
                total += weight * delta
            out[t, b] = qa[t] + total
    return out


# ---------------------------------------------------------------------------------------------
# Policy gradients (ACER eq. 9, Reactor β-LOO eq. 8, ACER trust region eq. 12–13)
# ---------------------------------------------------------------------------------------------


def acer_policy_gradient(logits, q, mu, a, q_ret, c):
    """ĝ of ACER eq. 9 with respect to the logits, `[T, B, A]`, with ρ = π/(μ + ε).

    The bias-correction weight [1 − c/ρ(a)]_+ is taken as its limit 0 where ρ(a) = 0.
    """
    logits, q, mu, q_ret = (np.asarray(x, np.float64) for x in (logits, q, mu, q_ret))
    T, B, A = logits.shape
    g = np.zeros((T, B, A))
    for t in range(T):
        for b in range(B):
            pi = softmax_np(logits[t, b])
            v = sum(pi[i] * q[t, b, i] for i in range(A))
            rho = pi / (mu[t, b] + MU_EPS)
            at = a[t, b]
            for j in range(A):
                dlog = [(1.0 if i == j else 0.0) - pi[j] for i in range(A)]  # ∂log π(i)/∂l_j
                term = min(c, rho[at]) * dlog[at] * (q_ret[t, b] - v)
                for i in range(A):
                    weight = max(0.0, 1.0 - c / rho[i]) if rho[i] > 0 else 0.0
                    term += weight * pi[i] * dlog[i] * (q[t, b, i] - v)
                g[t, b, j] = term
    return g


def beta_loo_gradient(logits, q, a, mu_a, ret, c):
    """G_β of Reactor eq. 8 with respect to the logits, `[T, B, A]`, β = min(c, 1/(μ + ε))."""
    logits, q, mu_a, ret = (np.asarray(x, np.float64) for x in (logits, q, mu_a, ret))
    T, B, A = logits.shape
    g = np.zeros((T, B, A))
    for t in range(T):
        for b in range(B):
            pi = softmax_np(logits[t, b])
            at = a[t, b]
            beta = min(c, 1.0 / (mu_a[t, b] + MU_EPS))
            for j in range(A):
                dpi = [pi[i] * ((1.0 if i == j else 0.0) - pi[j]) for i in range(A)]
                total = beta * (ret[t, b] - q[t, b, at]) * dpi[at]
                total += sum(q[t, b, i] * dpi[i] for i in range(A))
                g[t, b, j] = total
    return g


def projection_np(g, k, delta):
    """z* = g − max(0, (kᵀg − δ)/‖k‖²)·k, row by row over the last axis."""
    g, k = np.asarray(g, np.float64), np.asarray(k, np.float64)
    flat_g, flat_k = g.reshape(-1, g.shape[-1]), k.reshape(-1, k.shape[-1])
    out = np.empty_like(flat_g)
    for i in range(flat_g.shape[0]):
        kk = float(flat_k[i] @ flat_k[i])
        scale = 0.0 if kk == 0.0 else max(0.0, (float(flat_k[i] @ flat_g[i]) - delta) / kk)
        out[i] = flat_g[i] - scale * flat_k[i]
    return out.reshape(g.shape)


def kl_np(avg_logits, logits):
    """KL(π_avg ‖ π) for one pair of logit vectors."""
    p, q = softmax_np(avg_logits), softmax_np(logits)
    return float(np.sum(p * (np.log(p) - np.log(q))))


def entropy_np(logits):
    p = softmax_np(logits)
    return -np.sum(p * np.log(p), axis=-1)


# ---------------------------------------------------------------------------------------------
# V-trace (IMPALA eq. 1) and the classic returns
# ---------------------------------------------------------------------------------------------


def vtrace_sum_form(v, boot, r, d, rho, lam=1.0, clip_rho=1.0, clip_c=1.0, clip_pg_rho=1.0):
    """IMPALA eq. 1 as written (the sum), and the §4.2 policy-gradient advantage."""
    v, boot, r, d, rho = (np.asarray(x, np.float64) for x in (v, boot, r, d, rho))
    T, B = v.shape
    vs = np.zeros((T, B))
    adv = np.zeros((T, B))
    for b in range(B):
        vals = [*list(v[:, b]), boot[b]]
        for s in range(T):
            total = 0.0
            for t in range(s, T):
                disc, trace = 1.0, 1.0
                for i in range(s, t):
                    disc *= d[i, b]
                    trace *= lam * min(clip_c, rho[i, b])
                delta = min(clip_rho, rho[t, b]) * (r[t, b] + d[t, b] * vals[t + 1] - vals[t])
                total += disc * trace * delta
            vs[s, b] = vals[s] + total
        for s in range(T):
            vs_next = boot[b] if s == T - 1 else vs[s + 1, b]
            adv[s, b] = min(clip_pg_rho, rho[s, b]) * (r[s, b] + d[s, b] * vs_next - vals[s])
    return vs, adv


def n_step_return_np(r, d, vals, t, n, b):
    """G_{t:t+n} = Σ_{k<n} (Π_{j<k} d_{t+j}) r_{t+k} + (Π_{j<n} d_{t+j}) V(x_{t+n})."""
    total, disc = 0.0, 1.0
    for k in range(n):
        total += disc * r[t + k, b]
        disc *= d[t + k, b]
    return total + disc * vals[t + n]


def lambda_returns_np(r, d, v, boot, lam=1.0):
    """Truncated λ-return (Sutton & Barto eq. 12.9) as a weighted average of n-step returns.

    With a per-step λ_t (the recursion G_t = r_t + d_t[(1 − λ_t) V(x_{t+1}) + λ_t G_{t+1}]) the
    n-step return G_{t:t+n} has weight (Π_{j=0}^{n−2} λ_{t+j})(1 − λ_{t+n−1}) for n < T − t,
    and the full return G_{t:T} keeps the rest, Π_{j=0}^{T−t−2} λ_{t+j}. For a scalar λ these
    are S&B's (1 − λ)λ^{n−1} and λ^{T−t−1}.
    """
    r, d, v, boot = (np.asarray(x, np.float64) for x in (r, d, v, boot))
    T, B = r.shape
    lam = np.broadcast_to(np.asarray(lam, np.float64), (T, B))
    out = np.zeros((T, B))
    for b in range(B):
        vals = [*list(v[:, b]), boot[b]]
        for t in range(T):
            h = T - t
            total, weight_sum = 0.0, 0.0
            for n in range(1, h + 1):
                w = 1.0
                for j in range(n - 1):
                    w *= lam[t + j, b]
                if n < h:
                    w *= 1.0 - lam[t + n - 1, b]
                total += w * n_step_return_np(r, d, vals, t, n, b)
                weight_sum += w
            assert abs(weight_sum - 1.0) < 1e-9
            out[t, b] = total
    return out


def n_step_returns_np(r, d, v, boot, n):
    r, d, v, boot = (np.asarray(x, np.float64) for x in (r, d, v, boot))
    T, B = r.shape
    out = np.zeros((T, B))
    for b in range(B):
        vals = [*list(v[:, b]), boot[b]]
        for t in range(T):
            out[t, b] = n_step_return_np(r, d, vals, t, min(n, T - t), b)
    return out


def gae_np(r, d, v, boot, lam):
    """A_t = Σ_l (Π_{j<l} d_{t+j} λ) δ_{t+l}, δ_t = r_t + d_t V(x_{t+1}) − V(x_t)."""
    r, d, v, boot = (np.asarray(x, np.float64) for x in (r, d, v, boot))
    T, B = r.shape
    out = np.zeros((T, B))
    for b in range(B):
        vals = [*list(v[:, b]), boot[b]]
        for t in range(T):
            total, w = 0.0, 1.0
            for u in range(t, T):
                total += w * (r[u, b] + d[u, b] * vals[u + 1] - vals[u])
                w *= d[u, b] * lam
            out[t, b] = total
    return out


# ---------------------------------------------------------------------------------------------
# Categorical distributions (C51 Alg. 1, Reactor §3.2)
# ---------------------------------------------------------------------------------------------


def project_np(z_p, probs, z_q):
    """C51 Algorithm 1 for arbitrary sorted supports, one source atom at a time.

    Leading axes of z_p / probs are looped over.
    """
    z_p, probs, z_q = (np.asarray(x, np.float64) for x in (z_p, probs, z_q))
    lead = z_p.shape[:-1]
    flat_z, flat_p = z_p.reshape(-1, z_p.shape[-1]), probs.reshape(-1, z_p.shape[-1])
    out = np.zeros((flat_z.shape[0], z_q.shape[0]))
    for row in range(flat_z.shape[0]):
        for j in range(flat_z.shape[1]):
            z = min(max(flat_z[row, j], z_q[0]), z_q[-1])
            p = flat_p[row, j]
            if z <= z_q[0]:
                out[row, 0] += p
                continue
            if z >= z_q[-1]:
                out[row, -1] += p
                continue
            i = 0
            while not (z_q[i] <= z < z_q[i + 1]):
                i += 1
            frac = (z - z_q[i]) / (z_q[i + 1] - z_q[i])  # 0 at z_q[i], 1 at z_q[i+1]
            out[row, i] += p * (1.0 - frac)
            out[row, i + 1] += p * frac
    return out.reshape((*lead, z_q.shape[0]))


def distributional_retrace_np(q_probs, pi, mu, a, r, d, boot_probs, atoms, lam=1.0):
    """Reactor §3.2: an explicit double loop over (t, s) of projected n-step backups."""
    q_probs, pi, mu, r, d, boot_probs, atoms = (
        np.asarray(x, np.float64) for x in (q_probs, pi, mu, r, d, boot_probs, atoms)
    )
    T, B, A, K = q_probs.shape
    out = np.zeros((T, B, K))
    for b in range(B):
        c = [lam * min(1.0, pi[u, b, a[u, b]] / (mu[u, b, a[u, b]] + MU_EPS)) for u in range(T)]
        for t in range(T):
            for s in range(t, T):
                weight = 1.0
                for u in range(t + 1, s + 1):
                    weight *= c[u]
                ret, disc = 0.0, 1.0
                for u in range(t, s + 1):
                    ret += disc * r[u, b]
                    disc *= d[u, b]
                # Σ_b α_{s+1,b} Z(x_{s+1}, b): the masses of the mixture on `atoms`.
                if s + 1 == T:
                    masses = boot_probs[b].copy()
                else:
                    masses = np.zeros(K)
                    for i in range(A):
                        alpha = pi[s + 1, b, i] - (c[s + 1] if i == a[s + 1, b] else 0.0)
                        masses += alpha * q_probs[s + 1, b, i]
                out[t, b] += weight * project_np(ret + disc * atoms, masses, atoms)
    return out


# ---------------------------------------------------------------------------------------------
# Masks: the documented convention, spelled out as "compute each piece separately"
# ---------------------------------------------------------------------------------------------


def mask_pieces(mask_col):
    """Split one trace's mask `[T]` into maximal runs [start, stop) of unmasked steps."""
    pieces, start = [], None
    for t, m in enumerate(mask_col):
        if m and start is None:
            start = t
        if not m and start is not None:
            pieces.append((start, t))
            start = None
    if start is not None:
        pieces.append((start, len(mask_col)))
    return pieces


# ---------------------------------------------------------------------------------------------
# Q(λ) (Peng & Williams 1996; PQN, Gallici et al. 2024, Algorithm 1)
# ---------------------------------------------------------------------------------------------


def q_lambda_np(r, d, mask, q, bootstrap_q, lam):
    """Forward view: G_t = (1 − λ) Σ_{n=1}^{m−1} λ^{n−1} G_t^(n) + λ^{m−1} G_t^(m), where
    G_t^(n) = Σ_{k<n} (Π_{j<k} γ_{t+j}) r_{t+k} + (Π_{j<n} γ_{t+j}) max_a Q(x_{t+n}, a) and m
    is the steps from t to the trace end or to the episode's final observation (the next
    masked step). A masked step's target is max_a Q(x_t, a)."""
    r, d, q, bootstrap_q = (np.asarray(x, np.float64) for x in (r, d, q, bootstrap_q))
    T, B = r.shape
    lam = np.broadcast_to(np.asarray(lam, np.float64), (T, B))
    v = np.concatenate([q.max(-1), bootstrap_q.max(-1)[None]])  # V(x_0..x_T)
    out = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            if mask[t, b] == 0:
                out[t, b] = v[t, b]
                continue
            m = 1
            while t + m < T and mask[t + m, b] != 0:
                m += 1

            def n_step(n, t=t, b=b):
                g, disc = 0.0, 1.0
                for k in range(n):
                    g += disc * r[t + k, b]
                    disc *= d[t + k, b]
                return g + disc * v[t + n, b]

            # λ_s belongs to step s (it weighs the bootstrap at x_{s+1}): the weight of G^(n)
            # is λ_t ··· λ_{t+n−2} · (1 − λ_{t+n−1})
            total, carry = 0.0, 1.0
            for n in range(1, m):
                total += carry * (1.0 - lam[t + n - 1, b]) * n_step(n)
                carry *= lam[t + n - 1, b]
            out[t, b] = total + carry * n_step(m)
    return out
