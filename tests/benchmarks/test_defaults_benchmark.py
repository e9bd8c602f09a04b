"""The committed benchmark of every agent's default (issues 29 and 65) still describes today's
defaults: a change to a default (a config field, a preset value, a run option such as the
evaluation policy) fails here until `python -m benchmarks.bench_defaults` is run again and
its results.json committed. No learning run happens here: the benchmark's own records of what
each default trained are compared with what `--agent NAME` resolves to today."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.core.registry import agent_names
from benchmarks.bench_defaults import SOLVED, default_command, default_hash

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
# The 30-seed benchmark (issue 65) where an agent has it, else the earlier 10-seed one.
TEN = json.loads((RESULTS / "defaults-10-seeds" / "results.json").read_text())["results"]
THIRTY_FILE = RESULTS / "defaults-30-seeds" / "results.json"
THIRTY = json.loads(THIRTY_FILE.read_text())["results"] if THIRTY_FILE.is_file() else {}
COMMITTED = {**TEN, **THIRTY}
RERUN = (
    "re-run `python -m benchmarks.bench_defaults --agents {a} "
    "--out docs/results/defaults-30-seeds` and commit it"
)
# Agents whose defaults have not been run over 30 seeds yet, with why (issue 65 stays open):
# their 10-seed result is the one checked.
NOT_YET_30 = {
    "reactor": "30 processes (its decoupled actor rules out a population), about 3.3 h",
}


# Defaults the committed benchmark does not cover yet, with why (the issue stays open).
NOT_MEASURED: dict[str, str] = {}
# Defaults the committed benchmark shows below 10 of 10 (strict xfail: one that reaches it
# fails here until it is taken off this list).
BELOW_10_OF_10: dict[str, str] = {}


@pytest.mark.parametrize("agent", sorted(agent_names()))
def test_the_committed_benchmark_ran_todays_default(agent):
    if agent in NOT_MEASURED:
        assert agent not in COMMITTED, f"{agent} is measured now: take it off NOT_MEASURED"
        pytest.skip(NOT_MEASURED[agent])
    assert agent in COMMITTED, f"{agent} has no committed default benchmark: " + RERUN.format(
        a=agent
    )
    entry = COMMITTED[agent]
    committed = as_named_today(agent, entry["default_command"])
    today = default_command(agent)
    changed = sorted(
        f"{part}.{k}"
        for part in ("run", "config")
        for k in today[part].keys() | committed[part].keys()
        if today[part].get(k) != committed[part].get(k)
    )
    assert not changed, (
        f"{agent}'s default changed since its benchmark ({', '.join(changed)}): "
        + (RERUN.format(a=agent))
    )
    if committed == entry["default_command"]:  # nothing renamed: the recorded fingerprint holds
        assert entry["default_hash"] == default_hash(agent)


def as_named_today(agent: str, command: dict) -> dict:
    """A committed `default_command` with its config fields under today's names (the agent
    config's `RENAMED` table: a renamed field is the same field) and without the options
    added since at their neutral values (`benchmarks.bench_defaults.ADDED_NEUTRAL`)."""
    from agents.core.config import renamed_fields
    from agents.core.registry import get_agent
    from benchmarks.bench_defaults import ADDED_NEUTRAL

    config = renamed_fields(command["config"], get_agent(agent).config_cls)
    parts = {"run": command["run"], "config": config}
    return {
        part: {k: v for k, v in values.items() if ADDED_NEUTRAL[part].get(k, object()) != v}
        for part, values in parts.items()
    }


@pytest.mark.parametrize(
    "agent",
    [
        pytest.param(a, marks=pytest.mark.xfail(reason=BELOW_10_OF_10[a], strict=True))
        if a in BELOW_10_OF_10
        else a
        for a in sorted(set(agent_names()) - set(NOT_MEASURED))
    ],
)
def test_the_committed_default_solves_every_seed(agent):
    """10 of 10 seeds of a 10-seed benchmark; at least 29 of 30 of a 30-seed one (issue 65:
    a default that failed one seed in ten would pass a 10-seed check a third of the time)."""
    entry = COMMITTED[agent]
    n = entry["num_seeds"]
    assert n >= 10 and len(entry["eval_returns"]) == n
    threshold = SOLVED[entry["env"]]
    failed = [r for r in entry["eval_returns"] if r < threshold]
    assert entry["solved"] == n - len(failed), (agent, entry["solved"], failed)
    allowed = 1 if n >= 30 else 0
    assert len(failed) <= allowed, (agent, failed)


def test_every_agent_has_its_30_seed_benchmark_or_says_why_not():
    assert set(THIRTY) | set(NOT_YET_30) == set(agent_names())
    assert not set(THIRTY) & set(NOT_YET_30), "measured now: take it off NOT_YET_30"
    for agent, entry in THIRTY.items():
        assert entry["num_seeds"] == 30, agent


def test_the_fingerprint_follows_the_default(monkeypatch):
    """A default's fingerprint changes with any field of what it trains (not only the ones
    named here), and only with them."""
    before = default_hash("a2c")
    assert default_hash("a2c") == before
    from agents.a2c import config as a2c_config

    monkeypatch.setitem(a2c_config.PRESETS["a2c-classic"], "lr", 1.234e-3)
    assert default_command("a2c")["config"]["lr"] == 1.234e-3
    assert default_hash("a2c") != before
    monkeypatch.setitem(a2c_config.PRESETS["a2c-classic"], "lr", 7e-3)
    monkeypatch.setitem(a2c_config.PRESETS["a2c-classic"], "eval_episodes", 21)
    assert default_command("a2c")["run"]["eval_episodes"] == 21
    assert default_hash("a2c") != before
