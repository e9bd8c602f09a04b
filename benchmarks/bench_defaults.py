"""Does every agent's default command learn on every seed? `python -m benchmarks.bench_defaults`

For each registered agent, its default command (`experiments.train --agent NAME`, nothing
else) over `--num-seeds` seeds: by default as one population process (`--num-seeds N`: member
i is the single run with seed i up to float32 rounding, which can grow into different runs
over a long training), or with `--processes` as N single-seed processes (exactly what a user
runs; also used for a default that cannot be a population). A seed succeeds when its
end-of-training evaluation reaches the task's threshold (`SOLVED`: CartPole-v1 475,
Pendulum-v1 −200). Prints and writes per agent the success count, the IQM of the evaluation
returns with a 95% stratified bootstrap CI (rliable), and the wall time per run.

A default that runs as N processes can take hours (the Reactor's 30: about 3.3 h), more than a
session: with `--keep DIR` each finished seed's record (its evaluation, wall time and the
default's fingerprint) is kept in `DIR/AGENT/seed-K.json`, and a later call with the same
`--keep` skips the seeds kept there; `--max-minutes M` starts no new seed after M minutes.
An agent's result is written only once all its seeds are in; a record trained by another
default (another fingerprint) is refused with one line, never mixed in.

Each agent's result also records what its default command trained (`default_command`: the
run options and the config that `--agent NAME` resolves to) and its fingerprint
(`default_hash`). tests/benchmarks/test_defaults_benchmark.py compares the fingerprints of
today's defaults with the committed results (docs/results/defaults-10-seeds/results.json),
so a changed default fails the tests until this benchmark is run again and committed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tyro

from agents.core.registry import agent_names
from engine.args import parse_train_args
from engine.common import cold_process_env, save_results
from experiments.report import aggregates

SOLVED = {
    "CartPole-v1": 475.0,
    "gymnax/CartPole-v1": 475.0,
    "Pendulum-v1": -200.0,
    "CartPole-P-v1": 475.0,
}
# Run options that do not change what a run learns: where it writes, how it shows progress,
# what its checkpoints hold.
NOT_LEARNING = (
    "seed", "run_dir", "exp_name", "resume", "progress", "exact_resume", "log_every",
)  # fmt: skip


# Options added after a benchmark was committed, at the value that trains exactly as before
# they existed: left out of `default_command` at that value, so that adding one does not
# invalidate the fingerprints (a default that sets another value changes them).
# DQN's torso options, then issue 63's (ICM off, ...), at the values of the defaults before
# them
ADDED_NEUTRAL = {
    "run": {"protocol": "none", "privileged_obs": None},
    "config": {
        **{"cnn": "nature", "head_hidden": 0, "noisy_std": 0.5},
        **{"icm_coef": 0.0, "icm_beta": 0.2, "icm_lr": 1e-3, "icm_features": 64},
        # then SAC's V-trace knobs, the priority bounds and the off-policy hard target copy
        **{"vtrace_lambda": 1.0, "vtrace_rho": 1.0, "vtrace_c": 1.0},
        **{"td_error_min": 0.0, "td_error_max": None},
        "target_update_period": 0,  # SAC's and TD3's off (DQN's and R2D1's are >= 1)
        "network": None,  # SAC's and TD3's --network plug-in, none
        # SAC's prediction model and NoisyNet, off (noisy_std is DQN's above)
        **{"prediction": False, "transition_kl": 0.8, "noisy": False},
        **{"q_only": False, "q_only_epsilon": 0.05},  # SAC's Q-only discrete mode, off
    },
}


def default_command(agent: str) -> dict:
    """What `experiments.train --agent AGENT` trains: its run options (less `NOT_LEARNING`)
    and its agent config, as JSON values (less `ADDED_NEUTRAL`'s fields at their values)."""
    args = parse_train_args(["--agent", agent])
    parts = {"run": dataclasses.asdict(args.run), "config": dataclasses.asdict(args.config)}
    for part, values in parts.items():
        neutral = ADDED_NEUTRAL[part]
        parts[part] = {
            k: v
            for k, v in values.items()
            if k not in NOT_LEARNING and not (k in neutral and v == neutral[k])
        }
    return json.loads(json.dumps(parts, default=repr))


def default_hash(agent: str) -> str:
    """A fingerprint of `default_command(agent)`."""
    text = json.dumps(default_command(agent), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Args:
    """Every agent's default over many seeds (module docstring)."""

    agents: list[str] = field(default_factory=lambda: sorted(agent_names()))
    """Agents to run (default: every registered one)."""
    num_seeds: int = 30
    """Seeds 0 .. N-1 (30: a default that fails one seed in ten passes a 10-seed check about
    a third of the time; issue 65)."""
    processes: bool = False
    """One train process per seed instead of one population process (also where an agent's
    default cannot be a population member, e.g. the Reactor's decoupled actor)."""
    out: str | None = None
    """Write results.json here."""
    keep: str | None = None
    """Keep each finished seed of a per-process run in `KEEP/AGENT/seed-K.json` and skip
    the seeds already kept there (a run spread over sessions; module docstring). A
    population run is one process: nothing of it is kept."""
    max_minutes: float | None = None
    """Start no new per-process seed after this many minutes (with `--keep`: run again to
    go on)."""

    def __post_init__(self):
        if self.num_seeds < 1:
            raise SystemExit(f"error: --num-seeds must be >= 1, got {self.num_seeds}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise SystemExit(f"error: --max-minutes must be > 0, got {self.max_minutes}")
        if self.max_minutes is not None and self.keep is None:
            raise SystemExit("error: --max-minutes needs --keep (where finished seeds are kept)")
        unknown = sorted(set(self.agents) - set(agent_names()))
        if unknown:
            raise SystemExit(f"error: --agents: unknown {', '.join(unknown)} (known: "
                             f"{', '.join(sorted(agent_names()))})")  # fmt: skip


def _train(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.train", *argv, "--no-progress"],
        capture_output=True, text=True, check=False, env=cold_process_env(),
    )  # fmt: skip
    if proc.returncode:
        raise RuntimeError(f"train {' '.join(argv)} failed: {proc.stderr[-1500:]}")


def run_agent(agent: str, args: Args) -> dict:
    # What the default is, read before the runs: a run takes up to hours, and the record must
    # describe the code that trained (nor may a change to the files meanwhile break it).
    command, fingerprint = default_command(agent), default_hash(agent)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        mode = "processes" if args.processes else "population"
        if not args.processes:
            run = Path(tmp) / "pop"
            try:
                _train(["--agent", agent, "--num-seeds", str(args.num_seeds), "--run-dir",
                        str(run)])  # fmt: skip
            except RuntimeError as err:  # a default that cannot be a population member
                if "--num-seeds > 1" not in str(err):
                    raise
                mode = "processes"
        if mode == "processes":
            records = per_process(agent, args, fingerprint, Path(tmp), t0)
            if records is None:
                return None
            returns = [r["eval_return_mean"] for r in records]
            env, wall = records[0]["env"], sum(r["wall_s"] for r in records)
        else:
            summary = json.loads((run / "summary.json").read_text())
            returns, env = summary["eval_return_mean"], summary["env"]
            wall = time.perf_counter() - t0
    returns = np.asarray(returns, np.float64)
    threshold = SOLVED.get(env)
    solved = int((returns >= threshold).sum()) if threshold is not None else None
    return {
        "solved_rate_ci": None if solved is None else success_interval(solved, len(returns)),
        "default_hash": fingerprint,
        "default_command": command,
        "mode": mode,
        "num_seeds": args.num_seeds,
        "env": env,
        "eval_returns": returns.tolist(),
        "solved": solved,
        "threshold": threshold,
        "iqm": iqm_ci(returns),
        "wall_s": wall,
        "wall_s_per_run": wall / args.num_seeds,
    }


def per_process(agent: str, args: Args, fingerprint: str, tmp: Path, t0: float):
    """The seeds' records `{seed, env, eval_return_mean, wall_s, default_hash}`, one train
    process each, those kept under `--keep` read back; None when `--max-minutes` ran out
    before every seed was in."""
    kept_dir = None if args.keep is None else Path(args.keep) / agent
    records = []
    for seed in range(args.num_seeds):
        path = None if kept_dir is None else kept_dir / f"seed-{seed}.json"
        if path is not None and path.is_file():
            try:
                record = json.loads(path.read_text())
                kept_hash = record.get("default_hash")
                float(record["eval_return_mean"]), float(record["wall_s"]), str(record["env"])
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise SystemExit(f"error: {path}: not a kept seed's record ({err!r})") from None
            if kept_hash != fingerprint:
                raise SystemExit(
                    f"error: {path}: trained by another {agent} default (fingerprint "
                    f"{kept_hash}, today {fingerprint}); move it away"
                )
            records.append(record)
            continue
        if args.max_minutes is not None and time.perf_counter() - t0 > 60 * args.max_minutes:
            print(
                f"{agent}: {len(records)} of {args.num_seeds} seeds kept in {kept_dir} "
                f"(--max-minutes {args.max_minutes}); run again to go on",
                flush=True,
            )
            return None
        run, start = tmp / f"s{seed}", time.perf_counter()
        _train(["--agent", agent, "--seed", str(seed), "--run-dir", str(run)])
        summary = json.loads((run / "summary.json").read_text())
        record = {
            "seed": seed, "env": summary["env"], "eval_return_mean": summary["eval_return_mean"],
            "wall_s": time.perf_counter() - start, "default_hash": fingerprint,
        }  # fmt: skip
        if path is not None:
            save_results(str(path), record)
        records.append(record)
    return records


def success_interval(solved: int, n: int) -> list[float]:
    """The 95% Clopper-Pearson (exact binomial) interval of the success rate `solved / n`."""
    from scipy.stats import binomtest

    ci = binomtest(solved, n).proportion_ci(confidence_level=0.95, method="exact")
    return [float(ci.low), float(ci.high)]


def iqm_ci(returns: np.ndarray) -> dict:
    """IQM and its 95% stratified bootstrap CI over seeds (rliable, through the report's
    reproducible `aggregates`)."""
    point, ci = aggregates({"x": returns.reshape(-1, 1)})
    return {"iqm": float(point["x"][0]), "ci": [float(ci["x"][0][0]), float(ci["x"][1][0])]}


def main(args: Args) -> dict:
    results = {}
    for agent in args.agents:
        r = run_agent(agent, args)
        if r is None:  # --max-minutes: not all its seeds yet
            continue
        results[agent] = r
        solved = "n/a" if r["solved"] is None else f"{r['solved']}/{args.num_seeds}"
        if r["solved_rate_ci"] is not None:
            solved += " (success rate 95% CI [{:.2f}, {:.2f}])".format(*r["solved_rate_ci"])
        lo, hi = r["iqm"]["ci"]
        print(
            f"{agent} on {r['env']}: solved {solved}; IQM {r['iqm']['iqm']:.1f} "
            f"[{lo:.1f}, {hi:.1f}]; {r['wall_s_per_run']:.1f} s per run; returns "
            f"{', '.join(f'{x:.1f}' for x in r['eval_returns'])}",
            flush=True,
        )
    out = {"args": vars(args), "results": results}
    if args.out and results:  # merged into those there: agents can be run one at a time
        path = Path(args.out) / "results.json"
        if path.is_file():
            kept = json.loads(path.read_text())["results"]
            out["results"] = {**{k: v for k, v in kept.items() if k not in results}, **results}
        out["results"] = dict(sorted(out["results"].items()))
        save_results(str(path), out)
    return out


if __name__ == "__main__":
    main(tyro.cli(Args))
