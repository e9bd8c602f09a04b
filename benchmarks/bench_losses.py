"""Time every `agents.losses` function per jitted call, and the same quantities in rlax.

    python -m benchmarks.bench_losses
    python -m benchmarks.bench_losses --batch-sizes 32 256 --json-out runs/bench_losses.json

Each loss runs at T = `trace_len`, A = `num_actions` and every B in `batch_sizes`, on random
inputs shared by all losses at that size. One measurement: the first call (trace + compile +
run, reported separately), one more warm-up call, a short calibration, then `rounds` rounds
of n calls, each call followed by `jax.block_until_ready`. n ≤ `repeats` is chosen so that
a round takes about `target_round_s` (slow losses get fewer calls). A round gives the mean
time per call; the table shows the median over rounds.

rlax comparison. For Retrace, V-trace, λ-returns and the categorical projection the script
also computes the same quantity with rlax, `vmap`ped over the batch axis (rlax functions take
one sequence). Before timing it checks that both agree on the same inputs and prints the
largest absolute difference; a disagreement raises. That is a guard for the timing: the
agreement itself is tested in tests/losses/test_rlax_agreement.py over random shapes, seeds
and episode ends, on inputs built by this module's `make_inputs` and `rlax_pairs`. Then it
times the two in alternating rounds, so both see the same machine load, and reports ours/rlax
(below 1: ours is faster) as the ratio of the two medians, which shrugs off a burst of load
from other processes that hits a few rounds of one side, next to the median of the per-round
ratios. Each side gets its
natural inputs, sliced outside the timed call: ours takes steps 0..T−1 plus a bootstrap value
for x_T, rlax's inputs are shifted by one step (V(x_1)..V(x_T), Q(x_1, ·)..Q(x_T, ·)).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.table import Table

from agents import losses
from agents.core.config import check
from engine.args import check_output_file, cli

LAMBDA = 0.9  # trace decay for Retrace, λ-returns and distributional Retrace
GAE_LAMBDA = 0.95
N_STEP = 5
ACER_C = 10.0  # ACER's truncation constant (Atari experiments)
TR_DELTA = 1.0  # ACER's trust-region δ
V_MIN, V_MAX = -10.0, 10.0  # categorical support
# Agreement with rlax: relative tolerance as asked, plus a small absolute floor for float32
# entries near zero (sums of T terms of size ~1 carry ~1e-6 of rounding).
RTOL, ATOL = 1e-4, 1e-5

DIST_RETRACE = "distributional_retrace_targets"
# Every timed entry, in table order. The first twelve are the losses; then the gradients.
LOSS_NAMES = (
    "retrace_targets",
    "acer_value_loss",
    "acer_policy_loss",
    "trust_region_policy_loss",
    "categorical_projection",
    DIST_RETRACE,
    "beta_loo_policy_loss",
    "vtrace",
    "lambda_returns",
    "n_step_returns",
    "gae",
    "entropy",
)
GRAD_NAMES = (
    "grad acer_policy_loss",
    "grad trust_region_policy_loss",
    "grad beta_loo_policy_loss",
)
RLAX_COMPARED = ("retrace_targets", "vtrace", "lambda_returns", "categorical_projection")


@dataclasses.dataclass(frozen=True)
class Args:
    batch_sizes: tuple[int, ...] = (32, 256, 1024)
    """Batch sizes B (number of traces) to time."""
    trace_len: int = 20
    """Trace length T."""
    num_actions: int = 18
    """Number of actions A (18 is the full Atari action set)."""
    num_atoms: int = 51
    """Atoms K of the categorical support [-10, 10] (51 as in C51 and Reactor)."""
    repeats: int = 200
    """Timed calls per round, at most; slow calls use fewer (see target_round_s)."""
    rounds: int = 5
    """Rounds per measurement; the reported time is the median over rounds."""
    target_round_s: float = 0.2
    """Wall time aimed for per round and entry; sets the number of calls for slow losses."""
    max_dist_batch: int = 256
    """Largest B at which distributional_retrace_targets is timed (it costs O(T² K²) per
    trace); larger sizes are shown as skipped."""
    compare_rlax: bool = True
    """Also time rlax on the same inputs (Retrace, V-trace, λ-returns, categorical projection)."""
    seed: int = 0
    """Seed of the random inputs."""
    json_out: str | None = None
    """If set, write every number to this JSON file: per-round times, calls per round, and the
    first call's time (trace + compile + run, if not already compiled in this process)."""

    def __post_init__(self):
        sizes = self.batch_sizes
        check(bool(sizes) and min(sizes) >= 1, "batch_sizes", sizes, "one or more sizes >= 1")
        for name in ("trace_len", "num_actions", "repeats", "rounds", "max_dist_batch"):
            check(getattr(self, name) >= 1, name, getattr(self, name), ">= 1")
        check(self.num_atoms >= 2, "num_atoms", self.num_atoms, ">= 2")
        t = self.target_round_s
        check(math.isfinite(t) and t > 0, "target_round_s", t, "a finite number > 0")
        check(0 <= self.seed < 2**31, "seed", self.seed, "in [0, 2**31)")
        check_output_file("json_out", self.json_out)


