"""Plain NumPy (float64) references for continuous ACER (Wang et al. 2017, arXiv:1611.01224,
§5 and Algorithm 3 of its appendix), written from the paper's equations.

As in `loss_refs.py`: nothing here calls or mirrors the JAX code. Every reference is an
explicit Python loop, entry by entry, in float64. Per-step arrays are time-major `[T, B]`;
Gaussian statistics `[T, B, D]`.

Episode boundaries follow the documented convention as "compute each piece separately":
a trace is cut at its masked steps (`mask_pieces`); each piece is a trace of its own whose
bootstrap is V of the observation after its last step (the masked step's observation, or
x_T), and at a masked step every target is the estimate itself.
"""

from __future__ import annotations

import math

import numpy as np
from loss_refs import mask_pieces

# ---------------------------------------------------------------------------------------------
# Diagonal Gaussians
# ---------------------------------------------------------------------------------------------


def gaussian_logpdf_np(a, mean, log_std):
    """log N(a; mean, diag σ²) of one action vector, σ = exp(log_std), a sum over dimensions."""
    total = 0.0
    for ai, mi, si in zip(a, mean, log_std, strict=True):
        sigma = math.exp(si)
        total += -0.5 * ((ai - mi) / sigma) ** 2 - math.log(sigma) - 0.5 * math.log(2 * math.pi)
    return total


def gaussian_entropy_np(log_std):
    """½ log((2πe)^D Π σ_i²) of one log-std vector."""
    D = len(log_std)
    return 0.5 * math.log((2 * math.pi * math.e) ** D * math.prod(math.exp(2 * s) for s in log_std))


def gaussian_kl_np(mean_p, log_std_p, mean_q, log_std_q):
    """KL(p ‖ q) of two diagonal Gaussians: ½ [tr(Σ_q⁻¹Σ_p) + (m_q − m_p)ᵀΣ_q⁻¹(m_q − m_p) − D
    + log(det Σ_q / det Σ_p)] (the textbook multivariate formula, for diagonal Σ)."""
    D = len(mean_p)
    var_p = [math.exp(2 * s) for s in log_std_p]
    var_q = [math.exp(2 * s) for s in log_std_q]
    trace = sum(var_p[i] / var_q[i] for i in range(D))
    maha = sum((mean_q[i] - mean_p[i]) ** 2 / var_q[i] for i in range(D))
    logdet = math.log(math.prod(var_q)) - math.log(math.prod(var_p))
    return 0.5 * (trace + maha - D + logdet)


def grad_log_gaussian_np(a, mean, log_std):
    """(∂ log f(a)/∂mean, ∂ log f(a)/∂log σ) of one action: ((a − m)/σ², (a − m)²/σ² − 1)."""
    d_mean = [(ai - mi) / math.exp(2 * si) for ai, mi, si in zip(a, mean, log_std, strict=True)]
    d_log_std = [
        (ai - mi) ** 2 / math.exp(2 * si) - 1.0 for ai, mi, si in zip(a, mean, log_std, strict=True)
    ]
    return np.array(d_mean + d_log_std)


def kl_gradient_fd_np(avg_mean, avg_log_std, mean, log_std, h=1e-6):
    """∂ KL(f_avg ‖ f_φ)/∂φ at φ = (mean, log_std) by central finite differences of
    `gaussian_kl_np`, `[2D]`."""
    phi = np.concatenate([np.asarray(mean, np.float64), np.asarray(log_std, np.float64)])
    D = len(mean)
    out = np.zeros(2 * D)
    for j in range(2 * D):
        up, down = phi.copy(), phi.copy()
        up[j] += h
        down[j] -= h
        kl_up = gaussian_kl_np(avg_mean, avg_log_std, up[:D], up[D:])
        kl_down = gaussian_kl_np(avg_mean, avg_log_std, down[:D], down[D:])
        out[j] = (kl_up - kl_down) / (2 * h)
    return out


# ---------------------------------------------------------------------------------------------
# Stochastic dueling network (§5.1)
# ---------------------------------------------------------------------------------------------


def sdn_q_np(v, adv, adv_samples):
    """Q̃(x_t, a) = V(x_t) + A(x_t, a) − (1/n) Σ_i A(x_t, u_i), entry by entry."""
    T, B, n = np.shape(adv_samples)
    out = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            out[t, b] = v[t, b] + adv[t, b] - sum(adv_samples[t, b, i] for i in range(n)) / n
    return out


# ---------------------------------------------------------------------------------------------
# Q_ret and Q_opc (§5.1–5.2, Algorithm 3)
# ---------------------------------------------------------------------------------------------


