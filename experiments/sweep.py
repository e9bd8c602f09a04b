"""Run a grid of training runs: `python -m experiments.sweep SPEC` or the CLI form
`python -m experiments.sweep --agents acer,ppo --envs CartPole-v1,Acrobot-v1 --seeds 3
--set total_steps=20000`.

A sweep is agents × envs × seeds × overrides. Every run is an ordinary
`python -m experiments.train` process writing an ordinary run folder,
`runs/<sweep>/<agent>-<env>-seed<k>[-<grid values>]` (a `/` in the env id becomes `-`), so
`evaluate`, `plot`, `--resume` and `report` work on it as on any run. The sweep knows agents
only through the flags their config dataclasses declare; nothing here names an agent.

The SPEC is a YAML file or a Python file defining `SPEC`, a dict of the same fields (an
optional field given as null is the same as leaving it out):

```yaml
name: classic              # the sweep's folder: runs/classic/
agents: [acer, ppo]        # or {agent: ppo, preset: ppo-classic, set: {num_envs: 8}}
envs: [CartPole-v1, Acrobot-v1]
seeds: 3                   # or a list: [0, 5, 7]
set: {total_steps: 20000}  # flags of experiments.train (run options or agent config)
grid: {lr: [0.001, 0.0003]}   # optional: one run per combination
slots: 2                   # runs at a time
cpus: auto                 # pin each slot to its share of the cores (one each, in turn, when
                           # slots outnumber them), or [[0], [1]], or none
devices: [0, 1]            # slot i sees only device devices[i % len] (CUDA_VISIBLE_DEVICES;
                           # ids as the driver numbers them, within the sweep's own mask)
retries: 0                 # resume a failed run up to this many times within the sweep
```

Resuming: the run folders are the truth. A run whose summary.json says it reached its
`total_steps` (and the spec's, when it sets one: raising it resumes finished runs) is skipped;
one with a config.json is continued with `--resume`; the others
start afresh. The sweep's state file (`runs/<sweep>/sweep_state.json`, written atomically)
records every launch (fresh or resume, slot, pid, exit code), for the table and for audits.
A damaged state file (not JSON, or a field of the wrong type) is set aside as
`sweep_state.json.damaged` with a warning naming the field, and a new one is started: the run
folders, not this file, decide what runs. A run folder whose summary.json or config.json is
damaged is not "done": a warning names the file and field, and the run is resumed as any
unfinished one (train's `--resume` then refuses a damaged config.json with one line). A run
folder that is a symbolic link leading out of the sweep folder is never started (nothing is
written through it): the run is marked `invalid` with one line, and the others go on.
Ctrl-C or SIGTERM stops the sweep: no run starts, and the running ones are asked to
checkpoint and stop (evaluating first, as train does); a second one aborts them (they resume
from their last checkpoint; the sweep marks them `stopped`).
Runs die with the sweep: each gets SIGTERM when the sweep process dies (even by kill -9),
and then checkpoints and stops as on Ctrl-C; a restarted sweep waits for such a run to
release its folder before resuming it, so no run is ever executed twice at once.

Big grids: the grid is never expanded whole. A grid of up to `CHECK_ALL` runs has every
run's command line checked by train's parser before anything starts; a bigger one checks
each agent × env with every grid value once (at most `CHECK_ALL` command lines) up front,
then each run just before it starts (or is printed by `--dry-run`): a run refused then is
marked `invalid`, with the reason, and the others go on. A sweep of more than `MAX_RUNS`
runs is refused with one line (its state file and live table hold every run; split it into
several sweeps); `--dry-run` prints the grid's size at once and then streams its runs, so
`--dry-run | head` shows any grid.

`--backend submitit` submits the same runs to SLURM through submitit (docs/sweeps.md: "Sweeps and
reports"); `--submitit-local` runs them with submitit's LocalExecutor.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import io
import itertools
import math
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.runfolder import (
    RunFolderLocked,
    RunLock,
    UnsafePathError,
    WriteError,
    check_folder,
    one_line,
    open_append,
    read_json,
    summary_member_steps,
    write_json_atomic,
)

STATE_NAME = "sweep_state.json"
LOG_DIR = ".logs"
# Chosen by the sweep for each run; a spec may not set them (progress: the sweep's runs write
# to log files, always with --no-progress).
MANAGED = frozenset({"agent", "env", "seed", "run_dir", "exp_name", "resume", "preset", "progress"})
# Flags passed again on --resume (the others are read back from the run folder; hooks never
# are: a resumed run must be given its hooks again).
RESUME_FLAGS = ("total_steps", "max_minutes", "eval_episodes", "eval_greedy", "num_threads",
                "reshape_reward", "preprocess_obs")  # fmt: skip
# Runs of one sweep at most: the state file and the live table hold every run.
MAX_RUNS = 10_000
# Command lines checked by train's parser before a sweep starts (all of them in a grid this
# small; else each agent x env with every grid value once, and each run as it comes up).
CHECK_ALL = 128
# Seeds are < 2**30 (engine.args.RunArgs: envpool's int32 env seeds are derived from it).
MAX_SEED = 2**30
SPEC_FIELDS = ("name", "agents", "envs", "seeds", "set", "grid", "slots", "cpus", "devices",
               "device_env", "retries", "root")  # fmt: skip


class SpecError(ValueError):
    """A bad sweep spec; the message names the field."""


@dataclass(frozen=True)
class Run:
    """One run of the grid."""

    name: str
    agent: str
    env: str
    seed: int
    preset: str | None = None
    flags: tuple[tuple[str, Any], ...] = ()

    def run_dir(self, sweep_dir: Path) -> Path:
        return sweep_dir / self.name

    @property
    def total_steps(self) -> int | None:
        return dict(self.flags).get("total_steps")


@dataclass(frozen=True)
class Entry:
    """One `agents` entry of a spec: its run-name label, agent, preset and flags (the spec's
    `set`, then the entry's own `set`)."""

    label: str
    agent: str
    preset: str | None
    flags: tuple[tuple[str, Any], ...]


class RunGrid(Sequence):
    """The runs of a sweep, agents × envs × grid points × seeds, made one at a time when
    indexed or iterated: a grid of 10**6 points costs nothing until its runs are used.
    Order: by agent entry, then env, then grid point (the last grid key fastest), then seed."""

    def __init__(self, entries, envs, grid, seeds):
        self.entries = tuple(entries)
        self.envs = tuple(envs)
        self.grid = tuple((key, tuple(values)) for key, values in grid)
        self.seeds = tuple(seeds)
        self.points = math.prod(len(values) for _, values in self.grid)

    def __len__(self) -> int:
        return len(self.entries) * len(self.envs) * self.points * len(self.seeds)

    def shape(self) -> str:
        """'2 agents × 3 envs × 4 grid points × 5 seeds'."""
        parts = [(len(self.entries), "agent"), (len(self.envs), "env"),
                 (self.points, "grid point"), (len(self.seeds), "seed")]  # fmt: skip
        return " × ".join(f"{n:,} {word}{'' if n == 1 else 's'}" for n, word in parts)

    def run(self, entry: Entry, env: str, combo: tuple, seed: int) -> Run:
        flags = dict(entry.flags)
        flags.update((key, value) for (key, _), value in zip(self.grid, combo, strict=True))
        suffix = "".join(f"-{k}={_slug(v)}" for (k, _), v in zip(self.grid, combo, strict=True))
        # A namespaced id (MinAtar/Breakout-v1, ALE/Pong-v5) names one folder, not two.
        name = f"{entry.label}-{_env_slug(env)}-seed{seed}{suffix}"
        return Run(name, entry.agent, env, seed, entry.preset, tuple(flags.items()))

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"run {index} of a grid of {n}")
        index %= n
        rest, s = divmod(index, len(self.seeds))
        rest, point = divmod(rest, self.points)
        e, v = divmod(rest, len(self.envs))
        combo = []
        for _, values in reversed(self.grid):
            point, i = divmod(point, len(values))
            combo.append(values[i])
        return self.run(self.entries[e], self.envs[v], tuple(reversed(combo)), self.seeds[s])

    def __iter__(self):
        values = [v for _, v in self.grid]
        for entry, env in itertools.product(self.entries, self.envs):
            for combo in itertools.product(*values):
                for seed in self.seeds:
                    yield self.run(entry, env, combo, seed)

    def cover(self) -> list[Run]:
        """Runs that between them use each agent entry with each env, and every grid value
        (the other keys at their first value), with the first seed."""
        out = []
        first = tuple(values[0] for _, values in self.grid)
        for entry, env in itertools.product(self.entries, self.envs):
            out.append(self.run(entry, env, first, self.seeds[0]))
            for k, (_, values) in enumerate(self.grid):
                for value in values[1:]:
                    combo = (*first[:k], value, *first[k + 1 :])
                    out.append(self.run(entry, env, combo, self.seeds[0]))
        return out