# --------------------------------------------------------------------------- inputs


@dataclasses.dataclass(frozen=True)
class Inputs:
    """Random time-major inputs. `*_full` arrays hold T+1 steps (x_0..x_T)."""

    logits_full: jax.Array  # [T+1, B, A]
    pi_full: jax.Array  # [T+1, B, A]
    mu_full: jax.Array  # [T+1, B, A]
    q_full: jax.Array  # [T+1, B, A]
    a_full: jax.Array  # [T+1, B] int32, sampled from μ
    v_full: jax.Array  # [T+1, B] V(x_t) = Σ_a π Q
    avg_logits: jax.Array  # [T, B, A]
    r: jax.Array  # [T, B]
    d: jax.Array  # [T, B] 0.99, zero at terminal steps (a fraction p_terminal, 5% by default)
    mu_a: jax.Array  # [T, B] μ(a_t|x_t)
    rho: jax.Array  # [T, B] π(a_t|x_t)/μ(a_t|x_t)
    q_ret: jax.Array  # [T, B] our Retrace targets, input to the policy losses
    atoms: jax.Array  # [K]
    z_p: jax.Array  # [T*B, K] atoms shifted by r + γ z
    z_probs: jax.Array  # [T*B, K]
    q_probs: jax.Array | None  # [T, B, A, K], None when the distributional case is skipped
    bootstrap_probs: jax.Array | None  # [B, K]

    @property
    def T(self) -> int:
        return self.r.shape[0]


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def make_inputs(args: Args, batch: int, with_dist: bool, p_terminal: float = 0.05) -> Inputs:
    """Random inputs at one size. A fraction `p_terminal` of steps has discount 0 (an episode
    ends inside the trace); 0 gives traces without episode boundaries."""
    rng = np.random.default_rng([args.seed, batch])
    T, A, K = args.trace_len, args.num_actions, args.num_atoms
    f32 = np.float32
    logits = rng.normal(size=(T + 1, batch, A)).astype(f32)
    pi = _softmax(logits)
    mu = _softmax(rng.normal(size=(T + 1, batch, A))).astype(f32)
    q = rng.normal(size=(T + 1, batch, A)).astype(f32)
    u = rng.random((T + 1, batch, 1))
    a = np.minimum((u > np.cumsum(mu, axis=-1)).sum(axis=-1), A - 1).astype(np.int32)
    v = (pi * q).sum(axis=-1)
    r = rng.normal(size=(T, batch)).astype(f32)
    d = np.where(rng.random((T, batch)) < p_terminal, 0.0, 0.99).astype(f32)
    pi_a = np.take_along_axis(pi, a[..., None], axis=-1)[..., 0]
    mu_a = np.take_along_axis(mu, a[..., None], axis=-1)[..., 0]
    atoms = np.linspace(V_MIN, V_MAX, K, dtype=f32)
    z_p = (r.reshape(-1, 1) + d.reshape(-1, 1) * atoms[None]).astype(f32)
    z_probs = _softmax(rng.normal(size=(T * batch, K))).astype(f32)
    q_probs = boot_probs = None
    if with_dist:
        q_probs = jnp.asarray(_softmax(rng.normal(size=(T, batch, A, K))).astype(f32))
        boot_probs = jnp.asarray(_softmax(rng.normal(size=(batch, K))).astype(f32))
    x = {
        k: jnp.asarray(val)
        for k, val in dict(
            logits_full=logits,
            pi_full=pi.astype(f32),
            mu_full=mu,
            q_full=q,
            a_full=a,
            v_full=v.astype(f32),
            avg_logits=(logits[:T] + 0.1 * rng.normal(size=(T, batch, A))).astype(f32),
            r=r,
            d=d,
            mu_a=mu_a[:T].astype(f32),
            rho=(pi_a[:T] / mu_a[:T]).astype(f32),
            atoms=atoms,
            z_p=z_p,
            z_probs=z_probs,
        ).items()
    }
    # A fresh jit of retrace (not `_retrace`), so that its first timed call still compiles.
    retrace = jax.jit(functools.partial(losses.retrace_targets, lambda_=LAMBDA))
    q_ret = retrace(
        x["q_full"][:T],
        x["pi_full"][:T],
        x["mu_full"][:T],
        x["a_full"][:T],
        x["r"],
        x["d"],
        x["v_full"][T],
    )
    return Inputs(**x, q_ret=q_ret, q_probs=q_probs, bootstrap_probs=boot_probs)