def _algorithm3_piece(q, v, rho, r, d, boot, dim, lam, c_max):
    """Algorithm 3's backward loop over one unmasked piece `[L]`, bootstrapped from `boot`:

        Q_ret ← V(x_k);  Q_opc ← V(x_k)
        for i = k − 1 .. 0:
            Q_ret ← r_i + γ_i Q_ret;  Q_opc ← r_i + γ_i Q_opc;   (the targets of step i)
            c_i ← λ min(c_max, ρ_i^{1/d})
            Q_ret ← c_i (Q_ret − Q̃(x_i, a_i)) + V(x_i);  Q_opc ← (Q_opc − Q̃(x_i, a_i)) + V(x_i)

    with γ_i = discount_i (0 at a termination: the bootstrap is cut there)."""
    L = len(q)
    q_ret_out, q_opc_out = np.zeros(L), np.zeros(L)
    q_ret = q_opc = boot
    for i in reversed(range(L)):
        q_ret = r[i] + d[i] * q_ret
        q_opc = r[i] + d[i] * q_opc
        q_ret_out[i], q_opc_out[i] = q_ret, q_opc
        c_i = lam * min(c_max, rho[i] ** (1.0 / dim))
        q_ret = c_i * (q_ret - q[i]) + v[i]
        q_opc = (q_opc - q[i]) + v[i]
    return q_ret_out, q_opc_out


def continuous_retrace_np(q, v, log_pi, log_mu, r, d, boot, dim, lam=1.0, c_max=1.0, mask=None):
    """(Q_ret, Q_opc) `[T, B]` of every trace, piece by piece (module docstring)."""
    q, v, log_pi, log_mu, r, d, boot = (
        np.asarray(x, np.float64) for x in (q, v, log_pi, log_mu, r, d, boot)
    )
    T, B = q.shape
    mask = np.ones((T, B)) if mask is None else np.asarray(mask, np.float64)
    rho = np.exp(log_pi - log_mu)
    q_ret, q_opc = q.copy(), q.copy()  # masked steps: the estimate itself
    for b in range(B):
        for start, stop in mask_pieces(mask[:, b] > 0):
            piece_boot = boot[b] if stop == T else v[stop, b]  # V of x_stop
            sl = slice(start, stop)
            q_ret[sl, b], q_opc[sl, b] = _algorithm3_piece(
                q[sl, b], v[sl, b], rho[sl, b], r[sl, b], d[sl, b], piece_boot, dim, lam, c_max
            )
    return q_ret, q_opc


# ---------------------------------------------------------------------------------------------
# The SDN critic (§5.1) and the policy gradient (§5.2)
# ---------------------------------------------------------------------------------------------


def sdn_value_np(q, v, q_ret, log_pi, log_mu, mask=None):
    """(V_target, loss, −∂loss/∂Q̃, −∂loss/∂V), each `[T, B]`, from Algorithm 3's critic update
    dθ_v = (Q_ret − Q̃)∇Q̃ + min(1, ρ)(Q_ret − Q̃)∇V and V_target = min(1, ρ)(Q_ret − Q̃) + V;
    the loss is ½(Q_ret − Q̃)² + ½(V_target − V)²."""
    T, B = np.shape(q)
    mask = np.ones((T, B)) if mask is None else np.asarray(mask, np.float64)
    out = [np.zeros((T, B)) for _ in range(4)]
    for t in range(T):
        for b in range(B):
            rho = math.exp(log_pi[t, b] - log_mu[t, b])
            err = q_ret[t, b] - q[t, b]
            v_target = min(1.0, rho) * err + v[t, b]
            if mask[t, b] == 0:
                out[0][t, b] = v[t, b]
                continue
            out[0][t, b] = v_target
            out[1][t, b] = 0.5 * err**2 + 0.5 * (v_target - v[t, b]) ** 2
            out[2][t, b] = err
            out[3][t, b] = min(1.0, rho) * err
    return tuple(out)


def continuous_acer_gradient_np(
    mean, log_std, a, mu_mean, mu_log_std, q_opc, v, a_prime, q_prime, c, mask=None
):
    """ĝ_t of §5.2 with respect to φ_t = (mean_t, log_std_t), `[T, B, 2D]`:

    ĝ_t = min(c, ρ_t(a_t)) ∇_φ log f(a_t|φ_t) (Q_opc − V)
        + [1 − c/ρ_t(a'_t)]_+ (Q̃(x_t, a'_t) − V) ∇_φ log f(a'_t|φ_t),

    ρ_t(a) = f(a|φ_t)/μ(a|x_t)."""
    T, B, D = np.shape(mean)
    mask = np.ones((T, B)) if mask is None else np.asarray(mask, np.float64)
    g = np.zeros((T, B, 2 * D))
    for t in range(T):
        for b in range(B):
            if mask[t, b] == 0:
                continue
            phi = (mean[t, b], log_std[t, b])
            beh = (mu_mean[t, b], mu_log_std[t, b])
            rho_a = math.exp(gaussian_logpdf_np(a[t, b], *phi) - gaussian_logpdf_np(a[t, b], *beh))
            rho_ap = math.exp(
                gaussian_logpdf_np(a_prime[t, b], *phi) - gaussian_logpdf_np(a_prime[t, b], *beh)
            )
            term = min(c, rho_a) * (q_opc[t, b] - v[t, b]) * grad_log_gaussian_np(a[t, b], *phi)
            weight = max(0.0, (rho_ap - c) / rho_ap)
            term = term + weight * (q_prime[t, b] - v[t, b]) * grad_log_gaussian_np(
                a_prime[t, b], *phi
            )
            g[t, b] = term
    return g