@dataclass(frozen=True)
class Sweep:
    name: str
    runs: Sequence[Run]
    slots: int = 1
    cpus: tuple[tuple[int, ...], ...] | None = None
    devices: tuple[str, ...] | None = None
    device_env: str = "CUDA_VISIBLE_DEVICES"
    retries: int = 0
    root: str = "runs"
    # Runs whose command lines were not all checked up front: check each as it comes up.
    check_each: bool = False

    @property
    def folder(self) -> Path:
        return Path(self.root) / self.name

    def slot_env(self, slot: int, environ=os.environ, one_machine: bool = True) -> dict[str, str]:
        """Environment variables of a process in `slot`: the device it sees (`device_env`),
        and, where the slots run on `one_machine` and k > 1 of them see the same devices (the
        same `devices` entry, or all of them without `devices`), a share 0.9 / k of an
        accelerator's memory (`XLA_PYTHON_CLIENT_MEM_FRACTION`; JAX takes 0.75 of it per
        process otherwise, so a second process runs out), unless the sweep's own environment
        sets JAX's memory allocation. No effect on the CPU."""
        env = {}
        entry = self.devices[slot % len(self.devices)] if self.devices else None
        if entry is not None:
            env[self.device_env] = entry
        sharing = sum(
            1 for s in range(self.slots)
            if entry is None or self.devices[s % len(self.devices)] == entry
        )  # fmt: skip
        own = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_PREALLOCATE",
               "XLA_PYTHON_CLIENT_ALLOCATOR")  # fmt: skip
        if one_machine and sharing > 1 and not any(name in environ for name in own):
            env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{0.9 / sharing:.3f}"
        return env

    def slot_cpus(self, slot: int) -> tuple[int, ...] | None:
        return self.cpus[slot % len(self.cpus)] if self.cpus else None


# ----------------------------------------------------------------------------- the spec