# --------------------------------------------------------------------------- our entries
# Jitted once at import, so repeated `main` calls in one process reuse the compilations.

_retrace = jax.jit(functools.partial(losses.retrace_targets, lambda_=LAMBDA))
_acer_value = jax.jit(losses.acer_value_loss)
_acer_policy = jax.jit(functools.partial(losses.acer_policy_loss, c=ACER_C))
_projection = jax.jit(losses.categorical_projection)
_dist_retrace = jax.jit(functools.partial(losses.distributional_retrace_targets, lambda_=LAMBDA))
_beta_loo = jax.jit(losses.beta_loo_policy_loss)
_vtrace = jax.jit(losses.vtrace)  # λ = 1: rlax's policy-gradient advantage differs for λ < 1
_lambda_returns = jax.jit(functools.partial(losses.lambda_returns, lambda_=LAMBDA))
_n_step = jax.jit(functools.partial(losses.n_step_returns, n=N_STEP))
_gae = jax.jit(functools.partial(losses.gae, lambda_=GAE_LAMBDA))
_entropy = jax.jit(losses.entropy)


def _tr_loss(logits, avg_logits, q, mu, a, q_ret):
    def policy_loss(lg):
        return losses.acer_policy_loss(lg, q, mu, a, q_ret, c=ACER_C)

    return losses.trust_region_policy_loss(policy_loss, logits, avg_logits, TR_DELTA)


_trust_region = jax.jit(_tr_loss)


@jax.jit
def _grad_acer_policy(logits, q, mu, a, q_ret):
    return jax.grad(lambda lg: losses.acer_policy_loss(lg, q, mu, a, q_ret, c=ACER_C).sum())(logits)


@jax.jit
def _grad_trust_region(logits, avg_logits, q, mu, a, q_ret):
    return jax.grad(lambda lg: _tr_loss(lg, avg_logits, q, mu, a, q_ret).loss.sum())(logits)


@jax.jit
def _grad_beta_loo(logits, q, a, mu_a, q_ret):
    return jax.grad(lambda lg: losses.beta_loo_policy_loss(lg, q, a, mu_a, q_ret).sum())(logits)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]


