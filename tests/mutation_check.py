"""Does the fast tier catch deliberate one-line bugs? `python tests/mutation_check.py`

Each mutation below replaces one line of the library with a plausible bug (a flag read into the
wrong field, a resume that re-initialises the learner, a sharded gradient that skips `pmean`,
a wrong sign in the n-step target, ...). For each, the script copies the working tree's
tracked files into a temporary folder, applies the one edit there (the working tree is never
touched), and runs the fast-tier tests of the mechanism (`-m "not slow"`, the README's test
command restricted to the named files): the mutation is *killed* when at least one of them
fails. Every test selected is part of the fast tier, so a killed mutation fails the fast tier.

A mutation whose original line is no longer in its file is reported as stale (the script
exits 1), so the table cannot silently drift from the code. The output committed in
docs/results/mutation-check/ is this script's, with the commit it ran on.

Usage: python tests/mutation_check.py [--only NAME ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str  # the bug, in words
    path: str  # file, relative to the repository
    old: str  # the exact line (stripped of indentation) it replaces; must occur once
    new: str  # its replacement (indentation kept)
    tests: tuple[str, ...]  # fast-tier test files (or node ids) that must catch it
    occurrences: int = 1  # how often `old` occurs in the file; the first is replaced


MUTATIONS = [
    Mutation(
        "sweep-lr-wrong-field",
        "--sweep-lr's values are read into another field (discount) instead of lr",
        "engine/args.py",
        'specs["lr"] = run.sweep_lr',
        'specs["discount"] = run.sweep_lr',
        ("tests/experiments/test_cli_validation.py", "tests/agents/test_population.py"),
    ),
    Mutation(
        "resume-reinitialises-learner",
        "a resumed run keeps its freshly initialised learner instead of the checkpoint's",
        "engine/common.py",
        'return _with_episode_fields(restored["learner"], learner), meta, step',
        "return learner, meta, step",
        ("tests/experiments/test_every_agent_end_to_end.py",),
    ),
    Mutation(
        "sharded-gradient-skips-pmean",
        "data-parallel gradients are not averaged over the devices",
        "agents/core/learning.py",
        "grads = jax.lax.pmean(grads, axis_name)",
        "grads = grads",
        ("tests/agents/test_parallel.py",),
        occurrences=2,  # gradient_step's (the replay learners'), then grads_and_aux's
    ),
    Mutation(
        "n-step-reward-sign",
        "the n-step return subtracts the rewards",
        "agents/losses/returns.py",
        "g = g + take * disc * r_pad[k : k + T]",
        "g = g - take * disc * r_pad[k : k + T]",
        ("tests/losses/test_returns.py",),
    ),
    Mutation(
        "retrace-truncation-max",
        "Retrace's trace coefficient takes max(c, ρ) instead of min(c, ρ)",
        "agents/losses/retrace.py",
        "return lambda_ * jnp.minimum(c_max, _importance_ratio(pi_a_t, mu_a_t)) * mask_t",
        "return lambda_ * jnp.maximum(c_max, _importance_ratio(pi_a_t, mu_a_t)) * mask_t",
        ("tests/losses/test_retrace.py",),
    ),
    Mutation(
        "retrace-crosses-episode-end",
        "Retrace's target ignores the mask at the fake auto-reset step",
        "agents/losses/retrace.py",
        "q_ret = jnp.where(m_t > 0, q_ret, q_a_t)",
        "q_ret = q_ret",
        ("tests/losses/test_retrace.py",),
    ),
    Mutation(
        "vtrace-rho-unclipped",
        "V-trace's δ uses the raw ratio ρ instead of min(ρ̄, ρ)",
        "agents/losses/returns.py",
        "rho_bar = jnp.minimum(clip_rho, rho_t)",
        "rho_bar = rho_t",
        ("tests/losses/test_returns.py",),
    ),
    Mutation(
        "gae-without-lambda",
        "GAE's recursion drops λ",
        "agents/losses/returns.py",
        "a = m * (dl + d * lambda_ * a_next)",
        "a = m * (dl + d * a_next)",
        ("tests/losses/test_returns.py",),
    ),
    Mutation(
        "truncation-as-termination",
        "a time-limit truncation is reported as a termination (no bootstrap)",
        "envs/core.py",
        "truncated = truncated & ~terminated",
        "terminated = terminated | truncated",
        ("tests/envs/test_envs.py",),
    ),
    Mutation(
        "member-hparams-ignored",
        "a population member's own hyper-parameters are ignored (the config's are used)",
        "agents/core/learning.py",
        "return values[name] if name in values else getattr(self.config, name)",
        "return getattr(self.config, name)",
        ("tests/agents/test_hparams.py",),
    ),
    Mutation(
        "dqn-target-never-copied",
        "DQN's target network is never updated",
        "agents/dqn/learner.py",
        "step.params, state.target_params, count, self.config.target_update_period",
        "state.target_params, state.target_params, count, self.config.target_update_period",
        ("tests/agents/test_dqn.py",),
    ),
    Mutation(
        "pqn-reward-scale-dropped",
        "PQN's targets ignore --reward-scale",
        "agents/pqn/agent.py",
        'r, boot = steps["reward"] * hyper.reward_scale, q_values(learner.params, traj.last_obs)',
        'r, boot = steps["reward"], q_values(learner.params, traj.last_obs)',
        ("tests/agents/test_pqn.py",),
    ),
    Mutation(
        "cem-std-max-unchecked",
        "--cem-std-max accepts any positive value, infinity included",
        "engine/args.py",
        'need(0 < self.cem_std_max < math.inf, "cem_std_max", "> 0 and finite")',
        'need(0 < self.cem_std_max, "cem_std_max", "> 0 and finite")',
        ("tests/experiments/test_cli_validation.py",),
    ),
]


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return [p for p in out.split("\0") if p]


def apply(tree: Path, m: Mutation) -> str | None:
    """Apply `m` in `tree`; None, or why it cannot be (stale)."""
    path = tree / m.path
    lines = path.read_text().splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip() == m.old]
    if len(hits) != m.occurrences:
        return f"{m.path}: the line occurs {len(hits)} times (want {m.occurrences}): {m.old!r}"
    i = hits[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + m.new + "\n"
    path.write_text("".join(lines))
    return None


def run_one(m: Mutation, files: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"mutation-{m.name}-") as tmp:
        tree = Path(tmp)
        for rel in files:
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, tree / rel)
        stale = apply(tree, m)
        if stale:
            return {"name": m.name, "status": "stale", "detail": stale, "seconds": 0.0}
        cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-m", "not slow", "-n", "2",
               "-p", "no:cacheprovider", *m.tests]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=dict(os.environ))
        seconds = time.perf_counter() - t0
        tail = [line for line in proc.stdout.splitlines() if line.strip()][-1:]
        failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED")]
        # with -x under xdist a failure stops the session: pytest exits 1 or 2 (interrupted)
        status = "killed" if failed else "SURVIVED" if proc.returncode == 0 else "error"
        if status == "error":
            status = f"error (pytest exit {proc.returncode})"
        return {
            "name": m.name,
            "status": status,
            "detail": (failed[0] if failed else (tail[0] if tail else proc.stderr[-300:])),
            "seconds": seconds,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="run only these mutations (by name)")
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip
    files = tracked_files()
    lines = [f"mutation check at {commit}{' (with uncommitted changes)' if dirty else ''}", ""]
    lines += ["| mutation | the bug | tests | result | s |", "|---|---|---|---|---|"]
    results = []
    for m in chosen:
        r = run_one(m, files)
        results.append(r)
        tests = ", ".join(t.removeprefix("tests/") for t in m.tests)
        result = f"{r['status']}: {r['detail']}"
        row = f"| {m.name} | {m.what} | {tests} | {result} | {r['seconds']:.0f} |"
        lines.append(row)
        print(row, flush=True)
    killed = sum(r["status"] == "killed" for r in results)
    lines += ["", f"{killed} of {len(results)} mutations killed by the fast tier."]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(report)
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
