"""Training throughput on the JAX-native envs (gymnax): `python -m benchmarks.bench_gymnax`.

Each case is a whole `experiments.train` process with the settings of the single-file
programs that jit a whole training run over gymnax (PureJaxRL's design; issue 27 quotes
their speed on these 2 cores): PPO with 4 envs × 128 steps, 4 epochs × 4 minibatches, an MLP
64-64 tanh on flattened observations; DQN with 10 envs, batch 128, an update every 10 env
steps, an MLP. Env steps per second are measured from the run's metrics.csv (one row per host
sync) over the window from `--time-from` × total steps to the end, past compilation and
learning start. Cases run in turn, `--rounds` times, alternating their order; the median of
the rounds is printed beside the figure issue 27 quotes for the single-file program. The
`*-cnn` cases are ACER's and the Reactor's default presets on MinAtar through the MinAtar
CNN, beside the steps/s the committed MinAtar suite measured for the same presets on the
`minatar` package's host-stepped envs (docs/results/suites/README.md: ACER about 3,258,
the Reactor about 330; issue 27 asks for 10x). The `*-x8` cases are a case as one program of
8 seeds (`--num-seeds 8`, the same steps per member), timed in aggregate env steps/s and
divided by the single run's median from the same rounds (which they add to the cases).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

import tyro

from engine.common import cold_process_env, save_results, timed_train_process

PPO = "--agent ppo --num-envs 4 --trace-len 128 --epochs 4 --num-minibatches 4 --hidden 64 64"
DQN = (
    "--agent dqn --num-envs 10 --trace-len 1 --batch-size 128 --replay-ratio 12.8 --n-step 1"
    " --buffer-size 10000 --start-train-at 1000 --hidden 64 64"
)
# The single-file DQN's work (benchmarks.fused_dqn_peer; issue 66's settings): plain DQN, an MLP
# 120-84, a target copy every 5,000 env steps (500 updates), ε 1 -> 0.05 over half the run.
DQN_PEER = (
    "--agent dqn --num-envs 10 --trace-len 1 --batch-size 128 --replay-ratio 12.8 --n-step 1"
    " --buffer-size 10000 --start-train-at 1000 --hidden 120 84 --no-double --no-dueling"
    " --lr 2.5e-4 --target-update-period 500 --eps-end 0.05 --eps-decay-steps 100000"
)
# name -> (flags, total env steps, the reference env steps/s: the single-file program's that
# issue 27 quotes, or for the *-cnn cases the MinAtar suite's)
CASES = {
    "ppo-cartpole": (f"{PPO} --env gymnax/CartPole-v1", 500_000, 150_000),
    "ppo-breakout": (f"{PPO} --env gymnax/Breakout-MinAtar --flatten-obs", 500_000, 48_000),
    "dqn-cartpole": (f"{DQN} --env gymnax/CartPole-v1", 200_000, 43_000),
    "dqn-breakout": (f"{DQN} --env gymnax/Breakout-MinAtar --flatten-obs", 200_000, 19_000),
    "dqn-breakout-peer": (
        f"{DQN_PEER} --env gymnax/Breakout-MinAtar --flatten-obs", 200_000, 19_000),
    "acer-breakout-cnn": ("--agent acer --env gymnax/Breakout-MinAtar", 200_000, 3_258),
    "reactor-breakout-cnn": ("--agent reactor --env gymnax/Breakout-MinAtar", 50_000, 330),
    "reactor-lockstep-breakout-cnn": (
        "--agent reactor --no-decoupled --env gymnax/Breakout-MinAtar", 50_000, 330),
    # the MinAtar paper's DQN (its CNN, batch 32, one update per env step; learns from 5k)
    "dqn-minatar": ("--agent dqn --preset dqn-minatar --env gymnax/Breakout-MinAtar", 30_000, 490),
}  # fmt: skip
# Populations: case -> (its single-run case, P). The single run's flags with --num-seeds P and
# its steps per member; reported as aggregate env steps/s over the single run's median measured
# in the same rounds (issue 27 asks for >= 5 with P = 8 on MinAtar, PPO and DQN).
POPULATIONS = {
    "ppo-breakout-x8": ("ppo-breakout", 8),
    "dqn-breakout-x8": ("dqn-breakout", 8),
    "dqn-minatar-x5": ("dqn-minatar", 5),  # issue 27: >= 2,500 aggregate env steps/s
}
CASES.update(
    {
        name: (f"{CASES[single][0]} --num-seeds {size}", CASES[single][1], None)
        for name, (single, size) in POPULATIONS.items()
    }
)
DEFAULT_CASES = ["ppo-cartpole", "ppo-breakout", "dqn-cartpole", "dqn-breakout"]
# case -> (the single-file program run beside it: same work, one jit; its gymnax id)
PEERS = {
    "ppo-cartpole": ("benchmarks.fused_ppo_peer", "CartPole-v1"),
    "ppo-breakout": ("benchmarks.fused_ppo_peer", "Breakout-MinAtar"),
    "dqn-breakout-peer": ("benchmarks.fused_dqn_peer", "Breakout-MinAtar"),
}


@dataclass
class Args:
    """Throughput of our agents on gymnax envs (module docstring)."""

    cases: list[str] = field(default_factory=lambda: list(DEFAULT_CASES))
    """Which cases to run (names of CASES; the *-cnn, dqn-minatar and *-x8 / *-x5 ones only
    when named)."""
    rounds: int = 3
    """Rounds (each runs every case once)."""
    time_from: float = 0.2
    """The timed window starts at this fraction of the total steps."""
    scale: float = 1.0
    """Multiply every case's total steps (smaller for a quick check)."""
    peers: bool = True
    """Run the single-file program beside each case that has one (benchmarks.fused_ppo_peer
    beside the PPO cases, benchmarks.fused_dqn_peer beside dqn-breakout-peer), in the same
    rounds, and give the ratio to its measured median."""
    out: str | None = None
    """Write results.json here."""