def our_cases(x: Inputs) -> list[Case]:
    """Our entries at one size, in table order (the distributional one only if inputs exist)."""
    T = x.T
    q, pi, mu, a = x.q_full[:T], x.pi_full[:T], x.mu_full[:T], x.a_full[:T]
    logits, v, boot = x.logits_full[:T], x.v_full[:T], x.v_full[T]
    cases = [
        Case("retrace_targets", _retrace, (q, pi, mu, a, x.r, x.d, boot)),
        Case("acer_value_loss", _acer_value, (q, a, x.q_ret)),
        Case("acer_policy_loss", _acer_policy, (logits, q, mu, a, x.q_ret)),
        Case("trust_region_policy_loss", _trust_region, (logits, x.avg_logits, q, mu, a, x.q_ret)),
        Case("categorical_projection", _projection, (x.z_p, x.z_probs, x.atoms)),
    ]
    if x.q_probs is not None:
        dist_args = (x.q_probs, pi, mu, a, x.r, x.d, x.bootstrap_probs, x.atoms)
        cases.append(Case(DIST_RETRACE, _dist_retrace, dist_args))
    cases += [
        Case("beta_loo_policy_loss", _beta_loo, (logits, q, a, x.mu_a, x.q_ret)),
        Case("vtrace", _vtrace, (v, boot, x.r, x.d, x.rho)),
        Case("lambda_returns", _lambda_returns, (x.r, x.d, v, boot)),
        Case("n_step_returns", _n_step, (x.r, x.d, v, boot)),
        Case("gae", _gae, (x.r, x.d, v, boot)),
        Case("entropy", _entropy, (logits,)),
        Case("grad acer_policy_loss", _grad_acer_policy, (logits, q, mu, a, x.q_ret)),
        Case(
            "grad trust_region_policy_loss",
            _grad_trust_region,
            (logits, x.avg_logits, q, mu, a, x.q_ret),
        ),
        Case("grad beta_loo_policy_loss", _grad_beta_loo, (logits, q, a, x.mu_a, x.q_ret)),
    ]
    return cases


# --------------------------------------------------------------------------- rlax entries


def make_rlax_fns(rlax) -> dict[str, Callable[..., Any]]:
    """The same quantities as ours, built from rlax's single-sequence functions."""

    def batched(fn, in_axes=1):
        return jax.vmap(fn, in_axes=in_axes, out_axes=1)

    def retrace(q_next, pi_next, mu_next, a_next, r, d):
        # Inputs at x_1..x_T. rlax drops c and Q(x_T, a_T) at the last step and bootstraps
        # from Σ_a π(a|x_T) Q(x_T, a), exactly like ours with bootstrap_value = V(x_T). The
        # trace coefficient is built as in `rlax.retrace`: π/(μ + ε), ε = 1e-8 = MU_EPSILON.
        pi_a = jnp.take_along_axis(pi_next, a_next[..., None], axis=-1)[..., 0]
        mu_a = jnp.take_along_axis(mu_next, a_next[..., None], axis=-1)[..., 0]
        c = LAMBDA * jnp.minimum(1.0, pi_a / (mu_a + losses.MU_EPSILON))
        fn = functools.partial(
            rlax.general_off_policy_returns_from_action_values, stop_target_gradients=True
        )
        return batched(fn)(q_next, a_next, r, d, c, pi_next)

    def vtrace(v, v_next, r, d, rho):
        out = batched(rlax.vtrace_td_error_and_advantage)(v, v_next, r, d, rho)
        return out.errors + v, out.pg_advantage  # (v_s, policy-gradient advantage)

    def lambda_returns(r, d, v_next):
        fn = functools.partial(rlax.lambda_returns, lambda_=LAMBDA, stop_target_gradients=True)
        return batched(fn)(r, d, v_next)

    def projection(z_p, probs, z_q):
        return jax.vmap(rlax.categorical_l2_project, in_axes=(0, 0, None))(z_p, probs, z_q)

    return {
        "retrace_targets": jax.jit(retrace),
        "vtrace": jax.jit(vtrace),
        "lambda_returns": jax.jit(lambda_returns),
        "categorical_projection": jax.jit(projection),
    }


