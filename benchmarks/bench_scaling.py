"""Data-parallel scaling: `python -m benchmarks.bench_scaling [--agent acer] [--env ...]`.

For 1, 2 and 4 devices it times whole training iterations of any registered agent (the
runner's TrainLoop) at the same global batch and env count, and reports env steps/s,
learner updates/s and the time per update relative to one device. On a CPU-only machine the
devices are fake (`--xla_force_host_platform_device_count`, set here before JAX starts) and
share the same cores, so the figure that means something is the *overhead* of sharding. On a
multi-GPU host the same script measures real scaling.
"""

from __future__ import annotations

import os

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()

import dataclasses
from dataclasses import dataclass

import jax
import numpy as np

from agents.core.config import check
from agents.core.parallel import make_mesh
from engine.args import check_env, check_output_file, cli, lookup
from engine.common import make_agent, save_results
from engine.runner import TrainLoop


@dataclass(frozen=True)
class ScalingArgs:
    """Measure the cost of data-parallel sharding at a fixed global batch."""

    agent: str | None = None
    """Agent to measure (default: the agent --preset belongs to, else acer)."""
    env: str = "CartPole-v1"
    """Environment id."""
    preset: str | None = None
    """Preset (default: the agent's default preset)."""
    devices: tuple[int, ...] = (1, 2, 4)
    """Device counts to compare."""
    num_envs: int = 16
    """Global number of envs (split over the devices)."""
    batch_size: int = 16
    """Global replay batch in traces (split over the devices)."""
    iterations: int = 8
    """Timed training iterations per device count and round."""
    rounds: int = 3
    """Repeat the timings and keep the median."""
    json_out: str | None = None
    """Optional JSON file for the numbers."""

    def __post_init__(self):
        devices = self.devices
        check(bool(devices) and min(devices) >= 1, "devices", devices, "one or more counts >= 1")
        for name in ("num_envs", "batch_size", "iterations", "rounds"):
            check(getattr(self, name) >= 1, name, getattr(self, name), ">= 1")
        for name in ("num_envs", "batch_size"):  # split evenly over the devices
            value = getattr(self, name)
            check(
                all(value % n == 0 for n in devices),
                name, value, f"divisible by every --devices count {devices}",
            )  # fmt: skip
        check(self.agent is None or self.agent.strip() != "", "agent", self.agent, "non-empty")
        check(self.env.strip() != "", "env", self.env, "non-empty")
        check_output_file("json_out", self.json_out)
        check_env(self.env)


def measure(args: ScalingArgs, n: int) -> dict:
    agent = make_agent(
        args.agent, args.env, preset=args.preset, mesh=make_mesh(n),
        num_envs=args.num_envs, batch_size=args.batch_size, microbatch_traces=0,
    )  # fmt: skip
    try:
        devices = agent.num_devices  # read back: the mesh really has n devices
        state = agent.init(jax.random.PRNGKey(0))
        compile_s = agent.compile(state)
        loop = TrainLoop(agent, state)
        loop.timed(3)  # fill the replay
        rounds = [loop.timed(args.iterations) for _ in range(args.rounds)]
    finally:
        agent.close()
    per_update = [t / max(u, 1) for t, _, u in rounds]
    return {
        "devices": devices,
        "compile_s": compile_s,
        "update_s": float(np.median(per_update)),
        "updates_per_s": float(np.median([u / t for t, _, u in rounds])),
        "env_steps_per_s": float(np.median([s / t for t, s, _ in rounds])),
    }


def main(argv: list[str] | None = None) -> dict:
    args = cli(ScalingArgs, argv, prog="python -m benchmarks.bench_scaling")
    try:
        spec = lookup(args.agent, args.preset)
        args = dataclasses.replace(args, agent=spec.name)
        spec.make_config(
            args.preset, num_envs=args.num_envs, batch_size=args.batch_size, microbatch_traces=0
        )
        if max(args.devices) > jax.device_count():
            raise ValueError(
                f"--devices {max(args.devices)} is more than the {jax.device_count()} "
                f"{jax.devices()[0].platform} devices visible"
            )
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    print(
        f"jax {jax.__version__}: {jax.device_count()} {jax.devices()[0].platform} devices, "
        f"{args.agent} on {args.env}, global batch {args.batch_size} traces, "
        f"{args.num_envs} envs"
    )
    try:
        rows = [measure(args, n) for n in args.devices]
    except ValueError as err:  # the env id, or the config against the env
        raise SystemExit(f"error: {err}") from None
    base = rows[0]["update_s"]
    print(f"\n{'devices':>7} {'updates/s':>10} {'env steps/s':>12} {'time/update vs 1':>17}")
    for r in rows:
        r["overhead"] = r["update_s"] / base
        print(
            f"{r['devices']:>7} {r['updates_per_s']:>10.1f} {r['env_steps_per_s']:>12.1f} "
            f"{r['overhead']:>17.2f}"
        )
    out = {"agent": args.agent, "env": args.env, "rows": rows}
    save_results(args.json_out, out)
    return out


if __name__ == "__main__":
    main()