def load_spec(path: str | Path) -> dict:
    """The raw spec dict of a YAML (.yaml/.yml) or Python (.py, defining SPEC) file."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"spec file {path} does not exist")
    if path.suffix == ".py":  # the user's own file, run as the user asked
        try:
            data = runpy.run_path(str(path)).get("SPEC")
        except Exception as err:  # its failure, whatever it is: one line
            reason = type(err).__name__ + (f": {one_line(err)}" if str(err).strip() else "")
            raise SpecError(f"{path}: running it failed: {reason}") from None
        if data is None:
            raise SpecError(f"{path}: defines no SPEC dict")
    else:
        import yaml

        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise SpecError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else err
            raise SpecError(f"{path}: cannot be read: {reason}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: the spec must be a mapping of fields, got {type(data).__name__}")
    data.setdefault("name", path.stem)
    return data


def _need(ok: bool, where: str, message: str):
    if not ok:
        raise SpecError(f"{where}: {message}")


def _scalar(value) -> bool:
    return isinstance(value, bool | int | float | str) or value is None


def _check_overrides(values, where: str, agent_fields: set[str] | None) -> dict:
    _need(isinstance(values, dict), where, f"must be a mapping of flag: value, got {values!r}")
    from engine.args import RunArgs

    run_fields = {f.name for f in dataclasses.fields(RunArgs)}
    for key, value in values.items():
        key_where = f"{where}.{key}"
        _need(isinstance(key, str), where, f"flag names must be strings, got {key!r}")
        name = key.replace("-", "_")
        _need(name not in MANAGED, key_where, "is chosen by the sweep (use agents/envs/seeds)")
        if agent_fields is not None:
            _need(
                name in run_fields or name in agent_fields,
                key_where,
                "is neither a run option nor a flag of this agent's config",
            )
        ok = _scalar(value) or (isinstance(value, list) and all(_scalar(v) for v in value))
        _need(ok, key_where, f"must be a number, string, bool or list of them, got {value!r}")
    return {k.replace("-", "_"): v for k, v in values.items()}


def _seeds(value) -> list[int]:
    if type(value) is int:
        _need(1 <= value <= 10_000, "seeds", f"must be a count in [1, 10000], got {value}")
        return list(range(value))
    ok = isinstance(value, list) and value and all(type(s) is int for s in value)
    _need(bool(ok), "seeds", f"must be a count or a list of seeds, got {value!r}")
    bad = [s for s in value if not 0 <= s < MAX_SEED]
    _need(not bad, "seeds", f"must be in [0, 2**30), got {bad[0]}" if bad else "")
    _need(len(set(value)) == len(value), "seeds", f"has duplicates: {value}")
    return list(value)


def _cpus(value, slots: int) -> tuple[tuple[int, ...], ...] | None:
    if value is None or value is False or value == "none":
        return None
    available = sorted(os.sched_getaffinity(0))
    if value is True or value == "auto":  # every core used, no core shared unevenly
        n = len(available)
        if slots >= n:  # one core each, in turn
            return tuple((available[i % n],) for i in range(slots))
        bounds = [round(i * n / slots) for i in range(slots + 1)]
        return tuple(tuple(available[bounds[i] : bounds[i + 1]]) for i in range(slots))
    ok = isinstance(value, list) and value and all(isinstance(g, list) and g for g in value)
    _need(bool(ok), "cpus", f"must be 'auto', 'none' or a list of core lists, got {value!r}")
    for i, group in enumerate(value):
        bad = [c for c in group if type(c) is not int or c not in available]
        _need(not bad, f"cpus[{i}]", f"{bad} not among this process's cores {available}")
    return tuple(tuple(g) for g in value)


def _slug(value) -> str:
    text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
    return "".join(c if c.isalnum() or c in ".,_+" else "_" for c in text)


def _env_slug(env: str) -> str:
    return env.replace("/", "-")


def parse_spec(data: dict, validate: bool = True) -> Sweep:
    """The Sweep of a raw spec dict. A bad field is a one-line SpecError naming it
    (`agents[1]`, `set.learning_rate`, ...). An optional field that is None is left out.
    `validate`: also parse runs' command lines with experiments.train's parser, so a bad
    value fails before anything runs: every run of a grid of up to `CHECK_ALL`, else the
    `RunGrid.cover` (at most `CHECK_ALL` of it), and the sweep checks each run as it comes
    up (`Sweep.check_each`). The grid is not expanded: this takes the same time for 10 runs
    as for 10**6."""
    from agents.core.registry import get_agent

    _need(isinstance(data, dict), "spec", f"must be a mapping of fields, got {data!r}")
    required = ("name", "agents", "envs")
    data = {k: v for k, v in data.items() if v is not None or k in required}
    unknown = sorted(set(data) - set(SPEC_FIELDS), key=str)
    _need(
        not unknown,
        str(unknown[0]) if unknown else "",
        f"unknown field; fields: {', '.join(SPEC_FIELDS)}",
    )
    name = data.get("name")
    _need(isinstance(name, str) and name.strip() != "", "name", f"must be a string, got {name!r}")
    _need(
        "/" not in name and name not in (".", ".."), "name", f"must be a folder name, got {name!r}"
    )
    for key in ("agents", "envs"):
        _need(key in data, key, "is missing")
        value = data[key]
        _need(isinstance(value, list) and value, key, f"must be a non-empty list, got {value!r}")
    common = _check_overrides(data.get("set", {}), "set", None)
    grid = data.get("grid", {})
    _need(isinstance(grid, dict), "grid", f"must be a mapping of flag: [values], got {grid!r}")
    for key, values in grid.items():
        _need(isinstance(key, str), "grid", f"flag names must be strings, got {key!r}")
        _need(
            isinstance(values, list) and values,
            f"grid.{key}",
            f"must be a non-empty list, got {values!r}",
        )
        slugs: dict[str, Any] = {}
        for j, value in enumerate(values):
            ok = _scalar(value) or (isinstance(value, list) and all(map(_scalar, value)))
            _need(
                ok,
                f"grid.{key}[{j}]",
                f"must be a number, string, bool or list of them, got {value!r}",
            )
            slug = _slug(value)  # a repeated value too: two runs in one folder
            _need(
                slug not in slugs,
                f"grid.{key}",
                f"values {slugs.get(slug)!r} and {value!r} make the same run name",
            )
            slugs[slug] = value
    # flag spelling, as in `set`: total-steps is total_steps (the resume logic reads it)
    named = {key.replace("-", "_"): key for key in grid}
    _need(len(named) == len(grid), "grid", "names one flag twice (with '-' and '_')")
    grid = {name: grid[key] for name, key in named.items()}
    slots = data.get("slots", 1)
    _need(type(slots) is int and slots >= 1, "slots", f"must be an integer >= 1, got {slots!r}")
    retries = data.get("retries", 0)
    _need(
        type(retries) is int and retries >= 0,
        "retries",
        f"must be an integer >= 0, got {retries!r}",
    )
    devices = data.get("devices")
    if devices is not None:
        _need(
            isinstance(devices, list) and devices,
            "devices",
            f"must be a non-empty list, got {devices!r}",
        )
        for i, d in enumerate(devices):
            ok = (type(d) is int and d >= 0) or (isinstance(d, str) and d.strip() != "")
            _need(ok, f"devices[{i}]", f"must be a device index or 'i,j,...', got {d!r}")
        devices = tuple(str(d) for d in devices)
    device_env = data.get("device_env", "CUDA_VISIBLE_DEVICES")
    _need(
        isinstance(device_env, str) and device_env.isidentifier(),
        "device_env",
        f"not a variable name: {device_env!r}",
    )
    root = data.get("root", "runs")
    _need(isinstance(root, str) and root.strip() != "", "root", f"must be a folder, got {root!r}")
    seeds = _seeds(data.get("seeds", 1))
    for i, env in enumerate(data["envs"]):
        _need(
            isinstance(env, str) and env.strip() != "",
            f"envs[{i}]",
            f"must be an env id, got {env!r}",
        )
    env_slugs = [_env_slug(env) for env in data["envs"]]
    _need(len(set(env_slugs)) == len(env_slugs), "envs", f"has duplicates: {data['envs']}")

    entries: list[Entry] = []
    for i, entry in enumerate(data["agents"]):
        where = f"agents[{i}]"
        if isinstance(entry, str):
            entry = {"agent": entry}
        _need(
            isinstance(entry, dict) and isinstance(entry.get("agent"), str),
            where,
            f"must be a name or {{agent: NAME, ...}}, got {entry!r}",
        )
        bad = sorted(set(entry) - {"agent", "preset", "set", "label"}, key=str)
        _need(
            not bad,
            f"{where}.{bad[0] if bad else ''}",
            "unknown field; fields: agent, preset, set, label",
        )
        try:
            spec = get_agent(entry["agent"])
        except ValueError as err:
            raise SpecError(f"{where}.agent: {err}") from None
        preset = entry.get("preset")
        if preset is not None:
            _need(isinstance(preset, str), f"{where}.preset", f"must be a name, got {preset!r}")
            try:
                spec.split_preset(preset)
            except ValueError as err:
                raise SpecError(f"{where}.preset: {err}") from None
        fields = {f.name for f in dataclasses.fields(spec.config_cls)}
        own = _check_overrides(entry.get("set") or {}, f"{where}.set", fields)
        _check_overrides(common, "set", fields)
        _check_overrides({k: v[0] for k, v in grid.items()}, "grid", fields)
        label = spec.name if entry.get("label") is None else entry["label"]
        _need(
            isinstance(label, str) and label.strip() != "" and "/" not in label,
            f"{where}.label",
            f"must be a name, got {label!r}",
        )
        entries.append(Entry(label, spec.name, preset, tuple({**common, **own}.items())))
    # Run names are <label>-<env>-seed<k>[-<grid values>]: distinct labels, envs and grid
    # values (checked above) make distinct names, unless a label and an env run together.
    prefixes: dict[str, str] = {}
    for entry, env in itertools.product(entries, env_slugs):
        other = prefixes.setdefault(f"{entry.label}-{env}", entry.label)
        if other != entry.label or sum(e.label == entry.label for e in entries) > 1:
            raise SpecError(
                f"agents: two entries make the same run {entry.label}-{env}-seed..; "
                "give them a label"
            )
    runs = RunGrid(entries, data["envs"], grid.items(), seeds)
    sweep = Sweep(
        name, runs, slots, _cpus(data.get("cpus"), slots), devices, device_env, retries, root
    )
    return check_sweep(sweep) if validate else sweep


def check_sweep(sweep: Sweep) -> Sweep:
    """`sweep` once train's parser accepts its runs' command lines (a SpecError naming the
    first run it refuses otherwise): all of them in a grid of up to `CHECK_ALL` runs, else
    the grid's cover (at most `CHECK_ALL` of it), and the sweep returned checks each run as
    it comes up (`check_each`)."""
    runs = sweep.runs
    check_each = len(runs) > CHECK_ALL
    cover = runs.cover() if isinstance(runs, RunGrid) else list(runs)
    for run in cover[:CHECK_ALL] if check_each else runs:
        check_run(run)
    return dataclasses.replace(sweep, check_each=check_each)


def check_run(run: Run) -> None:
    """Parse the run's command line with experiments.train's parser (builds nothing)."""
    from engine.args import parse

    printed = io.StringIO()
    try:
        argv = train_argv(run, Path("/nonexistent"), resuming=False)
        # tyro prints its usage errors as a box of text: keep its first line of substance.
        with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(printed):
            parse(argv[argv.index("--agent") :])
    except (ValueError, SystemExit) as err:
        text = str(err).removeprefix("error: ") if isinstance(err, ValueError) else ""
        lines = [line.strip("│| \t") for line in printed.getvalue().splitlines()]
        lines = [
            line
            for line in lines
            if not set(line) <= set("╭╮╰╯─-+= ") and not line.lower().endswith("error")
        ]
        reason = (text.splitlines() or lines or ["bad flags"])[0]
        raise SpecError(f"run {run.name}: {reason}") from None


# ----------------------------------------------------------------------------- a run's state


def flag_args(name: str, value) -> list[str]:
    """`--name value` tokens of one experiments.train flag."""
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return [flag if value else "--no-" + name.replace("_", "-")]
    if value is None:
        return [flag, "None"]
    if isinstance(value, list):
        return [flag, *map(str, value)]
    return [flag, str(value)]


def train_argv(run: Run, run_dir: Path, resuming: bool) -> list[str]:
    """The experiments.train command line of `run` (a fresh start, or `--resume`)."""
    # SWEEP_TRAIN_CMD replaces `python -m experiments.train` (the tests run fake runs with it).
    fake = os.environ.get("SWEEP_TRAIN_CMD")
    argv = fake.split() if fake else [sys.executable, "-m", "experiments.train"]
    if resuming:
        argv += ["--resume", str(run_dir)]
        for key, value in run.flags:
            if key in RESUME_FLAGS:
                argv += flag_args(key, value)
    else:
        argv += ["--agent", run.agent, "--env", run.env, "--seed", str(run.seed)]
        argv += ["--run-dir", str(run_dir)]
        if run.preset:
            argv += ["--preset", run.preset]
        for key, value in run.flags:
            argv += flag_args(key, value)
    return [*argv, "--no-progress"]


def run_state(
    run_dir: Path, problems: list[str] | None = None, total_steps: int | None = None
) -> str:
    """'done' (summary.json says the run reached its total_steps, and the spec's
    `total_steps` if given: a spec that raises it resumes the run), 'partial' (a run was
    started there: resume it) or 'new'. A damaged summary.json or config.json makes a run
    not done; what is wrong (file and field, one line) is appended to `problems`."""
    if (run_dir / "summary.json").is_file():
        try:
            if reached_total(run_dir, total_steps):
                return "done"
        except ValueError as err:
            if problems is not None:
                problems.append(str(err))
    if (run_dir / "config.json").exists() or (run_dir / "checkpoints").exists():
        return "partial"
    return "new"


def reached_total(run_dir: Path, total_steps: int | None = None) -> bool:
    """Whether the run's summary.json says it trained its config's total_steps (and
    `total_steps`, if given), however it stopped (a stop request in its last iteration
    still ends a whole run); a one-line ValueError naming the file and field when one it
    needs is damaged."""
    path = run_dir / "summary.json"
    summary = read_json(path, "summary")
    stopped = summary.get("stopped_by")
    if not isinstance(stopped, str):
        raise ValueError(f"summary {path}: stopped_by must be a string, got {stopped!r}")
    steps = summary_member_steps(summary, path)  # per member, as total_steps
    if steps is None:
        raise ValueError(f"summary {path}: env_steps is missing")
    path = run_dir / "config.json"
    config = read_json(path, "run config")
    block = "run" if "run" in config else "args"  # `args`: run folders of early versions
    options = config.get(block)
    if not isinstance(options, dict):
        raise ValueError(f"run config {path}: {block} must be an object, got {options!r}")
    total = options.get("total_steps")
    if type(total) is not int or total < 1:
        raise ValueError(
            f"run config {path}: {block}.total_steps must be an integer >= 1, got {total!r}"
        )
    return steps >= max(total, total_steps or 0)


def folder_busy(run_dir: Path) -> bool:
    """Whether a live process holds the run folder's lock (a run of an earlier sweep
    that is still stopping)."""
    if not (run_dir / ".lock").exists():
        return False
    try:
        RunLock(run_dir).acquire().close()
    except RunFolderLocked:
        return True
    return False


def latest_metrics(run_dir: Path) -> dict:
    """The last complete row of metrics.csv ({} if none), as strings."""
    path = run_dir / "metrics.csv"
    if not path.is_file():  # none yet, or not a regular file (a FIFO would block the read)
        return {}
    try:
        with open(path, "rb") as f:
            header = f.readline().decode(errors="replace").strip().split(",")
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 8192))
            lines = f.read().decode(errors="replace").split("\n")
    except OSError:
        return {}
    rows = [line for line in lines[:-1] if line and not line.startswith(header[0] + ",")]
    if not rows:
        return {}
    values = rows[-1].split(",")
    return dict(zip(header, values, strict=False)) if len(values) == len(header) else {}


# ----------------------------------------------------------------------------- launching


_PR_SET_PDEATHSIG = 1


def _child_setup(cpus: tuple[int, ...] | None):
    """Runs in the child before exec: SIGTERM when the sweep dies; pin to `cpus`."""

    def setup():
        os.setpgrp()  # Ctrl-C in the terminal reaches the sweep, which stops the runs itself
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):  # not Linux: runs outlive a killed sweep
            pass
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


@dataclass
class Launch:
    run: Run
    slot: int
    mode: str
    proc: Any
    started: float
    log: Path


def check_local_devices(sweep: Sweep, environ) -> None:
    """A local sweep's `devices` are ids as the driver numbers them, given to each slot in
    `device_env`: where this process's own `device_env` already narrows the devices, each
    one must be among those (a SpecError naming the first that is not)."""
    parent = environ.get(sweep.device_env, "").strip()
    if not sweep.devices or not parent:
        return
    allowed = {d.strip() for d in parent.split(",")}
    for i, entry in enumerate(sweep.devices):
        outside = [d.strip() for d in entry.split(",") if d.strip() not in allowed]
        if outside:
            raise SpecError(
                f"devices[{i}]: {','.join(outside)} is not among this process's "
                f"{sweep.device_env}={parent} (slots get the ids as the driver numbers them)"
            )


class LocalBackend:
    """Runs go to `slots` child processes of this one."""

    def __init__(self, sweep: Sweep):
        self.sweep = sweep

    def start(self, argv: list[str], slot: int, log: Path):
        env = {**os.environ, **self.sweep.slot_env(slot), "PYTHONUNBUFFERED": "1"}
        with open_append(log, self.sweep.folder, binary=True) as out:  # never through a link
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_child_setup(self.sweep.slot_cpus(slot)),
            )

    @staticmethod
    def poll(proc) -> int | None:
        return proc.poll()

    @staticmethod
    def pid(proc) -> int | str:
        return proc.pid

    @staticmethod
    def stop(proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)


class SubmititJob:
    """The callable submitit runs on a node: one experiments.train process, started afresh
    or resumed according to the run folder at the time it starts, so a requeued job
    continues where the last one stopped (`checkpoint` asks submitit to requeue on
    preemption or time-out; train's SIGTERM handling has written a checkpoint by then)."""

    def __init__(
        self, argv_fresh: list[str], argv_resume: list[str], run_dir: str, env: dict,
        total_steps: int | None = None,
    ):  # fmt: skip
        self.argv_fresh, self.argv_resume = argv_fresh, argv_resume
        self.run_dir, self.env, self.total_steps = run_dir, env, total_steps

    def __call__(self) -> int:
        state = run_state(Path(self.run_dir), total_steps=self.total_steps)
        if state == "done":
            return 0
        argv = self.argv_resume if state == "partial" else self.argv_fresh
        return subprocess.run(argv, env={**os.environ, **self.env}, check=False).returncode

    def checkpoint(self, *args, **kwargs):
        import submitit

        return submitit.helpers.DelayedSubmission(self)


class SubmititBackend:
    """Runs go to SLURM through submitit (or its LocalExecutor, `local=True`); `slots`
    bounds the jobs queued at once. Each job's stdout/stderr is submitit's log folder,
    `runs/<sweep>/.submitit/<sweep process>-<random>/`, made afresh by each sweep process
    when it submits its first job: submitit unpickles the results it finds there, so it never
    reads a folder that a downloaded sweep folder brought along (a planted pickle would run
    code). `.submitit/` must be a real folder."""

    def __init__(self, sweep: Sweep, local: bool = False, parameters: dict | None = None):
        import submitit

        self.sweep = sweep
        self._make = submitit.LocalExecutor if local else submitit.AutoExecutor
        self._local = local  # SLURM jobs get devices of their own
        self._parameters = dict(parameters or {})
        self._executor = None
        with tempfile.TemporaryDirectory() as scratch:  # the parameters, checked up front
            try:
                self._make(folder=scratch).update_parameters(**self._parameters)
            except (NameError, ValueError, TypeError) as err:
                raise SpecError(f"--slurm: {' '.join(str(err).split())}") from None

    @property
    def executor(self):
        if self._executor is None:
            logs = self.sweep.folder / ".submitit"
            check_folder(logs, self.sweep.folder, link_ok=False)
            logs.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=logs))
            self._executor = self._make(folder=folder)
            self._executor.update_parameters(**self._parameters)
        return self._executor

    def start_job(self, run: Run, slot: int):
        run_dir = run.run_dir(self.sweep.folder)
        job = SubmititJob(
            train_argv(run, run_dir, False),
            train_argv(run, run_dir, True),
            str(run_dir),
            self.sweep.slot_env(slot, one_machine=self._local),
            run.total_steps,
        )
        return self.executor.submit(job)

    @staticmethod
    def poll(job) -> int | None:
        if not job.done():
            return None
        try:
            return int(job.result())
        except Exception:
            return 1

    @staticmethod
    def pid(job) -> int | str:
        return job.job_id

    @staticmethod
    def stop(job):
        job.cancel(check=False)