def rlax_args(x: Inputs) -> dict[str, tuple[Any, ...]]:
    nxt = slice(1, None)  # x_1..x_T
    v, v_next = x.v_full[: x.T], x.v_full[nxt]
    return {
        "retrace_targets": (
            x.q_full[nxt],
            x.pi_full[nxt],
            x.mu_full[nxt],
            x.a_full[nxt],
            x.r,
            x.d,
        ),
        "vtrace": (v, v_next, x.r, x.d, x.rho),
        "lambda_returns": (x.r, x.d, v_next),
        "categorical_projection": (x.z_p, x.z_probs, x.atoms),
    }


def rlax_pairs(x: Inputs, rlax_fns: dict[str, Callable[..., Any]]) -> list[tuple[Case, Case]]:
    """(ours, rlax) for every quantity in `rlax_fns`, on the same inputs `x`.

    Shared with tests/losses/test_rlax_agreement.py, which checks the pairs over random shapes
    and seeds, with and without episode ends.
    """
    ref_args = rlax_args(x) if rlax_fns else {}
    return [
        (case, Case(case.name, rlax_fns[case.name], ref_args[case.name]))
        for case in our_cases(x)
        if case.name in rlax_fns
    ]


def check_agreement(name: str, ours, ref) -> float:
    """Raise unless every output leaf agrees (allclose); return the max absolute difference."""
    ours_leaves, ref_leaves = jax.tree.leaves(ours), jax.tree.leaves(ref)
    if len(ours_leaves) != len(ref_leaves):
        raise AssertionError(f"{name}: {len(ours_leaves)} outputs vs {len(ref_leaves)} in rlax")
    max_diff = 0.0
    for i, (o, r) in enumerate(zip(ours_leaves, ref_leaves, strict=True)):
        o, r = np.asarray(o, np.float64), np.asarray(r, np.float64)
        if o.shape != r.shape:
            raise AssertionError(f"{name}[{i}]: shape {o.shape} vs rlax {r.shape}")
        diff = float(np.max(np.abs(o - r)))
        max_diff = max(max_diff, diff)
        if not np.allclose(o, r, rtol=RTOL, atol=ATOL):
            raise AssertionError(
                f"{name}[{i}]: ours and rlax differ (max |diff| {diff:.3g}, rtol {RTOL}, "
                f"atol {ATOL}); the ratio would not compare the same quantity"
            )
    return max_diff


# --------------------------------------------------------------------------- timing


def _round(fn, fargs, calls: int) -> float:
    """Mean seconds per call over `calls` calls, each waited for."""
    t0 = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn(*fargs))
    return (time.perf_counter() - t0) / calls


def _first_call(case: Case) -> tuple[Any, float]:
    """Output and milliseconds of one call, waited for (includes compilation if not cached)."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(case.fn(*case.args))
    return out, 1e3 * (time.perf_counter() - t0)


def _prepare(fn, fargs, args: Args) -> dict[str, Any]:
    """Compile and warm up; choose the calls per round from a short calibration."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*fargs))
    first_call_s = time.perf_counter() - t0
    jax.block_until_ready(fn(*fargs))
    estimate = _round(fn, fargs, 3)
    calls = max(1, min(args.repeats, int(args.target_round_s / max(estimate, 1e-9))))
    return {"first_call_ms": 1e3 * first_call_s, "calls_per_round": calls}


def _summary(info: dict[str, Any], rounds_s: list[float]) -> dict[str, Any]:
    us = [1e6 * s for s in rounds_s]
    return {**info, "us_median": statistics.median(us), "us_min": min(us), "us_rounds": us}


