"""K learner updates as one scanned program against K dispatched programs, for any agent that
sets `updates_per_program = K > 1` (`ReplayParts.per_program`: SAC, TD3).

`python -m benchmarks.bench_update_scan [--agent sac] [--env Pendulum-v1] [--preset P]`
fills the replay with a few iterations, then times, in alternating rounds, K calls of the
single-update program and one call of the scanned program from the same state (each blocked
until ready), and reports updates/s of both and their ratio (median over rounds).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

import jax
import numpy as np

from agents.core.config import check
from engine.args import check_env, cli, lookup
from engine.common import make_agent


@dataclass(frozen=True)
class Args:
    """Time K updates scanned in one program against K single-update dispatches."""

    agent: str = "sac"
    """Agent (its config must make updates_per_program > 1)."""
    env: str = "Pendulum-v1"
    """Environment id."""
    preset: str | None = None
    """Preset (default: the agent's default preset)."""
    rounds: int = 5
    """Alternating timing rounds (median reported)."""
    fill: int = 4
    """Iterations of acting (and learning) before timing."""
    seed: int = 0
    """Random seed."""

    def __post_init__(self):
        check(self.rounds >= 1, "rounds", self.rounds, ">= 1")
        check(self.fill >= 2, "fill", self.fill, ">= 2")
        check_env(self.env)


def main(argv: list[str] | None = None) -> dict:
    args = cli(Args, argv)
    spec = lookup(args.agent, args.preset)
    agent = make_agent(spec.name, args.env, preset=args.preset, seed=args.seed, start_train_at=0)
    config = agent.config
    k = agent.updates_per_program
    if k <= 1:
        raise SystemExit(f"error: {args.agent} runs one update per program with this config")
    state = agent.init(jax.random.PRNGKey(args.seed))
    for it in range(args.fill):  # the host-driven path: its programs compile here
        state, _ = agent.train_iteration(state, it, it * agent.steps_per_iteration)
    learner, replay = state.learner, state.replay
    programs = agent.programs  # the host-driven path's (train_iteration ran them)
    singles_program, scanned_program = programs["replay_update"], programs["replay_updates"]

    def singles(learner, replay):
        for _ in range(k):
            learner, replay, m = singles_program(learner, replay)
        return learner, replay, m

    def scanned(learner, replay):
        return scanned_program(learner, replay)

    times = {"single": [], "scanned": []}
    for _ in range(args.rounds):
        for name, fn in (("single", singles), ("scanned", scanned)):
            t0 = time.perf_counter()
            learner, replay, m = fn(learner, replay)
            jax.block_until_ready((learner, replay, m))
            times[name].append(time.perf_counter() - t0)
    single, scan = np.asarray(times["single"]), np.asarray(times["scanned"])
    result = {
        "agent": args.agent,
        "env": args.env,
        "updates_per_program": k,
        "config": dataclasses.asdict(config),
        "single_updates_per_s": float(np.median(k / single)),
        "scanned_updates_per_s": float(np.median(k / scan)),
        "speedup": float(np.median(single / scan)),
    }
    print(
        f"{args.agent} on {args.env}: {k} updates per program: dispatched one by one "
        f"{result['single_updates_per_s']:.0f} updates/s, scanned "
        f"{result['scanned_updates_per_s']:.0f} updates/s ({result['speedup']:.2f}x)"
    )
    print(json.dumps({k_: v for k_, v in result.items() if k_ != "config"}))
    return result


if __name__ == "__main__":
    main()