# ----------------------------------------------------------------------------- the scheduler


def check_state(state: dict, path: Path) -> dict:
    """`state` (a sweep_state.json) if every field the scheduler reads has its type: `runs`
    an object of run records (objects), each record's `launches` a list of objects and
    its `status` a string, `sweeps` a list. Else a one-line ValueError naming the field."""

    def need(ok: bool, where: str, what: str, value):
        if not ok:
            raise ValueError(f"sweep state {path}: {where} must be {what}, got {value!r}")

    runs = state.get("runs", {})
    need(isinstance(runs, dict), "runs", "an object of run records", runs)
    for name, rec in runs.items():
        need(isinstance(rec, dict), f"runs.{name}", "an object", rec)
        launches = rec.get("launches", [])
        need(isinstance(launches, list), f"runs.{name}.launches", "a list", launches)
        for i, launch in enumerate(launches):
            need(isinstance(launch, dict), f"runs.{name}.launches[{i}]", "an object", launch)
        status = rec.get("status", "")
        need(isinstance(status, str), f"runs.{name}.status", "a string", status)
    sweeps = state.get("sweeps", [])
    need(isinstance(sweeps, list), "sweeps", "a list", sweeps)
    return state


@dataclass
class Scheduler:
    """Runs a sweep's pending runs on its slots; see the module docstring."""

    sweep: Sweep
    backend: Any = None
    poll_s: float = 1.0
    live: bool | None = None  # a rich live table (default: when stdout is a terminal)
    state: dict = field(default_factory=dict)

    def __post_init__(self):
        self.backend = self.backend or LocalBackend(self.sweep)
        self.folder = self.sweep.folder
        self.state_path = self.folder / STATE_NAME

    # state file
    def _load_state(self) -> dict:
        """The state file's records; a damaged file is set aside (a warning line names the
        field) and a new one started: the run folders, not this file, decide what runs."""
        if not self.state_path.exists():
            return {}
        try:
            return check_state(read_json(self.state_path, "sweep state"), self.state_path)
        except ValueError as err:
            aside = self.state_path.with_name(STATE_NAME + ".damaged")
            n = 1
            while aside.exists():
                aside = self.state_path.with_name(f"{STATE_NAME}.damaged-{n}")
                n += 1
            os.replace(self.state_path, aside)
            print(f"warning: {err}; set aside as {aside}, starting a new state file",
                  file=sys.stderr)  # fmt: skip
            return {}

    def _save(self):
        write_json_atomic(self.state_path, self.state)

    def _record(self, run: Run) -> dict:
        rec = self.state["runs"].setdefault(run.name, {})
        rec.setdefault("launches", [])
        return rec

    def run(self) -> dict:
        """Run every pending run; returns {run name: final status}."""
        big = too_big(self.sweep)
        if big:
            raise SystemExit(f"error: {big}")
        try:  # --root a file, a read-only place, .logs a file: one line
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / LOG_DIR).mkdir(exist_ok=True)
        except OSError as err:
            where = err.filename or self.folder
            raise SystemExit(
                f"error: sweep {self.sweep.name}: cannot make {where}: {err.strerror or err}"
            ) from None
        try:
            lock = RunLock(self.folder).acquire()  # one sweep process per sweep folder
        except (RunFolderLocked, UnsafePathError) as err:
            raise SystemExit(f"error: sweep {self.sweep.name}: {err}") from None
        try:
            return self._run()
        except (UnsafePathError, WriteError) as err:  # a link in the sweep folder, a full disk
            raise SystemExit(f"error: sweep {self.sweep.name}: {err}") from None
        finally:
            lock.close()

    def _run(self) -> dict:
        self.state = self._load_state()
        self.state.update(name=self.sweep.name, runs=self.state.get("runs", {}))
        self.state["sweeps"] = [
            *self.state.get("sweeps", []),
            {"pid": os.getpid(), "started": time.time()},
        ]
        pending: list[Run] = []
        for run in self.sweep.runs:
            rec = self._record(run)
            rec.update(agent=run.agent, env=run.env, seed=run.seed)
            problems: list[str] = []
            state = run_state(run.run_dir(self.folder), problems, run.total_steps)
            for problem in problems:
                print(f"warning: {problem}; so the run is not done", file=sys.stderr)
            if state == "done":
                rec["status"] = "done"
            else:
                rec["status"] = "queued"
                pending.append(run)
        self._save()
        tries = {r.name: 0 for r in pending}
        checked: set[str] = set()
        free = list(range(self.sweep.slots))
        active: dict[str, Launch] = {}
        stop = _StopFlag()
        display = _Display(self)
        try:
            with stop, display:
                while (pending or active) and not stop.requested:
                    for name, launch in list(active.items()):
                        rc = self.backend.poll(launch.proc)
                        if rc is None:
                            continue
                        del active[name]
                        free.append(launch.slot)
                        status = self._finished(launch, rc)
                        # Only failures: a run that stopped cleanly (its own
                        # --max-minutes, a stop request) stays stopped.
                        if status == "failed" and tries[name] < self.sweep.retries:
                            tries[name] += 1
                            pending.append(launch.run)
                            self._record(launch.run)["status"] = "queued"
                    for run in list(pending):
                        if not free:
                            break
                        run_dir = run.run_dir(self.folder)
                        try:  # a run folder linked out of the sweep folder is not the sweep's,
                            check_folder(run_dir, self.folder)  # nor is its lock
                        except UnsafePathError as err:
                            pending.remove(run)
                            self._refused(run, str(err))
                            continue
                        if folder_busy(run_dir):  # a run of a killed sweep still stopping
                            self._record(run)["status"] = "waiting"
                            continue
                        pending.remove(run)
                        if self.sweep.check_each and run.name not in checked:
                            try:
                                check_run(run)
                            except SpecError as err:
                                self._refused(run, str(err))
                                continue
                            checked.add(run.name)
                        active[run.name] = self._start(run, free.pop(0))
                    self._save()
                    display.update(active)
                    time.sleep(self.poll_s)
                if active:
                    print(
                        f"stopping {len(active)} run(s); they checkpoint first "
                        "(stop again to abort them: they resume from their last checkpoint)",
                        file=sys.stderr,
                    )
                for launch in active.values():
                    self.backend.stop(launch.proc)
                asked = 1  # stop requests passed on to the runs
                for launch in active.values():
                    while self.backend.poll(launch.proc) is None:
                        if stop.count > asked:  # a second Ctrl-C / SIGTERM: train aborts
                            asked = stop.count
                            print("aborting the runs", file=sys.stderr)
                            for other in active.values():
                                self.backend.stop(other.proc)
                        time.sleep(0.2)
                    self._finished(launch, self.backend.poll(launch.proc), asked > 1)
                self._save()
        finally:
            self._save()
        display.final()
        return {run.name: self.state["runs"][run.name]["status"] for run in self.sweep.runs}

    def _refused(self, run: Run, error: str):
        """A run whose command line train's parser refuses: never started."""
        rec = self._record(run)
        rec.update(status="invalid", error=error)
        print(f"invalid: {error}; the others go on", file=sys.stderr)

    def _start(self, run: Run, slot: int) -> Launch:
        run_dir = run.run_dir(self.folder)
        mode = "resume" if run_state(run_dir, total_steps=run.total_steps) == "partial" else "fresh"
        log = self.folder / LOG_DIR / f"{run.name}.log"
        if hasattr(self.backend, "start_job"):
            proc = self.backend.start_job(run, slot)
        else:
            proc = self.backend.start(train_argv(run, run_dir, mode == "resume"), slot, log)
        rec = self._record(run)
        rec["status"] = "running"
        rec["launches"].append(
            {"mode": mode, "slot": slot, "pid": self.backend.pid(proc), "started": time.time()}
        )
        return Launch(run, slot, mode, proc, time.time(), log)

    def _finished(self, launch: Launch, rc: int, aborted: bool = False) -> str:
        rec = self._record(launch.run)
        state = run_state(launch.run.run_dir(self.folder), total_steps=launch.run.total_steps)
        status = "done" if state == "done" else "stopped" if rc == 0 or aborted else "failed"
        rec["launches"][-1].update(rc=rc, ended=time.time())
        rec["status"] = status
        if status == "failed":
            rec["error"] = _last_line(launch.log) or f"exit code {rc}"
            print(f"run {launch.run.name} failed (exit {rc}): {rec['error']}", file=sys.stderr)
        return status


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][-300:] if lines else ""


