"""Data-parallel scaling: `python -m experiments.bench_scaling [--env Pong-v5]`.

For 1, 2 and 4 devices it measures ACER's learner updates/s (replay updates on the same
global batch) and training env steps/s (whole iterations). On a CPU-only machine the
devices are fake (`--xla_force_host_platform_device_count`, set here before JAX starts)
and share the same cores, so the figure that means something is the *overhead* of sharding:
the N-device time per update divided by the 1-device time at the same global batch. On a
multi-GPU host the same script measures real scaling.
"""

from __future__ import annotations

import os

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()

import json
import time
from dataclasses import dataclass

import jax
import numpy as np
import tyro

from agents.acer.agent import ACERAgent
from agents.parallel import make_mesh
from envs import make_env
from experiments.args import PRESETS, TrainArgs


@dataclass(frozen=True)
class ScalingArgs:
    """Measure the cost of data-parallel sharding at a fixed global batch."""

    env: str = "CartPole-v1"
    """Environment id (Pong-v5 uses the acer-atari preset, others acer-classic)."""
    devices: tuple[int, ...] = (1, 2, 4)
    """Device counts to compare."""
    num_envs: int = 16
    """Global number of envs (split over the devices)."""
    batch_size: int = 16
    """Global replay batch in traces (split over the devices)."""
    updates: int = 30
    """Timed replay updates per device count."""
    iterations: int = 8
    """Timed training iterations per device count."""
    rounds: int = 3
    """Repeat the timings and keep the median."""
    json_out: str | None = None
    """Optional JSON file for the numbers."""


def measure(args: ScalingArgs, n: int) -> dict:
    preset = "acer-atari" if "-v5" in args.env and "Pong" in args.env else "acer-classic"
    base = TrainArgs(**{**TrainArgs().__dict__, **PRESETS[preset]})
    cfg = base.acer_config().replace(
        num_envs=args.num_envs, batch_size=args.batch_size, replay_ratio=1.0, microbatch_traces=0
    )
    env = make_env(args.env, args.num_envs, 0)
    agent = ACERAgent(cfg, env, seed=0, mesh=make_mesh(n))
    state = agent.init(jax.random.PRNGKey(0))
    compile_s = agent.compile(state)
    steps = cfg.trace_len * cfg.num_envs
    it = 0
    for _ in range(3):  # fill the replay
        state, out = agent.train_iteration(state, it, it * steps)
        jax.device_get(out)
        it += 1
    update_times, iter_times = [], []
    for _ in range(args.rounds):
        learner = state.learner
        t0 = time.perf_counter()
        for _ in range(args.updates):
            learner, m = agent._replay_update(learner, state.replay)
        jax.block_until_ready(m)
        update_times.append((time.perf_counter() - t0) / args.updates)
        state = state._replace(learner=learner)
        t0 = time.perf_counter()
        for _ in range(args.iterations):
            state, out = agent.train_iteration(state, it, it * steps)
            jax.device_get(out)
            it += 1
        iter_times.append((time.perf_counter() - t0) / args.iterations)
    return {
        "devices": n,
        "compile_s": compile_s,
        "update_s": float(np.median(update_times)),
        "updates_per_s": 1.0 / float(np.median(update_times)),
        "env_steps_per_s": steps / float(np.median(iter_times)),
    }


def main(argv: list[str] | None = None) -> dict:
    args = tyro.cli(ScalingArgs, args=argv)
    print(
        f"jax {jax.__version__}: {jax.device_count()} {jax.devices()[0].platform} devices, "
        f"{args.env}, global batch {args.batch_size} traces, {args.num_envs} envs"
    )
    rows = [measure(args, n) for n in args.devices]
    base = rows[0]["update_s"]
    print(f"\n{'devices':>7} {'updates/s':>10} {'env steps/s':>12} {'time/update vs 1':>17}")
    for r in rows:
        r["overhead"] = r["update_s"] / base
        print(
            f"{r['devices']:>7} {r['updates_per_s']:>10.1f} {r['env_steps_per_s']:>12.1f} "
            f"{r['overhead']:>17.2f}"
        )
    out = {"env": args.env, "rows": rows}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
