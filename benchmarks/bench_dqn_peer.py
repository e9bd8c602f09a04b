"""DQN on CartPole-v1 in CleanRL's classic setting, ours beside CleanRL's `dqn_jax.py`.

    python -m benchmarks.bench_dqn_peer [--rounds 3] [--out docs/results/dqn-peer]

The setting (CleanRL's defaults, `../shared/peers/cleanrl/dqn_jax.py`): one env, replay of
10k transitions, learning from 10k steps, batch 128, an update every 10 env steps, a target
copy every 500 env steps, Adam 2.5e-4 on a 120-84 MLP, ε 1 → 0.05. Ours runs the same work
through `experiments.train` flags (`OURS` below: one-step targets, no double Q, no dueling
head, squared error, gradient clipping at 1e9, i.e. none). Both run as whole processes,
alternated (peer, ours, ours, peer, ...); each is timed over the same window of env steps,
from `--time-from` (past learning start and compiles) to `--steps`: the peer by its own
PEER_RESULT line, ours from the run's metrics.csv (rows at host syncs: env steps and wall
seconds). It prints every round and the median ratio ours / peer. Needs the peers folder
(`--peers`).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tyro

from engine.common import save_results, timed_train_process

OURS = (
    "--agent dqn --num-envs 1 --trace-len 1 --batch-size 128 "
    "--buffer-size 10000 --start-train-at 10000 --replay-ratio 12.8 --n-step 1 "
    "--no-double --no-dueling --huber-delta 0 --max-grad-norm 1e9 "
    "--target-update-period 50 --lr 2.5e-4 --adam-eps 1e-8 --eps-start 1 --eps-end 0.05 "
    "--eps-decay-steps 250000 --hidden 120 84 --eval-episodes 0 --no-progress"
).split()


@dataclass
class Args:
    """DQN classic: ours vs CleanRL's dqn_jax.py, alternated (module docstring)."""

    rounds: int = 3
    """Rounds; each runs the peer and ours once, in alternating order."""
    steps: int = 100_576
    """Env steps per run."""
    time_from: int = 10_560
    """Env step at which the timed window starts (past learning start and compiles)."""
    env: str = "CartPole-v1"
    """Ours: the env id (`gymnax/CartPole-v1`: the same dynamics stepped in JAX; envpool's
    XLA step costs about 50 µs per call with one env here, most of an env step's cost)."""
    iterations_per_sync: int = 0
    """Ours: --iterations-per-sync (0: automatic)."""
    peers: str = "../shared/peers/cleanrl"
    """The CleanRL ports' folder."""
    out: str | None = None
    """Write results.json and results.txt here."""


def run_peer(args: Args) -> dict:
    env = {**os.environ, "PEER_MAX_STEPS": str(args.steps), "PEER_TIME_FROM": str(args.time_from)}
    env["PYTHONPATH"] = os.pathsep.join([args.peers, env.get("PYTHONPATH", "")])
    script = str(Path(args.peers) / "dqn_jax.py")
    with tempfile.TemporaryDirectory() as tmp:  # its runs/ folder
        proc = subprocess.run(
            [sys.executable, str(Path(script).resolve()), "--env-id", "CartPole-v1"],
            cwd=tmp, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
    line = next((s for s in proc.stdout.splitlines() if s.startswith("PEER_RESULT")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"the peer failed ({proc.returncode}): {proc.stderr[-2000:]}")
    fields = dict(re.findall(r"(\w+)=(\S+)", line))
    return {"sps": float(fields["sps"]), "timed_steps": int(fields["timed_steps"])}


def run_ours(args: Args) -> dict:
    argv = [*OURS, "--env", args.env, "--total-steps", str(args.steps),
            "--iterations-per-sync", str(args.iterations_per_sync)]  # fmt: skip
    return timed_train_process(argv, args.time_from)


def main(args: Args) -> dict:
    rounds = []
    for r in range(args.rounds):
        order = ("peer", "ours") if r % 2 == 0 else ("ours", "peer")
        got = {name: (run_peer if name == "peer" else run_ours)(args) for name in order}
        got["ratio"] = got["ours"]["sps"] / got["peer"]["sps"]
        rounds.append(got)
        print(
            f"round {r}: peer {got['peer']['sps']:,.0f} env steps/s, ours "
            f"{got['ours']['sps']:,.0f} ({got['ours']['syncs']} syncs): ratio {got['ratio']:.2f}",
            flush=True,
        )
    med = {k: statistics.median(g[k]["sps"] for g in rounds) for k in ("peer", "ours")}
    ratio = statistics.median(g["ratio"] for g in rounds)
    print(
        f"median: peer {med['peer']:,.0f}, ours {med['ours']:,.0f} env steps/s; ratio {ratio:.2f}"
    )
    result = {"args": vars(args), "ours_flags": OURS, "rounds": rounds, "median": med,
              "median_ratio": ratio}  # fmt: skip
    if args.out:
        save_results(str(Path(args.out) / "results.json"), result)
    return result


if __name__ == "__main__":
    main(tyro.cli(Args))