class _StopFlag:
    """SIGTERM / Ctrl-C: stop launching, ask the runs to checkpoint and stop, then exit; a
    second one asks them again, which aborts them (train's convention)."""

    requested = False
    count = 0

    def __enter__(self):
        self._old = {s: signal.signal(s, self._on) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc):
        for s, handler in self._old.items():
            signal.signal(s, handler)

    def _on(self, signum, frame):
        self.requested = True
        self.count += 1


class _Display:
    """The live table (rich) of status, env steps and latest return per run; on a
    non-terminal, one line per start and end instead."""

    def __init__(self, scheduler: Scheduler):
        self.s = scheduler
        self.live_on = sys.stdout.isatty() if scheduler.live is None else scheduler.live
        self._live = None
        self._shown: dict[str, str] = {}

    def table(self, active: dict[str, Launch] | None = None):
        from rich.table import Table

        active = active or {}
        table = Table(title=f"sweep {self.s.sweep.name} ({self.s.folder})")
        for col in ("run", "status", "launches", "env steps", "return", "steps/s", "slot"):
            table.add_column(col, justify="left" if col in ("run", "status") else "right")
        for run in self.s.sweep.runs:
            rec = self.s.state["runs"].get(run.name, {})
            row = latest_metrics(run.run_dir(self.s.folder))
            steps = _steps(row.get("env_steps"), run.total_steps)
            launch = active.get(run.name)
            table.add_row(
                run.name,
                rec.get("status", "?"),
                str(len(rec.get("launches", []))),
                steps,
                _fmt(row.get("return_mean")),
                _fmt(row.get("sps"), 0),
                "" if launch is None else str(launch.slot),
            )
        return table

    def __enter__(self):
        if self.live_on:
            from rich.live import Live

            self._live = Live(self.table(), refresh_per_second=1, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc):
        if self._live is not None:
            self._live.update(self.table())
            self._live.__exit__(*exc)

    def update(self, active: dict[str, Launch]):
        if self._live is not None:
            self._live.update(self.table(active))
            return
        for name, rec in self.s.state["runs"].items():
            status = rec.get("status")
            if self._shown.get(name) != status:
                self._shown[name] = status
                row = latest_metrics(self.s.folder / name)
                ret = f" return {_fmt(row.get('return_mean'))}" if row else ""
                print(f"[{time.strftime('%H:%M:%S')}] {name}: {status}{ret}", flush=True)

    def final(self):
        if self._live is None:
            from rich.console import Console

            Console(width=140).print(self.table())
        counts: dict[str, int] = {}
        for run in self.s.sweep.runs:
            status = self.s.state["runs"][run.name]["status"]
            counts[status] = counts.get(status, 0) + 1
        print(
            "sweep "
            + self.s.sweep.name
            + ": "
            + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        )


