"""Time prioritized sampling: sum tree vs. a flat priority array.

    python -m benchmarks.bench_replay
    python -m benchmarks.bench_replay --capacities 10000 100000 --rounds 9

One call = draw `batch_size` leaves proportionally to their priorities, then write new
priorities for those leaves (what the learner does once per update). At every capacity (number
of leaves) it times:

* sum tree: `sum_tree_sample` + `sum_tree_set` on the flat tree, O(B log L);
* categorical: `jax.random.categorical` over the log of all priorities (Gumbel-max, so B × L
  random numbers), then a scatter into the flat priority array, O(B L);
* inverse CDF (for reference): `cumsum` of all priorities + `searchsorted`, then the scatter,
  O(L + B log L);
* replay API: `PrioritizedTraceReplay.sample` (ε-mixture, probabilities, importance weights,
  and `TraceReplay.gather` of B traces of T + 1 = 2 steps with a 1-float observation) +
  `set_priorities`, on a full replay of `num_envs` streams with capacity leaves in total.

Each function is jitted with its state donated; after the first call (compile) and one warm-up
call, the number of calls per round n is chosen so a round takes about `target_round_s`. The
methods run in alternating rounds (they see the same machine load); a round gives the mean
time per call, each call followed by `jax.block_until_ready`, and the table shows the median
over rounds. Priorities start uniform in [0.1, 1.1) (no zeros).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
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

from agents.core.config import check
from engine.args import check_output_file, cli
from replay import (
    PrioritizedReplayState,
    PrioritizedTraceReplay,
    TraceReplay,
    sum_tree_build,
    sum_tree_sample,
    sum_tree_set,
    sum_tree_total,
)

METHODS = ("sum tree", "categorical", "inverse CDF", "replay API")


@dataclasses.dataclass(frozen=True)
class Args:
    capacities: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    """Numbers of leaves (prioritized items) to time."""
    batch_size: int = 32
    """Leaves drawn and updated per call."""
    rounds: int = 7
    """Rounds per method and capacity; the table shows the median."""
    repeats: int = 200
    """Calls per round, at most."""
    target_round_s: float = 0.1
    """Wall time aimed for per round; sets the number of calls for slow methods."""
    num_envs: int = 16
    """Env streams of the replay used for the `replay API` column."""
    inverse_cdf: bool = True
    """Also time the cumsum + searchsorted baseline."""
    replay_api: bool = True
    """Also time PrioritizedTraceReplay.sample + set_priorities."""
    seed: int = 0
    json_out: str | None = None
    """If set, write every number (per-round times, calls per round) to this JSON file."""

    def __post_init__(self):
        for name in ("batch_size", "rounds", "repeats", "num_envs"):
            check(getattr(self, name) >= 1, name, getattr(self, name), ">= 1")
        least = 3 * self.num_envs
        caps = self.capacities
        check(
            bool(caps) and min(caps) >= least,
            "capacities", caps, f"one or more numbers >= 3 * --num-envs ({least})",
        )  # fmt: skip
        t = self.target_round_s
        check(math.isfinite(t) and t > 0, "target_round_s", t, "a finite number > 0")
        check(0 <= self.seed < 2**31, "seed", self.seed, "in [0, 2**31)")
        check_output_file("json_out", self.json_out)


@dataclasses.dataclass
class Case:
    """A step ``state, key -> state, output``, jitted with the key split inside the call.

    Its state and key are donated at every call, so each case needs arrays of its own.
    """

    name: str
    step: Callable[[Any, jax.Array], tuple[Any, Any]]
    state: Any
    key: jax.Array

    def __post_init__(self) -> None:
        step = self.step

        def carried(state_and_key):
            state, key = state_and_key
            key, sub = jax.random.split(key)
            state, out = step(state, sub)
            return (state, key), out

        self._jitted = jax.jit(carried, donate_argnums=0)

    def call(self) -> None:
        (self.state, self.key), out = self._jitted((self.state, self.key))
        jax.block_until_ready((self.state, out))


def make_cases(args: Args, capacity: int) -> list[Case]:
    b = args.batch_size
    key = jax.random.key(args.seed)
    priorities = jax.random.uniform(key, (capacity,), jnp.float32) + 0.1

    def new_priorities(key: jax.Array) -> jax.Array:
        return jax.random.uniform(key, (b,), jnp.float32) + 0.1

    def tree_step(tree, key):
        k_draw, k_new = jax.random.split(key)
        u = jax.random.uniform(k_draw, (b,), jnp.float32) * sum_tree_total(tree)
        leaf = sum_tree_sample(tree, u)
        return sum_tree_set(tree, leaf, new_priorities(k_new)), leaf

    def categorical_step(flat, key):
        k_draw, k_new = jax.random.split(key)
        leaf = jax.random.categorical(k_draw, jnp.log(flat), shape=(b,))
        return flat.at[leaf].set(new_priorities(k_new)), leaf

    def inverse_cdf_step(flat, key):
        k_draw, k_new = jax.random.split(key)
        cdf = jnp.cumsum(flat)
        u = jax.random.uniform(k_draw, (b,), jnp.float32) * cdf[-1]
        leaf = jnp.minimum(jnp.searchsorted(cdf, u, side="right"), capacity - 1)
        return flat.at[leaf].set(new_priorities(k_new)), leaf

    cases = [
        Case("sum tree", tree_step, sum_tree_build(priorities), jax.random.fold_in(key, 1)),
        Case("categorical", categorical_step, priorities + 0, jax.random.fold_in(key, 2)),
    ]
    if args.inverse_cdf:
        cases.append(
            Case("inverse CDF", inverse_cdf_step, priorities + 0, jax.random.fold_in(key, 3))
        )
    if args.replay_api:
        replay, state = full_replay(args, capacity, priorities)

        def api_step(state, key):
            k_draw, k_new = jax.random.split(key)
            traces, info = replay.sample(state, k_draw, b)
            new = new_priorities(k_new)
            state = replay.set_priorities(state, info.env_index, info.slot, new)
            return state, traces.obs

        cases.append(Case("replay API", api_step, state, jax.random.fold_in(key, 4)))
    return cases


def full_replay(
    args: Args, capacity: int, priorities: jax.Array
) -> tuple[PrioritizedTraceReplay, PrioritizedReplayState]:
    """A full replay of ``capacity`` traces (T = 1; rounded down to a multiple of ``num_envs``),
    every valid slot assigned a priority.

    Filling it with ``add`` would take ``C`` adds, so the state is set up directly.
    """
    n = args.num_envs
    base = TraceReplay(
        num_envs=n,
        trace_len=1,
        capacity=capacity,
        obs_shape=(1,),
        obs_dtype=np.float32,
        frame_stack=1,
        step_spec={},
    )
    replay = PrioritizedTraceReplay(base)
    c = replay.traces_per_env
    state = replay.init()
    base_state = state.base.replace(
        write_slot=jnp.zeros((), jnp.int32), count=jnp.full((), c, jnp.int32)
    )
    stored = priorities[: n * c].reshape(n, c)
    valid = base.valid_mask(base_state)
    leaves = jnp.where(valid[None, :], stored, 0.0).reshape(-1)
    state = PrioritizedReplayState(
        base=base_state,
        priorities=stored,
        tree=sum_tree_build(leaves),
        assigned=jnp.ones((n, c), jnp.bool_),
    )
    return replay, state


def time_cases(cases: list[Case], args: Args) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    calls: dict[str, int] = {}
    for case in cases:
        start = time.perf_counter()
        case.call()  # trace + compile + run
        first = time.perf_counter() - start
        case.call()  # warm-up
        start = time.perf_counter()
        case.call()
        once = time.perf_counter() - start
        calls[case.name] = int(np.clip(args.target_round_s / max(once, 1e-9), 1, args.repeats))
        results[case.name] = {"first_call_ms": 1e3 * first, "calls": calls[case.name], "us": []}
    for _ in range(args.rounds):
        for case in cases:  # alternating: every method sees the same load
            n = calls[case.name]
            start = time.perf_counter()
            for _ in range(n):
                case.call()
            results[case.name]["us"].append(1e6 * (time.perf_counter() - start) / n)
    for r in results.values():
        r["us_median"] = statistics.median(r["us"])
    return results


def _fmt(us: float | None) -> str:
    if us is None:
        return "-"
    return f"{us:,.1f}" if us < 1e4 else f"{us:,.0f}"


def main(args: Args) -> dict[str, Any]:
    """Run the benchmark, print the table, and return every number (also to `json_out`)."""
    console = Console(width=None if sys.stdout.isatty() else 120)
    dev = jax.devices()[0]
    console.print(
        f"jax {jax.__version__}, backend {jax.default_backend()}, device {dev} "
        f"({dev.device_kind}); CPUs {os.cpu_count()}; batch {args.batch_size}"
    )
    report: dict[str, Any] = {"args": dataclasses.asdict(args), "results": []}
    t_start = time.perf_counter()
    for capacity in args.capacities:
        console.print(f"capacity {capacity:,}: timing ...")
        cases = make_cases(args, capacity)
        for name, r in time_cases(cases, args).items():
            report["results"].append({"capacity": capacity, "method": name, **r})
        del cases
    report["wall_s"] = time.perf_counter() - t_start

    by_key = {(e["capacity"], e["method"]): e["us_median"] for e in report["results"]}
    table = Table(
        title=(
            f"µs per call: sample {args.batch_size} + update those {args.batch_size} "
            f"(median of {args.rounds} rounds)"
        )
    )
    table.add_column("leaves", justify="right")
    table.add_column("sum tree", justify="right")
    table.add_column("categorical", justify="right")
    table.add_column("categorical / sum tree", justify="right")
    if args.inverse_cdf:
        table.add_column("inverse CDF", justify="right")
    if args.replay_api:
        table.add_column("replay API", justify="right")
    for capacity in args.capacities:
        tree = by_key[(capacity, "sum tree")]
        categorical = by_key[(capacity, "categorical")]
        row = [f"{capacity:,}", _fmt(tree), _fmt(categorical), f"{categorical / tree:,.1f}x"]
        if args.inverse_cdf:
            row.append(_fmt(by_key.get((capacity, "inverse CDF"))))
        if args.replay_api:
            row.append(_fmt(by_key.get((capacity, "replay API"))))
        table.add_row(*row)
    console.print(table)
    console.print(
        "replay API = PrioritizedTraceReplay.sample (with gather of the traces) + "
        f"set_priorities, {args.num_envs} env streams. total {report['wall_s']:.1f} s"
    )
    if args.json_out:
        os.makedirs(os.path.dirname(os.path.abspath(args.json_out)), exist_ok=True)
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)
        console.print(f"wrote {args.json_out}")
    return report


if __name__ == "__main__":
    main(cli(Args, prog="python -m benchmarks.bench_replay"))