def time_single(case: Case, args: Args) -> dict[str, Any]:
    info = _prepare(case.fn, case.args, args)
    rounds_s = [_round(case.fn, case.args, info["calls_per_round"]) for _ in range(args.rounds)]
    return _summary(info, rounds_s)


def time_pair(case: Case, ref: Case, args: Args) -> tuple[dict, dict, list[float]]:
    """Time ours and rlax in alternating rounds; return both summaries and per-round ratios."""
    info_o, info_r = _prepare(case.fn, case.args, args), _prepare(ref.fn, ref.args, args)
    ours_s, ref_s = [], []
    for i in range(args.rounds):
        if i % 2 == 0:
            ours_s.append(_round(case.fn, case.args, info_o["calls_per_round"]))
            ref_s.append(_round(ref.fn, ref.args, info_r["calls_per_round"]))
        else:
            ref_s.append(_round(ref.fn, ref.args, info_r["calls_per_round"]))
            ours_s.append(_round(case.fn, case.args, info_o["calls_per_round"]))
    ratios = [o / r for o, r in zip(ours_s, ref_s, strict=True)]
    return _summary(info_o, ours_s), _summary(info_r, ref_s), ratios


# --------------------------------------------------------------------------- report


def _import_rlax(console: Console):
    try:
        import rlax  # heavy (distrax, tfp): imported only when the comparison is asked for
    except ImportError:
        console.print("rlax not installed: pip install rlax==0.1.9 to compare")
        return None
    return rlax


