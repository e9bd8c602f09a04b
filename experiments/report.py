"""Aggregate report of many runs: `python -m experiments.report RUNS... --out DIR`.

RUNS are run folders, or folders holding run folders (a sweep's `runs/<sweep>/`). Writes
`DIR/report.md` (GitHub Markdown), its PNGs and `DIR/report.json`:

- per env: final return (the evaluation at the end, else the last training mean) and best
  training return (the best moving-window mean), mean ± 95% CI over seeds (Student t);
- normalised scores: Atari human-normalised, (score − random) / (human − random), and
  classic control against its solved threshold, from `experiments/references/`;
- rliable (Agarwal et al. 2021) aggregates over envs and seeds of the normalised final
  scores: IQM, median, mean and optimality gap with stratified bootstrap CIs, performance
  profiles, and IQM sample-efficiency curves against env steps and against wall-clock time;
- published scores (`references/published_scores.csv`) beside ours where the protocol
  matches, with the difference named where it does not;
- compute: measured throughput (summary.json) and what a paper-scale budget would cost.

Runs are grouped by configuration: every config.json field but those
`RUN_FIELDS_NOT_CONFIG`, `TOP_FIELDS_NOT_CONFIG` and `POPULATION_FIELDS_NOT_CONFIG` list (the
seed, the env, where the run lives and ran). The runs of one configuration are its seeds;
runs whose configurations differ are never pooled (two runs of one configuration, env and
seed count once). A configuration is named by its sweep label, or its agent, and where two
would share a name, by the fields they differ in (`ppo lr=0.001`): a `--vary` population's
members are named by their own values (their `hp_<field>` columns). `report.json`'s `configs`
holds each name's configuration.

A run with no complete metrics row or no finished episode yet is skipped with a note; any
other damaged field of a run's config.json, summary.json or metrics.csv is a one-line error
naming the file and the field.

Statistics are rliable's (`rliable.library`, `rliable.metrics`), not re-derived here.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.runfolder import (
    WriteError,
    atomic_file,
    atomic_path,
    check_run_dir_writable,
    read_json,
    strict_json_value,
    summary_env_steps,
)

REFERENCES = Path(__file__).parent / "references"
# Bootstrap resamples at most (rliable's default is 50,000): each holds a copy of the scores.
MAX_REPS = 1_000_000
# Paper-scale budgets `report` prices from measured throughput: name -> (env family, games,
# env steps per run). A budget is priced only from runs of its own family.
PAPER_BUDGETS = {
    "Atari-57, 200M frames (Reactor, Agent57 tables)": ("atari", 57, 50_000_000),
    "Atari 49 games, 40M frames (PPO paper Table 6)": ("atari", 49, 10_000_000),
    "Atari 7 games, 10M steps = 40M frames (OpenAI Baselines Atari10M)": ("atari", 7, 10_000_000),
    "MuJoCo, 1M steps per env (SAC/TD3 papers)": ("mujoco", 1, 1_000_000),
    "MinAtar, 5 games, 5M frames = 5M steps (Young & Tian 2019)": ("minatar", 5, 5_000_000),
}
# Per-env score ranges (env, low, high, source) that normalise returns as (s - low) / (high - low),
# and the name of that normalisation.
RANGE_FILES = (
    ("classic_control.csv", "solved-normalised"),
    ("minatar.csv", "random-to-reference-normalised"),
)
MUJOCO_ENVS = (
    "Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup", "InvertedDoublePendulum",
    "InvertedPendulum", "Pusher", "Reacher", "Swimmer", "Walker2d",
)  # fmt: skip


@dataclass
class RunResult:
    path: Path
    algo: str
    env: str
    seed: int
    final: float
    best: float
    env_steps: int
    wall_s: float  # training seconds over the whole run, every resumed stretch included
    sps: float  # env steps ÷ training seconds at metrics.csv's last row (a member's share)
    frames_per_step: int
    curve_steps: np.ndarray = field(repr=False)
    curve_wall: np.ndarray = field(repr=False)
    curve_return: np.ndarray = field(repr=False)
    final_is_eval: bool = False
    agent: str = ""
    # The name the run's configuration goes by before `label_configs`: its sweep label or
    # its agent.
    base: str = ""
    # Its configuration (`config_identity`: dotted config.json paths -> values) and that as
    # one canonical text: runs with equal keys are seeds of one configuration.
    config: dict = field(default_factory=dict, repr=False)
    key: str = ""
    # Runs its program trained side by side (`--num-seeds P`: P; 1 for a single run): its
    # steps/s is one member's share of the program's.
    members: int = 1
    # The final evaluation's seconds (summary.json's eval_s; NaN when unknown).
    eval_s: float = math.nan


# ----------------------------------------------------------------------------- references


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def atari_game(env_id: str) -> str | None:
    """'MontezumaRevenge-v5' -> 'montezuma_revenge' (None unless an Atari-57 game). Ids in
    another namespace than ALE/ are not Atari: 'MinAtar/Breakout-v1' is None."""
    if "/" in env_id and not env_id.startswith("ALE/"):
        return None
    base = re.sub(r"-v\d+$", "", env_id.split("/")[-1]).replace("NoFrameskip", "")
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()
    return snake if snake in load_atari_scores() else None


def load_atari_scores() -> dict[str, tuple[float, float]]:
    """game -> (random, human)."""
    rows = _read_csv(REFERENCES / "atari_human_random.csv")
    return {r["game"]: (float(r["random"]), float(r["human"])) for r in rows}


def human_normalized(game: str, score: float | np.ndarray):
    random, human = load_atari_scores()[game]
    return (np.asarray(score, float) - random) / (human - random)


def minatar_game(env_id: str) -> str | None:
    """The MinAtar game of an id of either port (`MinAtar/Breakout-v1`, the `minatar`
    package through gymnasium; `gymnax/Breakout-MinAtar`, gymnax's JAX port), else None."""
    m = re.fullmatch(r"MinAtar/(\w+)-v\d+|gymnax/(\w+)-MinAtar(?:-full)?", env_id)
    return None if m is None else m.group(1) or m.group(2)


def minatar_action_set(env_id: str) -> str | None:
    """'full' (all 6 of MinAtar's actions: `MinAtar/<Game>-v0`, `gymnax/<Game>-MinAtar-full`,
    and every Seaquest id: its minimal set is all 6), 'minimal' (the game's minimal set: the
    other MinAtar ids), None (not MinAtar)."""
    game = minatar_game(env_id)
    if game is None:
        return None
    return "full" if env_id.endswith(("-v0", "-full")) or game == "Seaquest" else "minimal"


def env_family(env_id: str) -> str:
    """'atari' (an Atari-57 game), 'minatar' (a MinAtar game, either port), 'mujoco' (a
    gymnasium MuJoCo task) or 'other'."""
    if atari_game(env_id) is not None:
        return "atari"
    if minatar_game(env_id) is not None:
        return "minatar"
    base = re.sub(r"-v\d+$", "", env_id.split("/")[-1])
    return "mujoco" if base in MUJOCO_ENVS else "other"


def normalizer(env_id: str):
    """(name, function score -> normalised score) of an env, or None when no reference."""
    game = atari_game(env_id)
    if game is not None:
        return "human-normalised", lambda s: human_normalized(game, s)
    for name, label in RANGE_FILES:
        for row in _read_csv(REFERENCES / name):
            if row["env"] == env_id:
                low, high = float(row["low"]), float(row["high"])
                return label, lambda s, lo=low, hi=high: (np.asarray(s, float) - lo) / (hi - lo)
    return None


# ----------------------------------------------------------------------------- reading runs


# config.json fields that do not make two runs different configurations, listed here and
# nowhere else. Runs whose configs differ only in these are seeds of one configuration and
# are pooled; any other difference (the agent, every agent_config field, the budget, reward
# clipping, evolution, a field added later) keeps them apart, under labels that name it.
# Fields of the run options block (`run`, or `args` in run folders of early versions):
RUN_FIELDS_NOT_CONFIG = (
    "seed",  # what the pooled runs differ in
    "env",  # the report's other axis: a configuration is compared over envs
    "run_dir", "exp_name", "resume",  # where the run lives and its name
    "preset",  # a preset's name: the values it set are in the other fields
    # How a population drew its members' hyper-parameters: a member's own values (its
    # hp_<field> columns, or its config) are compared instead, so `--vary lr=A,B` member i
    # pools with the single run `--lr` of its value, as the population README promises.
    "num_seeds", "vary", "sweep_lr",
    # Where and how fast it ran: devices, processes, envpool threads.
    "num_threads", "num_devices", "coordinator_address", "num_processes", "process_id",
    # Display, run-time checks, checkpoints, a job's time limit, evaluation precision.
    "progress", "debug", "checkpoint_every", "keep_checkpoints", "max_minutes", "eval_episodes",
    "exact_resume",  # what a checkpoint holds, not what the run learns
)  # fmt: skip
# Top-level fields: derived from the env or the config, or the software and machine.
TOP_FIELDS_NOT_CONFIG = (
    "env_spec", "replay_bytes_per_transition", "jax", "python", "devices", "processes",
)  # fmt: skip
# Of a population member's `population` block: its index (a config field all the same when
# the population evolves: its members exchange weights, so they are not seeds of one
# another), the population's size, its hyper-parameters (`hparams`: the same values as its
# agent_config, which is compared) and since when it has had them (`since`).
POPULATION_FIELDS_NOT_CONFIG = ("member", "of", "hparams", "since")


class RunSkipped(Exception):
    """A run with nothing to report yet (no complete metrics row, or no finished episode):
    skipped with a note, as documented."""


def find_runs(paths: list[str]) -> list[Path]:
    """Run folders (with config.json and metrics.csv) at or under `paths`, each once. A
    population (`--num-seeds P`) is found as its P member folders, `<run>/member-<i>/`."""
    found: dict[Path, Path] = {}
    for p in map(Path, paths):
        if not p.exists():
            raise ValueError(f"{p} does not exist")
        if (p / "config.json").is_file() and (p / "metrics.csv").is_file():
            runs = [p]
        else:
            runs = sorted(
                c.parent for c in p.rglob("config.json") if (c.parent / "metrics.csv").is_file()
            )
        for run in runs:
            found.setdefault(run.resolve(), run)
    if not found:
        raise ValueError(f"no run folders (config.json + metrics.csv) under {', '.join(paths)}")
    return list(found.values())


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _field(where: str, name: str, value, what: str) -> ValueError:
    return ValueError(f"{where}: {name} must be {what}, got {value!r}")


def _text(data: dict, name: str, where: str, prefix: str = "") -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _field(where, prefix + name, value, "a non-empty string")
    return value


def _cell(where: str, name: str, cell: str, low: float = 0.0) -> float:
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= low):
        what = "a finite number" + ("" if low == -math.inf else f" >= {low:g}")
        raise ValueError(f"{where}: {name} must be {what}, got {cell!r}")
    return value


