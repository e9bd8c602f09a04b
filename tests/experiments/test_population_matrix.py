"""Every registered agent × {`--num-seeds 3`, `--vary` on a field it varies, `--evolve pbt`,
`--evolve cem`}, through the command line's own entry points at tiny sizes: train over two
generations (with a checkpoint), resume to a larger budget, evaluate a member. Every cell
either runs or is refused up front with one line that says why (`REFUSED`; none is today).
The single run of each agent is tests/experiments/test_every_agent_end_to_end.py, whose cases
(one tiny command per agent) this matrix reuses: registering an agent without a case fails
there, so no agent escapes the matrix. Slow tier (about 40 train + resume + evaluate chains).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.core.registry import get_agent
from engine.args import parse_train_args
from engine.driver import agent_class
from experiments import evaluate, train
from tests.experiments.test_every_agent_end_to_end import CASES, _agent, _env_steps

ROOT = Path(__file__).resolve().parents[2]

MODES = ("seeds", "vary", "pbt", "cem")
EXTRA = {
    # A population acts in lock-step: the decoupled actor is refused in one line
    # (tests/agents/test_population.py), so the cells run the lock-step Reactor.
    "reactor": {"--no-decoupled": None},
}
# SAC's populations computed NaN under the tests' XLA:CPU flags (tests/conftest.py: LLVM -O0)
# and only there; docs/results/sac-o0-nan/ records it (issue 67). It needs the population's
# *masked* replay updates (members owing different counts): a `jnp.where(on, new, old)` over
# the critic ensemble's output bias carried across several updates in one program, with 3
# members at --hidden 8, gives NaN at -O0 though it selects `new` everywhere (bit-identical
# at XLA's default level): an XLA:CPU -O0 code-generation fault, not SAC's arithmetic. SAC
# stopped taking the masked path when members owing the same updates ran unmasked (4dda3d9,
# f4ea310), so the NaN no longer shows here; ACER's per-seed draws still take it. SAC's cells
# still run as processes with XLA's default optimisation, as a user runs them, in case a
# schedule sends them down the masked path again (`docs/results/sac-o0-nan/repro.py` forces
# it and shows the NaN at -O0 only).
AS_PROCESS = {"sac"}


def _main(module: str, argv: list[str], process: bool, out: Path) -> dict:
    """`python -m experiments.<module> argv` in this process, or as a process with XLA's
    default optimisation; returns its summary.json (train) or its --out result (evaluate)."""
    if not process:
        return {"train": train, "evaluate": evaluate}[module].main(argv)
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    proc = subprocess.run(
        [sys.executable, "-m", f"experiments.{module}", *argv],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )  # fmt: skip
    if proc.returncode:
        raise SystemExit(proc.stderr.strip().splitlines()[-1])
    return json.loads(out.read_text())


def _with(flags: list[str], extra: dict) -> list[str]:
    """`flags` with each of `extra`'s flags set (its value replaced, or the flag added)."""
    flags = list(flags)
    for flag, value in extra.items():
        if flag in flags:
            flags[flags.index(flag) + 1] = value
        else:
            flags += [flag] if value is None else [flag, value]
    return flags


REFUSED: dict[tuple[str, str], str] = {}  # (case, mode) -> the one-line refusal expected


def _vary(agent: str, flags: list[str]) -> list[str]:
    """`--vary FIELD=a,b` on the first field the agent varies: the configured value and 0.9
    of it (inside the field's range)."""
    spec = get_agent(agent)
    field, (low, high) = next(iter(agent_class(spec).tunable.items()))
    config = parse_train_args([*flags, "--no-progress"]).config
    value = float(getattr(config, field))
    other = value * 0.9 if low <= value * 0.9 <= high else (value + low) / 2
    return ["--vary", f"{field}={value!r},{other!r}"]


def _mode_flags(mode: str, agent: str, flags: list[str], first: int) -> list[str]:
    pop = ["--num-seeds", "3"]
    every = str(first // 4)  # generations are postponed until every member has a score
    return {
        "seeds": pop,
        "vary": [*pop, *_vary(agent, flags)],
        "pbt": [*pop, "--evolve", "pbt", "--evolve-every", every],
        "cem": [*pop, "--evolve", "cem", "--evolve-every", every, "--evolve-replace", "1"],
    }[mode]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_population_cell(tmp_path, case, mode):
    flags, first, total = CASES[case]
    flags = _with(flags.split(), EXTRA.get(_agent(case), {}))
    # Long enough for every member to finish episodes (its score) before the checkpoint,
    # and twice more (two generations): a Pendulum episode is 200 steps per env.
    first = 8 * first if "Pendulum-v1" not in flags else 1_000
    total = first + CASES[case][2]
    agent = _agent(case)
    run_dir = tmp_path / "run"
    common = f"--run-dir {run_dir} --no-progress --eval-episodes 0 --num-devices 1".split()
    steps = ["--total-steps", str(first), "--checkpoint-every", str(first)]
    argv = [*flags, *_mode_flags(mode, agent, flags, first), *common, *steps]
    process = agent in AS_PROCESS
    if (case, mode) in REFUSED:
        with pytest.raises(SystemExit, match=REFUSED[case, mode]) as err:
            _main("train", argv, process, run_dir / "summary.json")
        assert "\n" not in str(err.value) and not run_dir.exists()
        return
    summary = _main("train", argv, process, run_dir / "summary.json")
    assert summary["env_steps"] == 3 * first and summary["num_seeds"] == 3, summary
    members = [run_dir / f"member-{i}" for i in range(3)]
    for m in members:
        assert _env_steps(m)[-1] == first
    if mode in ("pbt", "cem"):
        with open(run_dir / "lineage.csv", newline="") as f:
            generations = {row["generation"] for row in csv.DictReader(f)}
        assert len(generations) >= 2, generations  # two generations

    argv = ["--resume", str(run_dir), "--total-steps", str(total), "--no-progress"]
    resumed = _main("train", argv, process, run_dir / "summary.json")
    assert resumed["env_steps"] == 3 * total
    for m in members:
        after = _env_steps(m)
        assert after[-1] == total and after == sorted(set(after))

    out = tmp_path / "eval.json"
    argv = [str(members[1]), "--episodes", "2", "--num-envs", "2", "--out", str(out)]
    result = _main("evaluate", argv, process, out)
    assert result["episodes"] == 2 and result["checkpoint_step"] == total
    if mode == "vary":
        saved = json.loads((members[1] / "config.json").read_text())
        assert saved["population"]["hparams"], saved["population"]


def test_the_matrix_covers_every_case_and_mode():
    """Every (case, mode) is a cell: refusals are listed, never skipped."""
    assert set(REFUSED) <= {(c, m) for c in CASES for m in MODES}