def _meta(args: Args, rlax) -> dict[str, Any]:
    dev = jax.devices()[0]
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "args": dataclasses.asdict(args),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": _jaxlib_version(),
        "rlax": getattr(rlax, "__version__", None) if rlax is not None else None,
        "backend": jax.default_backend(),
        "device": str(dev),
        "device_kind": dev.device_kind,
        "num_devices": jax.device_count(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def _jaxlib_version() -> str | None:
    try:
        import jaxlib

        return jaxlib.__version__
    except (ImportError, AttributeError):
        return None


def _fmt_us(us: float) -> str:
    return f"{us:,.1f}" if us < 1e4 else f"{us:,.0f}"


def print_tables(console: Console, args: Args, report: dict[str, Any]) -> None:
    by_key = {(e["name"], e["batch_size"]): e for e in report["results"]}
    table = Table(
        title=(
            f"µs per jitted call, median of {args.rounds} rounds "
            f"(T={args.trace_len}, A={args.num_actions}, K={args.num_atoms})"
        ),
    )
    table.add_column("loss")
    for b in args.batch_sizes:
        table.add_column(f"B={b}", justify="right")
    for name in LOSS_NAMES + GRAD_NAMES:
        cells = []
        for b in args.batch_sizes:
            e = by_key.get((name, b))
            if e is not None:
                cells.append(_fmt_us(e["us_median"]))
            elif name == DIST_RETRACE and b > args.max_dist_batch:
                cells.append(f"skipped (B > {args.max_dist_batch})")
            else:
                cells.append("-")
        table.add_row(name, *cells)
    console.print(table)
    console.print(f"{DIST_RETRACE} is timed only for B ≤ --max-dist-batch {args.max_dist_batch}.")
    console.print(
        f"Calls per round ≤ {args.repeats}, chosen so a round takes about "
        f"{args.target_round_s} s; first-call (compile) times are in the JSON output."
    )

    if not report["rlax"]:
        return
    cmp = Table(
        title="ours vs rlax (same inputs, alternating rounds)",
    )
    for col, just in [
        ("quantity", "left"),
        ("B", "right"),
        ("ours µs", "right"),
        ("rlax µs", "right"),
        ("ours/rlax", "right"),
        ("per-round ratio (median)", "right"),
        ("max |diff|", "right"),
    ]:
        cmp.add_column(col, justify=just)
    for e in report["rlax"]:
        ratio = e["ratio"]
        style = "green" if ratio <= 1.0 else "red"
        cmp.add_row(
            e["name"],
            str(e["batch_size"]),
            _fmt_us(e["ours_us_median"]),
            _fmt_us(e["rlax_us_median"]),
            f"[{style}]{ratio:.2f}[/{style}]",
            f"{e['ratio_median']:.2f}",
            f"{e['max_abs_diff']:.2e}",
        )
    console.print(cmp)
    console.print("ours/rlax = median ours µs / median rlax µs; goal ≤ 1.")
    slower = [e for e in report["rlax"] if e["ratio"] > 1.0]
    if slower:
        console.print("Slower than rlax (ratio > 1; run-to-run noise here is several %):")
        for e in slower:
            console.print(
                f"  {e['name']} at B={e['batch_size']}: {e['ratio']:.3f}x "
                f"(per-round ratios {', '.join(f'{r:.2f}' for r in e['ratios'])})"
            )
    else:
        console.print("Ours is at least as fast as rlax on every compared quantity and size.")


# --------------------------------------------------------------------------- main


def main(args: Args) -> dict[str, Any]:
    """Run the benchmark, print the tables, and return every number (also to `json_out`)."""
    console = Console(width=None if sys.stdout.isatty() else 120)
    rlax = _import_rlax(console) if args.compare_rlax else None
    meta = _meta(args, rlax)
    console.print(
        f"jax {meta['jax']} (jaxlib {meta['jaxlib']}), python {meta['python']}, "
        f"rlax {meta['rlax'] or '-'}"
    )
    console.print(
        f"backend {meta['backend']}, device {meta['device']} ({meta['device_kind']}), "
        f"{meta['num_devices']} device(s); CPUs: {meta['cpu_count']} "
        f"({meta['cpus_usable']} usable by this process)"
    )
    rlax_fns = make_rlax_fns(rlax) if rlax is not None else {}
    report: dict[str, Any] = {"meta": meta, "results": [], "rlax": []}
    t_start = time.perf_counter()
    for b in args.batch_sizes:
        with_dist = b <= args.max_dist_batch
        x = make_inputs(args, b, with_dist)
        cases = our_cases(x)
        refs = {ours.name: ref for ours, ref in rlax_pairs(x, rlax_fns)}
        console.print(f"B={b}: timing {len(cases) + len(refs)} entries ...")
        for case in cases:
            rec = {"name": case.name, "batch_size": b}
            ref = refs.get(case.name)
            if ref is not None:
                ours_out, ours_ms = _first_call(case)
                ref_out, ref_ms = _first_call(ref)
                diff = check_agreement(case.name, ours_out, ref_out)
                ours, theirs, ratios = time_pair(case, ref, args)
                ours["first_call_ms"], theirs["first_call_ms"] = ours_ms, ref_ms
                report["results"].append({**rec, **ours})
                report["rlax"].append(
                    {
                        **rec,
                        "ours_us_median": ours["us_median"],
                        "rlax_us_median": theirs["us_median"],
                        "ratio": ours["us_median"] / theirs["us_median"],
                        "ratio_median": statistics.median(ratios),
                        "ratios": ratios,
                        "max_abs_diff": diff,
                        "rlax": theirs,
                    }
                )
            else:
                report["results"].append({**rec, **time_single(case, args)})
        del x, cases, refs
    report["meta"]["wall_s"] = time.perf_counter() - t_start
    print_tables(console, args, report)
    console.print(f"total {report['meta']['wall_s']:.1f} s")
    if args.json_out:
        os.makedirs(os.path.dirname(os.path.abspath(args.json_out)), exist_ok=True)
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)
        console.print(f"wrote {args.json_out}")
    return report


if __name__ == "__main__":
    main(cli(Args, prog="python -m benchmarks.bench_losses"))