def read_curve(path: Path) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The env_steps, return_mean and wall_s columns of `path`/metrics.csv, and the first
    row's `hp_<field>` values (a population member's hyper-parameters). A last line without
    its newline is a live run's half-written row and is left out; an empty or `nan`
    return_mean is an iteration before the first finished episode. Anything else that is
    not as train writes it is a one-line ValueError naming the file, line and column;
    RunSkipped when there is no complete row yet."""
    metrics = path / "metrics.csv"
    try:
        text = metrics.read_text()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise ValueError(f"{metrics} cannot be read: {reason}") from None
    lines = text.split("\n")[:-1]  # the text after the last newline: a half-written line
    try:
        rows = list(csv.reader(lines))
    except csv.Error as err:
        raise ValueError(f"{metrics} is not CSV: {err}") from None
    if not rows or not any(rows[0]):
        raise ValueError(f"{metrics} has no header line")
    header = rows[0]
    missing = [c for c in ("env_steps", "return_mean", "wall_s") if c not in header]
    if missing:
        raise ValueError(f"{metrics} has no column {', '.join(missing)}")
    col = {name: header.index(name) for name in header}
    steps, returns, walls = [], [], []
    hparams: dict[str, float] = {}
    for number, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        where = f"{metrics} line {number}"
        if len(row) != len(header):
            raise ValueError(f"{where}: {len(row)} cells for the header's {len(header)} columns")

        step = _cell(where, "env_steps", row[col["env_steps"]])
        if steps and step < steps[-1]:
            raise ValueError(f"{where}: env_steps {row[col['env_steps']]} is below the previous "
                             f"row's {steps[-1]:g}")  # fmt: skip
        cell = row[col["return_mean"]]
        if cell.strip().lower() in ("", "nan"):
            ret = math.nan
        else:
            ret = _cell(where, "return_mean", cell, -math.inf)
        steps.append(step)
        returns.append(ret)
        walls.append(_cell(where, "wall_s", row[col["wall_s"]]))
        values = {
            name[3:]: _cell(where, name, row[i], -math.inf)
            for i, name in enumerate(header)
            if name.startswith("hp_")
        }
        hparams = hparams if len(steps) > 1 else values
    if not steps:
        raise RunSkipped("no rows in metrics.csv yet")
    columns = {"env_steps": steps, "return_mean": returns, "wall_s": walls}
    return {k: np.asarray(v, float) for k, v in columns.items()}, hparams


def read_summary(path: Path) -> dict:
    """summary.json's numbers the report uses (`{}` without the file): eval_return_mean
    (absent, null or NaN: not evaluated), wall_s (absent, null or NaN: metrics.csv's), eval_s
    (the final evaluation's seconds; absent, null or NaN: unknown) and
    env_steps (absent: not checked against metrics.csv). Another value of one of them is a
    one-line ValueError naming the file and the field. Its `sps` is not read: it leaves out
    the run's first iteration, and summaries written by earlier versions of the runner (or
    after a resume from one of their checkpoints) give a resumed run's last stretch only;
    the report's rate is metrics.csv's env steps ÷ wall_s."""
    file = path / "summary.json"
    if not file.is_file():
        return {}
    summary = read_json(file, "summary")
    where = f"summary {file}"
    out = {}
    if (steps := summary_env_steps(summary, file)) is not None:
        out["env_steps"] = steps
    for name, low in (("eval_return_mean", -math.inf), ("wall_s", 0.0), ("eval_s", 0.0)):
        value = summary.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if not (_is_number(value) and math.isfinite(value) and value >= low):
            what = "a finite number" + ("" if low == -math.inf else f" >= {low:g}")
            raise _field(where, name, value, what + " or null")
        out[name] = float(value)
    return out


def read_config(path: Path) -> tuple[dict, str, str, int]:
    """(config.json, agent, env, seed), each field the report reads checked: a one-line
    ValueError naming the file and the field otherwise."""
    file = path / "config.json"
    config = read_json(file, "run config")
    where = f"run config {file}"
    block = "run" if "run" in config else "args" if "args" in config else None
    if block is None:
        raise ValueError(f"{where}: has no run block (`run`, or `args` in early versions)")
    run = config[block]
    if not isinstance(run, dict):
        raise _field(where, block, run, "an object")
    for name in ("agent_config", "population"):
        if name in config and not isinstance(config[name], dict):
            raise _field(where, name, config[name], "an object")
    agent = _text(run, "agent", where, f"{block}.") if "agent" in run else None
    if "agent" in config or agent is None:
        top = _text(config, "agent", where)
        if agent is not None and agent != top:
            raise _field(where, f"{block}.agent", agent, f"the agent {top!r} of field agent")
        agent = top
    env = _text(run, "env", where, f"{block}.")
    seed = run.get("seed")
    if type(seed) is not int or seed < 0:
        raise _field(where, f"{block}.seed", seed, "an integer >= 0")
    evolve = run.get("evolve", "none")
    if not isinstance(evolve, str):
        raise _field(where, f"{block}.evolve", evolve, "a string")
    member = config.get("population", {}).get("member", 0)
    if type(member) is not int or member < 0:
        raise _field(where, "population.member", member, "an integer >= 0")
    size = config.get("population", {}).get("of", 1)
    if type(size) is not int or size < 1:
        raise _field(where, "population.of", size, "an integer >= 1")
    if member >= size:
        raise _field(where, "population.member", member, f"below population.of ({size})")
    return config, agent, env, seed


def _flatten(value, prefix: str, out: dict) -> dict:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value
    return out


def config_identity(config: dict, hparams: dict[str, float] | None = None) -> dict:
    """The fields (dotted paths -> values) that make a run's configuration: config.json
    without the fields `*_NOT_CONFIG` list. A non-evolving population member's own
    hyper-parameters (`hparams`, its hp_<field> columns) replace the agent_config values
    they overrode; an evolving population's member index stays a field."""
    config = dict(config)
    for name in TOP_FIELDS_NOT_CONFIG:
        config.pop(name, None)
    block = "run" if "run" in config else "args"
    options = config[block]
    config[block] = {k: v for k, v in options.items() if k not in RUN_FIELDS_NOT_CONFIG}
    population = config.pop("population", None)
    if population is not None:
        evolving = options.get("evolve", "none") != "none"
        drawn = bool(options.get("vary") or options.get("sweep_lr"))
        keep = {
            k: v
            for k, v in population.items()
            if k not in POPULATION_FIELDS_NOT_CONFIG or (k == "member" and evolving)
        }
        if hparams and not evolving:
            config["agent_config"] = {**config.get("agent_config", {}), **hparams}
        elif drawn and not evolving:  # values drawn, but not logged: members stay apart
            keep["member"] = population.get("member")
        if keep:
            config["population"] = keep
    return _flatten(config, "", {})


def _base_label(path: Path, agent: str, env: str, seed: int) -> str:
    """A sweep's label (its runs are <label>-<env>-seed<k>[-<grid values>]), else the agent."""
    slug = re.escape(env.replace("/", "-"))
    match = re.fullmatch(rf"(.+)-{slug}-seed{seed}(-.+)?", path.name)
    return match.group(1) if match else agent


def _current_names(config: dict, agent: str) -> dict:
    """`config` with its agent_config fields under their current names (the agent config's
    `RENAMED` table), so that a run saved before a field was renamed pools with runs saved
    after. An agent this version does not know keeps its names (it pools with nothing new)."""
    from agents.core.config import renamed_fields
    from agents.core.registry import get_agent

    if "agent_config" not in config:
        return config
    try:
        spec = get_agent(agent)
    except (ValueError, ImportError):
        return config
    return {**config, "agent_config": renamed_fields(config["agent_config"], spec.config_cls)}


def _load(path: Path) -> RunResult:
    config, agent, env, seed = read_config(path)
    curve, hparams = read_curve(path)
    steps, ret, wall = curve["env_steps"], curve["return_mean"], curve["wall_s"]
    ok = np.isfinite(ret)
    if not ok.any():
        raise RunSkipped("no episode finished yet")
    summary = read_summary(path)
    if summary.get("env_steps", int(steps[-1])) != int(steps[-1]):
        # not at metrics.csv's last row: a finished (or stopped) run resumed with a larger
        # --total-steps keeps its old summary.json until it ends again; its evaluation and
        # seconds describe another moment, so the run is reported as unfinished
        summary = {}
    final = summary.get("eval_return_mean")
    identity = config_identity(_current_names(config, agent), hparams)
    base = _base_label(path, agent, env, seed)
    # the rate from one row (summary.json's wall_s is the same number when it is current)
    rate = float(steps[-1] / wall[-1]) if wall[-1] > 0 else math.nan
    return RunResult(
        path,
        base,
        env,
        seed,
        float(ret[ok][-1]) if final is None else final,
        float(np.max(ret[ok])),
        int(steps[-1]),
        summary.get("wall_s", float(wall[-1])),
        rate,
        4 if atari_game(env) else 1,
        steps[ok],
        wall[ok],
        ret[ok],
        final is not None,
        agent,
        base,
        identity,
        json.dumps(identity, sort_keys=True, default=str),
        config.get("population", {}).get("of", 1),
        summary.get("eval_s", math.nan),
    )


def load_result(path: Path) -> RunResult | None:
    """One run's numbers; None when it has nothing to report yet (no complete metrics row,
    or no finished episode). Its `algo` is its sweep label or agent until `label_configs`
    names its configuration among others. A damaged field of its files is a one-line
    ValueError naming the file and the field."""
    try:
        return _load(path)
    except RunSkipped:
        return None


def load_results(paths: list[str], warn=None) -> list[RunResult]:
    """The runs at or under `paths`, labelled by configuration (`label_configs`). A run with
    nothing to report yet is skipped, and so is a second run of the same configuration,
    env and seed; `warn` gets a line for each."""
    warn = warn or (lambda line: print(line, file=sys.stderr))
    results: list[RunResult] = []
    seen: dict[tuple, Path] = {}
    for path in find_runs(paths):
        try:
            r = _load(path)
        except RunSkipped as why:
            warn(f"skipping {path}: {why}")
            continue
        first = seen.setdefault((r.key, r.env, r.seed), path)
        if first != path:
            warn(f"skipping {path}: the same configuration, env and seed as {first}")
            continue
        results.append(r)
    if not results:
        raise ValueError("no run has a finished episode")
    return label_configs(results)


def _value_text(value) -> str:
    if value is _UNSET:
        return "unset"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


_UNSET = object()


def label_configs(results: list[RunResult]) -> list[RunResult]:
    """`results` with one label (`algo`) per configuration: runs of one configuration share
    it, and no two configurations do. A configuration is named by its sweep label, or its
    agent; configurations that would share a name get the fields they differ in appended
    (`ppo lr=0.001`, `ppo lr=0.0003`)."""
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        groups.setdefault(r.key, []).append(r)
    names = {}
    for key, runs in groups.items():
        bases = [r.base for r in runs]
        names[key] = min(set(bases), key=lambda b: (-bases.count(b), b))
    by_name: dict[str, list[str]] = {}
    for key, name in names.items():
        by_name.setdefault(name, []).append(key)
    labels = {}
    for name, keys in by_name.items():
        if len(keys) == 1:
            labels[keys[0]] = name
            continue
        configs = [groups[k][0].config for k in keys]
        paths = sorted({p for c in configs for p in c})
        differ = [p for p in paths if len({_value_text(c.get(p, _UNSET)) for c in configs}) > 1]
        leaves = [path.rsplit(".", 1)[-1] for path in differ]
        shown = [
            leaf if leaves.count(leaf) == 1 else p for p, leaf in zip(differ, leaves, strict=True)
        ]
        for key, config in zip(keys, configs, strict=True):
            # The fields this configuration sets: one that only another sets is not named
            # (two configurations that name the same values are one configuration).
            named = [
                f"{shown_as}={_value_text(config[path])}"
                for shown_as, path in zip(shown, differ, strict=True)
                if path in config
            ]
            labels[key] = " ".join([name, *named])
    texts, counts = list(labels.values()), {}
    for key in sorted(labels):  # texts that still coincide (formatting): numbered
        text = labels[key]
        if texts.count(text) > 1:
            counts[text] = counts.get(text, 0) + 1
            labels[key] = f"{text} #{counts[text]}"
    for r in results:
        r.algo = labels[r.key]
    return results


# ----------------------------------------------------------------------------- statistics


def mean_ci95(values) -> tuple[float, float]:
    """(mean, half-width of the 95% Student-t interval); half-width NaN for one value."""
    from scipy import stats

    x = np.asarray(values, float)
    if len(x) < 2:
        return float(x.mean()), math.nan
    return float(x.mean()), float(
        stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    )


def score_matrices(
    results: list[RunResult], key: str = "final"
) -> tuple[dict[str, np.ndarray], list[str], list[str]]:
    """({algo: normalised scores [seeds, envs]}, envs, notes) over the envs every algorithm
    ran and that have a normaliser; seeds cut to the fewest any (algo, env) has."""
    notes = []
    algos = sorted({r.algo for r in results})
    envs = sorted({r.env for r in results})
    common = [
        e for e in envs if all(any(r.env == e and r.algo == a for r in results) for a in algos)
    ]
    dropped = sorted(set(envs) - set(common))
    if dropped:
        notes.append(
            f"left out of the aggregates (not run by every algorithm): {', '.join(dropped)}"
        )
    normed = [e for e in common if normalizer(e) is not None]
    if set(common) - set(normed):
        notes.append(
            "left out of the aggregates (no reference scores to normalise): "
            + ", ".join(sorted(set(common) - set(normed)))
        )
    if not normed:
        return {}, [], notes
    counts = {
        (a, e): sum(r.algo == a and r.env == e for r in results) for a in algos for e in normed
    }
    n = min(counts.values())
    if len(set(counts.values())) > 1:
        notes.append(f"seeds cut to {n} per (algorithm, env), the fewest any has")
    out = {}
    for a in algos:
        cols = []
        for e in normed:
            runs = sorted((r for r in results if r.algo == a and r.env == e), key=lambda r: r.seed)[
                :n
            ]
            notes += [f"{a} on {e}: {p}" for p in pooling_problems(runs)]
            cols.append(normalizer(e)[1](np.array([getattr(r, key) for r in runs])))
        out[a] = np.stack(cols, axis=1)
    return out, normed, notes


@contextlib.contextmanager
def _numpy_seed(seed: int):
    """numpy's global RNG seeded for the block, then restored: rliable 1.2.0's
    `StratifiedBootstrap.update_indices` draws from `np.random.choice`, not from the
    `random_state` it is given, so only this makes its confidence intervals reproducible."""
    saved = np.random.get_state()  # noqa: NPY002  (rliable draws from the global RNG)
    np.random.seed(seed)  # noqa: NPY002  (rliable draws from the global RNG)
    try:
        yield
    finally:
        np.random.set_state(saved)  # noqa: NPY002  (rliable draws from the global RNG)


def aggregates(scores: dict[str, np.ndarray], reps: int = 2000, seed: int = 0):
    """rliable's IQM, median, mean and optimality gap with stratified bootstrap 95% CIs:
    ({algo: [4]}, {algo: [2, 4]})."""
    from rliable import library as rly
    from rliable import metrics

    def fn(x):
        return np.array(
            [
                metrics.aggregate_iqm(x),
                metrics.aggregate_median(x),
                metrics.aggregate_mean(x),
                metrics.aggregate_optimality_gap(x),
            ]
        )

    with _numpy_seed(seed):
        return rly.get_interval_estimates(
            scores, fn, reps=reps, random_state=np.random.RandomState(seed)
        )


AGGREGATE_NAMES = ("IQM", "Median", "Mean", "Optimality gap")


def curves(results: list[RunResult], envs: list[str], x: str, points: int = 30, algo=None):
    """Normalised training-return curves on a shared grid of `x` ('steps' or 'wall'):
    (grid, {algo: [seeds, envs, points]}). Each run is interpolated (its last value held
    no further than its own end: the grid stops at the shortest run). With `algo`, only that
    algorithm's runs, on a grid up to its own shortest run."""
    algos = sorted({r.algo for r in results}) if algo is None else [algo]
    runs = [r for r in results if r.env in envs and r.algo in algos]
    ends = [(r.curve_steps if x == "steps" else r.curve_wall)[-1] for r in runs]
    grid = np.linspace(0, min(ends), points + 1)[1:]
    out = {}
    for a in algos:
        per_env = []
        for e in envs:
            mine = sorted((r for r in runs if r.algo == a and r.env == e), key=lambda r: r.seed)
            rows = []
            for r in mine:
                xs = r.curve_steps if x == "steps" else r.curve_wall
                rows.append(np.interp(grid, xs, normalizer(e)[1](r.curve_return)))
            per_env.append(rows)
        n = min(len(rows) for rows in per_env)
        out[a] = np.stack([np.array(rows[:n]) for rows in per_env], axis=1)
    return grid, out


def iqm_curves(curve_scores: dict[str, np.ndarray], reps: int = 500, seed: int = 0):
    from rliable import library as rly
    from rliable import metrics

    def fn(x):  # x: [seeds, envs, points]
        return np.array([metrics.aggregate_iqm(x[..., i]) for i in range(x.shape[-1])])

    with _numpy_seed(seed):
        return rly.get_interval_estimates(
            curve_scores, fn, reps=reps, random_state=np.random.RandomState(seed)
        )


# ----------------------------------------------------------------------------- report


def load_published() -> list[dict]:
    path = REFERENCES / "published_scores.csv"
    return _read_csv(path) if path.is_file() else []


def our_protocol(runs: list[RunResult]) -> dict:
    """The protocol fields of `published_scores.csv` for our runs of one (algorithm, env)."""
    family = env_family(runs[0].env)
    return {
        "frames": float(np.mean([r.env_steps * r.frames_per_step for r in runs])),
        # envpool's Atari -v5 defaults here: up to 30 no-op starts, no sticky actions.
        "starts": "noop30" if family == "atari" else "none",
        # MinAtar's own defaults (Young & Tian 2019): sticky actions with p = 0.1.
        "sticky": "true" if family == "minatar" else "false",
        "eval": "eval" if all(r.final_is_eval for r in runs) else "train",
        "actions": minatar_action_set(runs[0].env),  # None off MinAtar
    }


def protocol_differences(row: dict, ours: dict) -> list[str]:
    """How a published row's protocol differs from ours (empty: it matches)."""
    diffs = []
    if not row.get("frames"):
        diffs.append("budget not stated")
    elif abs(float(row["frames"]) - ours["frames"]) > 0.05 * ours["frames"]:
        diffs.append(f"budget {float(row['frames']):,.0f} frames vs ours {ours['frames']:,.0f}")
    if row.get("starts") and row["starts"] != ours["starts"]:
        diffs.append(f"starts {row['starts']} vs ours {ours['starts']}")
    if row.get("sticky", "false").lower() != ours["sticky"]:
        diffs.append(
            "sticky actions (ours: none)"
            if ours["sticky"] == "false"
            else "no sticky actions (ours: sticky)"
        )
    actions = minatar_action_set(row.get("env", ""))
    if ours.get("actions") and actions and actions != ours["actions"]:
        diffs.append(f"{actions} action set vs ours {ours['actions']}")
    kind = "eval" if row.get("eval") == "eval" else "train"
    if kind != ours["eval"]:
        diffs.append(
            f"{'evaluation' if kind == 'eval' else 'training'} returns vs ours "
            f"{'evaluation' if ours['eval'] == 'eval' else 'training'}"
        )
    return diffs


def published(results: list[RunResult], rows: list[dict] | None = None) -> list[dict]:
    """Published scores for our (algorithm, env) pairs: the row, our final mean ± CI, and how
    the protocol differs (`matches` when it does not). An algorithm label matches the row's
    agent by its first `-`-separated word; Atari and MinAtar envs match by game (the row's
    source names the MinAtar port it ran), others by id."""
    rows = load_published() if rows is None else rows
    out = []
    for algo, env in sorted({(r.algo, r.env) for r in results}):
        key = atari_game(env) or env
        game = minatar_game(env)
        mine = [r for r in results if r.algo == algo and r.env == env]
        ours = our_protocol(mine)
        agent = mine[0].agent or algo.split("-")[0]  # a configuration has one agent
        for row in rows:
            same_game = game is not None and minatar_game(row["env"]) == game
            if (row["env"] != key and not same_game) or agent != row["agent"]:
                continue
            diffs = protocol_differences(row, ours)
            out.append(
                {
                    "algo": algo,
                    "env": env,
                    "published": float(row["score"]),
                    "ours": mean_ci95([r.final for r in mine]),
                    "matches": not diffs,
                    "differences": diffs,
                    "source": row["source"],
                }
            )
    return out


def plot_published(matches: list[dict], path: Path) -> None:
    """Our final returns (mean ± 95% CI) and the published scores of matching protocol, one
    panel per env, on the same axis."""
    import matplotlib.pyplot as plt

    envs = sorted({m["env"] for m in matches})
    fig, axes = plt.subplots(1, len(envs), figsize=(4 * len(envs), 3.5), squeeze=False)
    for ax, env in zip(axes[0], envs, strict=True):
        mine = [m for m in matches if m["env"] == env]
        algos = sorted({m["algo"] for m in mine})
        for i, a in enumerate(algos):
            mean, half = next(m["ours"] for m in mine if m["algo"] == a)
            ax.errorbar([i], [mean], yerr=[0 if math.isnan(half) else half], fmt="o", capsize=4,
                        color="C0", label="ours" if i == 0 else None)  # fmt: skip
            pubs = [m["published"] for m in mine if m["algo"] == a]
            ax.scatter([i] * len(pubs), pubs, marker="_", s=400, color="C3",
                       label="published" if i == 0 else None)  # fmt: skip
        ax.set_xticks(range(len(algos)), algos)
        ax.set_xlim(-0.5, len(algos) - 0.5)
        ax.set_title(env)
        ax.set_ylabel("final return")
        ax.grid(alpha=0.3)
    axes[0][0].legend()
    save_figure(fig, path)


def compute_estimates(results: list[RunResult]) -> list[dict]:
    """Per (algorithm, paper budget): hours at the mean measured rate of the algorithm's
    programs on envs of the budget's family (a population member's steps/s times its
    population's size: the members ran side by side); hours None when it has no measured run
    of that family."""
    out = []
    for algo in sorted({r.algo for r in results}):
        mine = [r for r in results if r.algo == algo]
        seeds = max(len({r.seed for r in mine if r.env == e}) for e in {r.env for r in mine})
        for budget, (family, games, steps) in PAPER_BUDGETS.items():
            runs = [
                r for r in mine if env_family(r.env) == family and np.isfinite(r.sps) and r.sps > 0
            ]
            entry = {"algo": algo, "budget": budget, "family": family, "hours": None}
            if runs:
                sps = float(np.mean([r.sps * r.members for r in runs]))
                entry |= {
                    "envs": sorted({r.env for r in runs}),
                    "sps": sps,
                    "runs": games * seeds,
                    "hours": games * seeds * steps / sps / 3600,
                }
            out.append(entry)
    return out


def plain_log_axis(axis) -> None:
    """A log scale on a matplotlib axis whose tick labels are plain numbers (`100`, `1000`):
    matplotlib's own are mathtext (`$10^{2}$`), which the report's figures turn off."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if axis.axis_name == "x":
        axis.axes.set_xscale("log")
    else:
        axis.axes.set_yscale("log")
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def save_figure(fig, path: Path) -> None:
    """`fig` as a PNG at `path`, replaced atomically (never through a link), then closed."""
    import matplotlib.pyplot as plt

    with atomic_path(path, path.parent) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _fmt(mean: float, half: float, digits: int = 1) -> str:
    if math.isnan(half):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def pooling_problems(runs: list[RunResult]) -> list[str]:
    """What makes the seeds of one (configuration, env) unlike: some evaluated at the end and
    some not (their `final` would mix evaluation and training returns), or some ending well
    before the others (cut off by --max-minutes, or still running)."""
    problems = []
    evaluated = sum(r.final_is_eval for r in runs)
    if 0 < evaluated < len(runs):
        problems.append(
            f"{len(runs) - evaluated} of {len(runs)} runs have no final evaluation: their "
            "final is the last training mean"
        )
    steps = [r.env_steps for r in runs]
    if min(steps) < 0.99 * max(steps):
        problems.append(f"the runs end at {min(steps):,} to {max(steps):,} env steps")
    return problems


def _mean_measured(values: list[float]) -> float:
    """The mean of the finite `values` (NaN: not measured, as a run without summary.json's
    sps), NaN when none is; no warning for an all-NaN column."""
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def write_report(
    results: list[RunResult], out: Path, reps: int = 2000, title: str | None = None
) -> dict:
    """report.md, its PNGs and report.json in `out`. The figures' texts are never mathtext:
    names come from run folders and configs (a label `a$\\frac{$b` made a figure fail)."""
    import matplotlib

    matplotlib.use("Agg")
    with matplotlib.rc_context({"text.parse_math": False}):
        return _write_report(results, out, reps, title)


def _write_report(results: list[RunResult], out: Path, reps: int, title: str | None) -> dict:
    import warnings

    # rliable 1.2.0 passes arch a RandomState the old way; arch warns on every bootstrap.
    warnings.filterwarnings("ignore", "random_state is deprecated", FutureWarning)
    import matplotlib.pyplot as plt
    from rliable import library as rly
    from rliable import plot_utils

    out.mkdir(parents=True, exist_ok=True)
    md = [f"# {title or 'Benchmark report'}", ""]
    md += [
        f"{len(results)} runs, {len({r.algo for r in results})} algorithms, "
        f"{len({r.env for r in results})} envs. "
        "Final = evaluation return at the end of training (full episodes, no reward clipping), "
        "else the last training mean; last train = the last moving-window mean of training "
        "returns (the MinAtar paper's measure: the average return of the last episodes of "
        "training); best = best moving-window training mean. "
        "Mean ± 95% CI (Student t) over seeds. An algorithm is one configuration: runs whose "
        "config.json differ in more than the seed, the env and where they ran are never "
        "pooled, and names that would coincide carry the fields that differ "
        "(report.json `configs` has each one's whole configuration). `wall s`: a run's "
        "training seconds, every resumed stretch included; `steps/s`: its env steps ÷ those "
        "seconds at metrics.csv's last row (a population member's share of its program's "
        "rate).",
        "",
    ]
    data: dict = {"runs": [], "envs": {}, "aggregates": {}}
    for r in results:
        data["runs"].append(
            {
                k: getattr(r, k)
                for k in ("algo", "env", "seed", "final", "best", "env_steps", "wall_s", "sps")
            }
            | {"path": str(r.path)}
        )

    for env in sorted({r.env for r in results}):
        md += [
            f"## {env}",
            "",
            "| algorithm | seeds | final | last train | best | env steps | wall s | steps/s |"
            + (" normalised final |" if normalizer(env) else ""),
            "|---|---|---|---|---|---|---|---|" + ("---|" if normalizer(env) else ""),
        ]
        data["envs"][env] = {}
        unlike = []
        for algo in sorted({r.algo for r in results if r.env == env}):
            mine = [r for r in results if r.env == env and r.algo == algo]
            fin, best = mean_ci95([r.final for r in mine]), mean_ci95([r.best for r in mine])
            last = mean_ci95([r.curve_return[-1] for r in mine])
            row = (
                f"| {algo} | {len(mine)} | {_fmt(*fin)} | {_fmt(*last)} | {_fmt(*best)} "
                f"| {np.mean([r.env_steps for r in mine]):,.0f} "
                f"| {np.mean([r.wall_s for r in mine]):.0f} "
                f"| {_mean_measured([r.sps for r in mine]):,.0f} |"
            )
            if normalizer(env):
                row += f" {_fmt(*mean_ci95(normalizer(env)[1]([r.final for r in mine])), 2)} |"
            md.append(row)
            unlike += [f"- {algo}: {p}" for p in pooling_problems(mine)]
            data["envs"][env][algo] = {
                "final": fin,
                "last_train": last,
                "best": best,
                "seeds": len(mine),
            }
        md += ["", *unlike, ""] if unlike else [""]

    scores, envs, notes = score_matrices(results)
    md += ["## Aggregates over envs (rliable)", ""]
    md += [
        f"Normalised final scores over {', '.join(envs) or 'no env'}: "
        "Atari human-normalised (references/atari_human_random.csv), classic control "
        "(score − worst) / (solved threshold − worst) (references/classic_control.csv; "
        "Pendulum-v1: random policy → 0, best possible return 0 → 1), MinAtar "
        "(score − random) / (published reference − random) (references/minatar.csv). "
        f"95% stratified bootstrap CIs ({reps} resamples), as "
        "`rliable.library.get_interval_estimates`.",
        "",
    ]
    md += [f"- {n}" for n in notes] + ([""] if notes else [])
    if scores:
        point, interval = aggregates(scores, reps)
        md += [
            "| algorithm | " + " | ".join(AGGREGATE_NAMES) + " |",
            "|---|" + "---|" * len(AGGREGATE_NAMES),
        ]
        for a in sorted(scores):
            cells = [
                f"{point[a][i]:.3f} [{interval[a][0, i]:.3f}, {interval[a][1, i]:.3f}]"
                for i in range(len(AGGREGATE_NAMES))
            ]
            md.append(f"| {a} | " + " | ".join(cells) + " |")
            data["aggregates"][a] = {
                n: {"point": point[a][i], "ci": interval[a][:, i].tolist()}
                for i, n in enumerate(AGGREGATE_NAMES)
            }
        md.append("")
        # rliable's defaults (0.37 in a row, 4 ticks, wspace 0.11) overlap the tick labels of
        # neighbouring panels and put the x label on them when there are few algorithms
        row_height = 0.5
        fig, _ = plot_utils.plot_interval_estimates(
            point,
            interval,
            metric_names=list(AGGREGATE_NAMES),
            algorithms=sorted(scores),
            xlabel="Normalised score",
            max_ticks=3,
            row_height=row_height,
            xlabel_y_coordinate=-0.55 / (row_height * len(scores)),
            wspace=0.25,
        )
        save_figure(fig, out / "aggregates.png")
        md += ["![aggregates](aggregates.png)", ""]

        taus = np.linspace(0.0, max(1.05, max(float(np.max(s)) for s in scores.values())), 81)
        with _numpy_seed(0):  # its bands' bootstrap draws from numpy's global RNG too
            prof, prof_ci = rly.create_performance_profile(scores, taus, reps=min(reps, 1000))
        fig, ax = plt.subplots(figsize=(6, 4))
        plot_utils.plot_performance_profiles(
            prof, taus, performance_profile_cis=prof_ci, ax=ax, xlabel="normalised score (τ)",
            ylabel="Fraction of runs with score > τ",
        )  # fmt: skip
        ax.legend(list(prof), loc="upper right")
        save_figure(fig, out / "performance_profile.png")
        md += [
            "## Performance profile",
            "",
            "Fraction of runs with a normalised final score above τ (bands: 95% CIs).",
            "",
            "![performance profile](performance_profile.png)",
            "",
        ]

        md += [
            "## Sample efficiency",
            "",
            "IQM of the normalised training return (moving-window mean) over runs, "
            "interpolated on a grid up to the shortest run: against env steps (one grid for "
            "all algorithms), and against training wall-clock seconds, compilation excluded "
            "(each algorithm up to its own shortest run, log axis: their speeds differ by "
            "orders of magnitude). Bands: 95% stratified bootstrap CIs.",
            "",
        ]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        grid, cs = curves(results, envs, "steps")
        point_c, ci_c = iqm_curves(cs, reps=min(reps, 500))
        per_x = {"steps": {a: (grid, point_c[a], ci_c[a]) for a in cs}, "wall": {}}
        for a in sorted(cs):
            g, c = curves(results, envs, "wall", algo=a)
            p, ci = iqm_curves(c, reps=min(reps, 500))
            per_x["wall"][a] = (g, p[a], ci[a])
        for ax, x, label in (
            (axes[0], "steps", "env steps"),
            (axes[1], "wall", "training wall-clock (s)"),
        ):
            for a, (g, point, ci) in sorted(per_x[x].items()):
                (line,) = ax.plot(g, point, label=a)
                ax.fill_between(g, ci[0], ci[1], alpha=0.2, color=line.get_color())
            ax.set_xlabel(label)
            ax.set_ylabel("IQM normalised return")
            ax.grid(alpha=0.3)
            data.setdefault("curves", {})[x] = {
                a: {"grid": g.tolist(), "iqm": point.tolist()}
                for a, (g, point, _) in per_x[x].items()
            }
        plain_log_axis(axes[1].xaxis)
        axes[0].legend()
        save_figure(fig, out / "sample_efficiency.png")
        md += ["![sample efficiency](sample_efficiency.png)", ""]

    from experiments import atari100k

    lines, data["atari100k"] = atari100k.section(results, mean_ci95, out)
    md += lines

    pub = published(results)
    md += ["## Published scores", ""]
    if pub:
        md += [
            "Published scores (experiments/references/published_scores.csv) for the same agent "
            "and env. Only rows whose protocol matches ours (budget within 5%, no-op starts on "
            "Atari, sticky actions as ours: none on Atari, MinAtar's p = 0.1 on MinAtar, "
            "evaluation vs training returns) are drawn on our axes; the others name the "
            "difference.",
            "",
            "| agent | env | ours (final) | published | protocol | source |",
            "|---|---|---|---|---|---|",
        ]
        for p in pub:
            verdict = "matches" if p["matches"] else "differs: " + "; ".join(p["differences"])
            md.append(
                f"| {p['algo']} | {p['env']} | {_fmt(*p['ours'])} | {p['published']:,.1f} "
                f"| {verdict} | {p['source']} |"
            )
        md.append("")
        matching = [p for p in pub if p["matches"]]
        if matching:
            plot_published(matching, out / "published.png")
            md += ["![published](published.png)", ""]
        else:
            md += ["No published row has our protocol, so none is drawn beside our results.", ""]
        data["published"] = pub
    else:
        md += [
            "No published score in experiments/references/published_scores.csv is for these "
            "(agent, env) pairs.",
            "",
        ]

    md += [
        "## Compute",
        "",
        "What a paper-scale budget would take per algorithm, one program at a time on this "
        "hardware (a `--num-seeds P` program trains P runs side by side: its rate is P times a "
        "member's), priced from the mean throughput of this report's runs (env steps ÷ "
        "training seconds over each whole run) of the "
        "same env family only (Atari games for Atari budgets, MuJoCo tasks for MuJoCo): a "
        "classic-control rate says nothing about Atari frames.",
        "",
        "| algorithm | budget | measured on | program steps/s | runs (games × seeds) | hours |",
        "|---|---|---|---|---|---|",
    ]
    for e in compute_estimates(results):
        if e["hours"] is None:
            md.append(f"| {e['algo']} | {e['budget']} | no measured run of this family | | | |")
        else:
            md.append(
                f"| {e['algo']} | {e['budget']} | {', '.join(e['envs'])} | {e['sps']:,.0f} "
                f"| {e['runs']} | {e['hours']:,.1f} |"
            )
    data["compute"] = compute_estimates(results)
    md.append("")
    md += ["## Runs", "", *[f"- `{r.path}`: {r.algo} {r.env} seed {r.seed}" for r in results], ""]
    data["configs"] = configs_json(results)
    with atomic_file(out / "report.md", run_dir=out) as f:
        f.write("\n".join(md))
    with atomic_file(out / "report.json", run_dir=out) as f:  # strict JSON: NaN is null
        f.write(json.dumps(strict_json_value(data), indent=1, default=float, allow_nan=False))
    return data


def configs_json(results: list[RunResult]) -> dict:
    """{label: its agent, its configuration (dotted config.json paths -> values, without
    the fields `*_NOT_CONFIG` list), and its runs}: what each label of the report is."""
    out: dict = {}
    for r in results:
        entry = out.setdefault(r.algo, {"agent": r.agent, "config": r.config, "runs": []})
        entry["runs"].append(str(r.path))
    return out


def main(argv: list[str] | None = None) -> Path:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m experiments.report", description=__doc__.splitlines()[0]
    )
    p.add_argument("runs", nargs="+", help="run folders, or folders of run folders (sweeps)")
    p.add_argument(
        "--out", required=True, help="output folder for report.md, its PNGs and report.json"
    )
    p.add_argument(
        "--reps",
        type=int,
        default=2000,
        help="bootstrap resamples (default 2000; rliable's is 50000)",
    )
    p.add_argument("--title", help="report title")
    ns = p.parse_args(argv)
    try:
        if not 1 <= ns.reps <= MAX_REPS:  # each resample holds a copy of the scores
            raise ValueError(f"--reps must be in [1, {MAX_REPS:,}], got {ns.reps}")
        if not ns.out.strip():
            raise ValueError("--out must be a folder, got ''")
        try:
            check_run_dir_writable(ns.out, what="folder")
        except ValueError as err:
            raise ValueError(f"--out: {err}") from None
        results = load_results(ns.runs)
        write_report(results, Path(ns.out), ns.reps, ns.title)
    except (ValueError, WriteError) as err:
        raise SystemExit(f"error: {err}") from None
    print(f"report of {len(results)} runs -> {Path(ns.out) / 'report.md'}")
    return Path(ns.out) / "report.md"


if __name__ == "__main__":
    main()