def _steps(text, total) -> str:
    """'1,000/20,000' from metrics.csv's env_steps cell and the run's total_steps ('' for a
    cell that is not a number)."""
    try:
        done = int(float(text))
    except (TypeError, ValueError, OverflowError):
        return ""
    return f"{done:,}/{total:,}" if type(total) is int else f"{done:,}"


def _fmt(text, digits: int = 1) -> str:
    try:
        return f"{float(text):.{digits}f}"
    except (TypeError, ValueError):
        return ""


# ----------------------------------------------------------------------------- command line


def parse_set(items: list[str], flag: str = "--set") -> dict:
    """`--set k=v` items: YAML scalars (`1e-3`, `true`, `[1, 2]`)."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecError(f"{flag}: expected FLAG=VALUE, got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            reason = str(err).splitlines()[0]
            raise SpecError(f"{flag} {key.strip()}: not a YAML value: {reason}") from None
    return out


def too_big(sweep: Sweep) -> str | None:
    """Why `sweep` is too big to run (more than `MAX_RUNS` runs), or None."""
    n = len(sweep.runs)
    if n <= MAX_RUNS:
        return None
    shape = sweep.runs.shape() if isinstance(sweep.runs, RunGrid) else f"{n:,} runs"
    return (
        f"sweep {sweep.name} has {n:,} runs ({shape}); a sweep runs at most {MAX_RUNS:,} "
        "(its state file and table hold every run): split the grid into several sweeps"
    )


def dry_run(sweep: Sweep) -> dict:
    """Print the grid's size at once, then each run's state and the command line a launch
    would run (`--resume` for a partial run) as it is made (checked first when
    `sweep.check_each`): a grid of any size starts printing at once. Returns
    {name: "invalid"} of the runs train's parser refuses."""
    runs = sweep.runs
    shape = f" ({runs.shape()})" if isinstance(runs, RunGrid) else ""
    refused = {}
    try:
        print(f"sweep {sweep.name}: {len(runs):,} runs{shape} -> {sweep.folder}", flush=True)
        big = too_big(sweep)
        if big:
            print(f"note: running it is refused: {big}", file=sys.stderr)
        for run in runs:
            run_dir = run.run_dir(sweep.folder)
            problems: list[str] = []
            state = run_state(run_dir, problems, run.total_steps)
            for problem in problems:
                print(f"warning: {problem}; so the run is not done", file=sys.stderr)
            if sweep.check_each:
                try:
                    check_run(run)
                except SpecError as err:
                    state, refused[run.name] = "invalid", "invalid"
                    print(f"error: {err}", file=sys.stderr)
            argv = train_argv(run, run_dir, state == "partial")  # what a launch would run
            print(f"{state:8s} {' '.join(argv[3:])}")
        sys.stdout.flush()
    except BrokenPipeError:  # `--dry-run | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return refused