def run_peer(name: str, args: Args) -> dict:
    """The case's single-file program on its env and steps, in a process of its own
    (compiled afresh); its env steps/s exclude compilation, as the case's window does."""
    import json
    import subprocess
    import sys

    module, env = PEERS[name]
    total = max(2_000, int(CASES[name][1] * args.scale))
    cmd = [sys.executable, "-m", module, "--env", env, "--total-steps", str(total)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=cold_process_env())
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_case(name: str, args: Args) -> dict:
    flags, total, _ = CASES[name]
    total = max(1, int(total * args.scale))
    argv = [*flags.split(), "--total-steps", str(total), "--eval-episodes", "0", "--no-progress"]
    return timed_train_process(argv, int(args.time_from * total))


def main(args: Args) -> dict:
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        raise SystemExit(f"--cases: unknown {', '.join(unknown)} (known: {', '.join(CASES)})")
    singles = [POPULATIONS[n][0] for n in args.cases if n in POPULATIONS]
    cases = [*dict.fromkeys([*args.cases, *singles])]  # a population's single run too
    results: dict[str, list[dict]] = {name: [] for name in cases}
    peers: dict[str, list[dict]] = {}
    for r in range(args.rounds):
        order = cases if r % 2 == 0 else list(reversed(cases))
        for name in order:
            pair = [("ours", run_case)]
            if args.peers and name in PEERS:  # alternated: the peer first on odd rounds
                pair = [*pair, ("peer", run_peer)] if r % 2 == 0 else [("peer", run_peer), *pair]
            for who, run in pair:
                got = run(name, args)
                (results[name] if who == "ours" else peers.setdefault(name, [])).append(got)
                print(f"round {r} {name} ({who}): {got['sps']:,.0f} env steps/s", flush=True)
    summary = {}
    for name, rounds in results.items():
        med = statistics.median(g["sps"] for g in rounds)
        if name in POPULATIONS:
            single, size = POPULATIONS[name]
            one = statistics.median(g["sps"] for g in results[single])
            summary[name] = {"median_sps": med, "members": size, "single_median_sps": one,
                             "ratio_to_single": med / one, "rounds": rounds}  # fmt: skip
            print(f"{name}: median {med:,.0f} aggregate env steps/s; one run ({single}) "
                  f"{one:,.0f}; ratio {med / one:.2f}")  # fmt: skip
            continue
        quoted = CASES[name][2]
        summary[name] = {"median_sps": med, "quoted_single_file_sps": quoted,
                         "ratio": med / quoted, "rounds": rounds}  # fmt: skip
        what = "single-file program (quoted)"
        if name.endswith("-cnn"):
            what = "before, on the minatar package"
        elif name == "dqn-minatar":
            what = "DQN before, on the minatar package (the suite's settings)"
        line = f"{name}: median {med:,.0f} env steps/s; {what} {quoted:,}; ratio {med / quoted:.2f}"
        if name in peers:
            peer = statistics.median(g["sps"] for g in peers[name])
            summary[name].update(peer_median_sps=peer, peer_ratio=med / peer,
                                 peer_rounds=peers[name])  # fmt: skip
            line += f"; single-file program measured here {peer:,.0f}, ratio {med / peer:.2f}"
        print(line)
    result = {"args": vars(args), "cases": {k: CASES[k][0] for k in cases}, **summary}
    if args.out:
        save_results(str(Path(args.out) / "results.json"), result)
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