def cli_seeds(text: str) -> int | list[int]:
    """--seeds: a count, or comma-separated seeds."""
    try:
        if "," in text:
            return [int(s) for s in text.split(",") if s.strip()]
        return int(text)
    except ValueError:
        raise SpecError(
            f"--seeds: expected a count or comma-separated seeds, got {text!r}"
        ) from None


def cli_spec(ns) -> dict:
    def split(text):
        return [t.strip() for t in text.split(",") if t.strip()]

    if not ns.agents or not ns.envs:
        raise SpecError("the CLI form needs --agents and --envs (or give a SPEC file)")
    seeds = cli_seeds("1" if ns.seeds is None else ns.seeds)
    data = {"agents": split(ns.agents), "envs": split(ns.envs), "seeds": seeds}
    data["set"] = parse_set(ns.set)
    data["name"] = ns.name or "sweep-" + "-".join(data["agents"])
    return data


def main(argv: list[str] | None = None) -> dict:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m experiments.sweep",
        description="Run a grid of experiments.train runs (agents × envs × seeds × overrides).",
    )
    p.add_argument("spec", nargs="?", help="YAML or Python spec file (see the module docstring)")
    p.add_argument("--agents", help="CLI form: comma-separated agents")
    p.add_argument("--envs", help="CLI form: comma-separated env ids")
    p.add_argument("--seeds", help="a count, or comma-separated seeds (CLI form: default 1; "
                   "with a SPEC: overrides its seeds)")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="FLAG=VALUE",
                   help="CLI form: a train flag for every run (repeatable)")  # fmt: skip
    p.add_argument("--name", help="sweep name (folder under --root); overrides the spec's")
    p.add_argument("--root", help="parent folder of the sweep (default runs)")
    p.add_argument("--slots", type=int, help="runs at a time (overrides the spec)")
    p.add_argument("--cpus", help="'auto' (pin each slot to its share of cores) or 'none'")
    p.add_argument("--retries", type=int, help="resume a failed run up to N times")
    p.add_argument("--backend", choices=("local", "submitit"), default="local")
    p.add_argument("--submitit-local", action="store_true",
                   help="submitit's LocalExecutor instead of SLURM (for testing)")  # fmt: skip
    p.add_argument("--slurm", action="append", default=[], metavar="KEY=VALUE",
                   help="submitit parameter, e.g. slurm_partition=gpu")  # fmt: skip
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print each run's state and the command a launch would run (fresh or --resume)",
    )
    p.add_argument("--no-live", action="store_true", help="no live table (event lines)")
    ns = p.parse_args(argv)
    try:
        if ns.spec and (ns.agents or ns.envs):
            raise SpecError("give a SPEC file or --agents/--envs, not both")
        data = load_spec(ns.spec) if ns.spec else cli_spec(ns)
        if ns.spec and ns.set and isinstance(data.get("set") or {}, dict):
            data["set"] = {**(data.get("set") or {}), **parse_set(ns.set)}
        if ns.spec and ns.seeds is not None:
            data["seeds"] = cli_seeds(ns.seeds)
        for key in ("name", "root", "slots", "cpus", "retries"):
            if getattr(ns, key) is not None:
                data[key] = getattr(ns, key)
        sweep = parse_spec(data, validate=False)
        big = None if ns.dry_run else too_big(sweep)
        if big:  # refused before its command lines are checked: nothing else to say
            raise SpecError(big)
        sweep = check_sweep(sweep)
        backend = None
        if ns.backend != "submitit":  # submitit's options would do nothing
            if ns.submitit_local:
                raise SpecError("--submitit-local needs --backend submitit")
            if ns.slurm:
                raise SpecError("--slurm needs --backend submitit")
            check_local_devices(sweep, os.environ)
        if ns.backend == "submitit":
            backend = SubmititBackend(sweep, ns.submitit_local, parse_set(ns.slurm, "--slurm"))
    except SpecError as err:
        raise SystemExit(f"error: {err}") from None
    if ns.dry_run:
        return dry_run(sweep)
    print(f"sweep {sweep.name}: {len(sweep.runs)} runs, {sweep.slots} slot(s) -> {sweep.folder}")
    live = False if ns.no_live else None
    result = Scheduler(sweep, backend, live=live).run()
    return result


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    statuses = main()
    sys.exit(0 if all(s == "done" for s in statuses.values()) else 1)


__all__ = [
    "Run",
    "RunGrid",
    "Scheduler",
    "SpecError",
    "Sweep",
    "check_run",
    "check_sweep",
    "dry_run",
    "load_spec",
    "main",
    "parse_spec",
    "run_state",
    "train_argv",
]
