"""The training runner: one loop for every agent, written against the agent protocol.

`TrainLoop` drives `agent.train_chunk` with one call per chunk of iterations (as many as
`SyncPace` picks: about one a second, or --iterations-per-sync; one host sync where the
iterations run on the device, one per iteration where the host drives them) and keeps the
counters, the return window and the NaN guard. It counts a chunk's stacked output iteration
by iteration and makes a metrics row every `log_every` iterations (--log-every) and wherever
the runner flushes it (checkpoints, generations, the end): the rows do not depend on how the
iterations were synced, so the same seed and command give the same metrics.csv but for its
timing columns. The benchmarks use it as it is. `PopulationLoop` runs one `TrainLoop` per
member of the agent (a single run is a population of one). `Runner` adds what a training run
needs around it, on one path for single runs and populations: the run folder (exclusive
lock, config.json, metrics.csv + TensorBoard, atomic checksummed checkpoints, resume), the
stop conditions (`--total-steps`, `--max-minutes`, SIGTERM/SIGINT), the evaluation at the
end and summary.json. Nothing here knows an agent by name.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import platform
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path

import jax
import numpy as np

from agents.core.config import ConfigError
from agents.core.parallel import POP, check_divisible, local_replica, make_mesh
from agents.core.registry import get_agent
from engine.args import TrainArgs, hparam_specs
from engine.checkpoint import DAMAGED_PREFIX, Checkpointer
from engine.common import (
    build_agent,
    checkpoint_tree,
    config_json,
    env_options,
    exact_tree,
    restore_checkpoint,
)
from engine.driver import agent_class
from engine.evaluation import eval_feedback, evaluate
from engine.evolution import Evolver, draw_hparams
from engine.population import Population, member_envs
from engine.preflight import check_run
from engine.programs import enable_data_checks
from engine.protocol import ChunkOutput
from engine.runfolder import (
    RunLock,
    check_run_dir_writable,
    check_run_folder_links,
    write_json_atomic,
)
from engine.runlog import LineageLog, RunLogger, last_logged_step, set_aside
from envs import eval_env_seed, make_env, make_eval_env, obs_spec_json, run_env_seed

# Columns the runner writes before the agent's own metric_names.
# lineage.csv (engine.runlog.LineageLog), then the hp_<field> columns.
LINEAGE_COLUMNS = ("env_steps", "generation", "member", "parent", "resampled", "elite", "score")
RUN_COLUMNS = (
    "env_steps", "frames", "iteration", "updates", "iteration_updates", "episodes",
    "return_mean", "length_mean", "sps", "wall_s",
)  # fmt: skip


def member_dir(run_dir: Path, i: int) -> Path:
    """Where member i of a population logs (metrics.csv, config.json, summary.json)."""
    return Path(run_dir) / f"member-{i}"


def member_dirs(run_dir: Path, size: int) -> list[Path]:
    """Where each of `size` members logs: a single run (`size` 1) in the run folder itself."""
    run_dir = Path(run_dir)
    return [member_dir(run_dir, i) for i in range(size)] if size > 1 else [run_dir]


def _progress_to_keep(run_dir: Path, ckpt_dir: Path, folders: list[Path], run) -> str | None:
    """Why a run folder with no checkpoint to restore holds logs worth keeping when it starts
    over (which would truncate them to step 0): its checkpoints were set aside as damaged, it
    ended (every run checkpoints at its end), or it logged past its first checkpoint. None:
    a run cut off before its first checkpoint, whose few logged rows starting over rewrites."""
    damaged = (
        sorted(p.name for p in ckpt_dir.glob(f"{DAMAGED_PREFIX}*")) if ckpt_dir.is_dir() else []
    )
    if damaged:
        return f"its checkpoints were set aside as damaged ({', '.join(damaged)})"
    if (run_dir / "summary.json").is_file():
        return "it has a summary.json (the run ended, and so had a checkpoint)"
    for folder in folders:
        last = last_logged_step(folder / "metrics.csv")
        if last >= run.checkpoint_every:
            return (
                f"{folder / 'metrics.csv'} logs env step {last:,}, past its first checkpoint "
                f"(every {run.checkpoint_every:,})"
            )
    return None


# When a member's hyper-parameters took effect: as --vary drew them, from the start.
DRAWN = {"generation": 0, "env_steps": 0}


def member_config(args: TrainArgs, i: int, size: int, hparams: dict, since: dict) -> dict:
    """member-<i>/config.json: the run's config as member i trains with it. `run.seed` is
    its seed (seed + i) and `agent_config` holds its own values of the fields that vary
    (`hparams`: field -> [P]; `run.vary` keeps the specs they were drawn from). `population`
    repeats those values (`hparams`: field -> value, the float32 the member trains with, in
    its shortest decimal) and says since when it has had them (`since`: the `generation`
    that set them, 0 for --vary's draw, and the per-member `env_steps` it happened at)."""
    values = {k: float(str(np.float32(v[i]))) for k, v in hparams.items()}
    run = dataclasses.replace(args.run, seed=args.run.seed + i)
    data = config_json(TrainArgs(run, args.config))
    data["agent_config"].update(values)
    data["population"] = {"member": i, "of": size, "hparams": values, "since": dict(since)}
    return data


def restored_counters(meta: dict, step: int, size: int, where: str) -> list[Counters]:
    """The counters a checkpoint's metadata holds, one per member (a list of `size`; a single
    run's checkpoints of earlier versions hold one object), each checked: known fields,
    counts integers in [0, 2**53), wall_s and steady_s finite numbers >= 0, env_steps the
    checkpoint's step, steady_steps <= env_steps and steady_s <= wall_s. Else a one-line
    ValueError naming the checkpoint (`where`) and the field: its checksums only prove it is
    as written."""
    saved = meta.get("counters")
    named = isinstance(saved, list)  # entries named counters[i]
    if size == 1 and isinstance(saved, dict):
        saved = [saved]
    elif not isinstance(saved, list) or len(saved) != size:
        want = f"a list of {size}" + (" (or an object)" if size == 1 else "")
        raise ValueError(f"{where}: meta counters must be {want}, got {saved!r:.80}")
    fields = {f.name: f.type for f in dataclasses.fields(Counters)}
    out = []
    for i, entry in enumerate(saved):
        name = f"counters[{i}]" if named else "counters"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: meta {name} must be an object, got {entry!r:.80}")
        unknown = sorted(set(entry) - set(fields))
        if unknown:
            raise ValueError(f"{where}: meta {name} has unknown field(s) {', '.join(unknown)}")
        for key, value in entry.items():
            if key in ("wall_s", "steady_s"):
                ok = isinstance(value, int | float) and not isinstance(value, bool)
                ok = ok and math.isfinite(value) and value >= 0
            else:
                ok = type(value) is int and 0 <= value < 2**53
            if not ok:
                raise ValueError(f"{where}: meta {name}.{key} is out of range: {value!r:.80}")
        counters = Counters(**entry)
        if counters.env_steps != step:
            raise ValueError(
                f"{where}: meta {name}.env_steps {counters.env_steps} is not the checkpoint's "
                f"step {step}"
            )
        # the steady counters are a part of the whole run's (its first iteration left out)
        for part, whole in (("steady_steps", "env_steps"), ("steady_s", "wall_s")):
            if getattr(counters, part) > getattr(counters, whole):
                raise ValueError(
                    f"{where}: meta {name}.{part} {getattr(counters, part)} exceeds its "
                    f"{whole} {getattr(counters, whole)}"
                )
        out.append(counters)
    return out


def restored_windows(meta: dict, size: int, where: str) -> list[dict]:
    """The return windows an --exact-resume checkpoint's metadata holds, one per member:
    {"returns": [float], "lengths": [float]}, lists of finite numbers. Else a one-line
    ValueError naming the checkpoint (`where`)."""
    windows = meta.get("windows")
    if not isinstance(windows, list) or len(windows) != size:
        raise ValueError(f"{where}: meta windows must be a list of {size} objects")
    for i, window in enumerate(windows):
        for name in ("returns", "lengths"):
            values = window.get(name) if isinstance(window, dict) else None
            ok = isinstance(values, list) and all(
                type(v) in (int, float) and math.isfinite(v) for v in values
            )
            if not ok:
                raise ValueError(f"{where}: meta windows[{i}].{name} must be a list of numbers")
    return windows


def _meta_int(value, name: str, where: str) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{where}: meta {name} must be an integer >= 0, got {value!r:.80}")
    return value


def _check_since(since, size: int, where: str) -> None:
    """A checkpoint's `hparams_since`: per member, {generation, env_steps}, each an integer
    >= 0 or null (unknown)."""
    ok = isinstance(since, list) and len(since) == size
    ok = ok and all(isinstance(s, dict) and set(s) == set(DRAWN) for s in since)
    ok = ok and all(v is None or (type(v) is int and v >= 0) for s in since for v in s.values())
    if not ok:
        raise ValueError(
            f"{where}: meta hparams_since must be a list of {size} objects "
            f"{{generation, env_steps}} of integers >= 0 or null, got {since!r:.80}"
        )


class NonFiniteError(RuntimeError):
    pass


@dataclasses.dataclass
class Counters:
    env_steps: int = 0
    iteration: int = 0
    episodes: int = 0
    updates: int = 0
    wall_s: float = 0.0
    # the env steps and seconds of every iteration but the run's first (`TrainLoop.sps`),
    # over every stretch of a resumed run (0 in checkpoints of earlier versions)
    steady_steps: int = 0
    steady_s: float = 0.0


def frames_per_step(env) -> int:
    """Atari agent steps are 4 emulator frames (frame skip)."""
    return 4 if env.spec.is_atari else 1


ROWS_PER_RUN = 200  # --log-every 0: about this many metrics rows over --total-steps


def auto_log_every(total_steps: int) -> int:
    """The env steps between metrics rows of --log-every 0."""
    return max(1, total_steps // ROWS_PER_RUN)


def log_every_iterations(log_every: int, steps_per_iteration: int) -> int:
    """--log-every in whole iterations (rounded up, at least 1)."""
    return max(1, -(-log_every // steps_per_iteration))


@dataclasses.dataclass
class _Since:
    """What a `TrainLoop` counted since its last metrics row."""

    iterations: int = 0
    updates: int = 0
    seconds: float = 0.0
    # metric name -> the iterations' sums, added up exactly (math.fsum) when the row is made:
    # a row's means then do not depend on how its iterations were split between syncs
    sums: dict = dataclasses.field(default_factory=dict)


class SyncPace:
    """How many iterations to run per host sync (`train_chunk`'s count): `fixed` when given
    (--iterations-per-sync), else grown from 1 so that a sync comes about every `target_s`
    seconds (at most 4x more per sync than the last), never more than the agent's
    `max_chunk` nor past `limit` iterations (the next checkpoint, generation or the end)."""

    def __init__(self, max_chunk: int, fixed: int = 0, target_s: float = 1.0):
        self.max_chunk, self.fixed, self.target_s = max_chunk, fixed, target_s
        self.planned = 1

    def count(self, limit: int) -> int:
        planned = self.fixed or self.planned
        if jax.process_count() > 1:  # process 0's pace (and flag), or they would diverge
            from jax.experimental import multihost_utils

            planned = int(multihost_utils.broadcast_one_to_all(np.int32(planned)))
        return max(1, min(planned, self.max_chunk, limit))

    def observe(self, count: int, seconds: float) -> None:
        if seconds > 0:
            wanted = int(self.target_s * count / seconds)
            self.planned = max(1, min(wanted, 4 * count, self.max_chunk))


class TrainLoop:
    """Runs training iterations of an agent (see the module docstring). `log_every`: a
    metrics row every this many iterations."""

    def __init__(
        self, agent, state, counters: Counters | None = None, return_window: int = 20,
        log_every: int = 1,
    ):  # fmt: skip
        self.agent, self.state = agent, state
        self.counters = counters or Counters()
        self.returns = deque(maxlen=return_window)
        self.lengths = deque(maxlen=return_window)
        self._names = tuple(agent.metric_names)
        self.log_every = log_every
        self.last_s = 0.0  # the last step's seconds
        self._since = _Since()

    @property
    def return_mean(self) -> float:
        return float(np.mean(self.returns)) if self.returns else math.nan

    @property
    def sps(self) -> float:
        """Steady-state env steps per second (the run's first iteration excluded), over the
        whole run: a resumed run's earlier stretches count (their counters are restored)."""
        c = self.counters
        return c.steady_steps / c.steady_s if c.steady_s else math.nan

    def step(self, last_checkpoint: str = "none", count: int = 1) -> list[dict]:
        """`count` iterations (one `train_chunk` call); returns the metrics rows they
        completed (host floats; see `record`)."""
        c, agent = self.counters, self.agent
        t0 = time.perf_counter()
        self.state, out = agent.train_chunk(self.state, c.iteration, c.env_steps, count)
        host = jax.device_get(out)  # the chunk's host sync (a host-driven one is synced)
        self.last_s = time.perf_counter() - t0
        return self.record(host, count, self.last_s, last_checkpoint)

    def record(
        self, host: ChunkOutput, count: int, dt: float, last_checkpoint: str = "none"
    ) -> list[dict]:
        """Count `count` iterations' host output (taking `dt` seconds, shared evenly between
        them), one after another; returns the rows of those that end at a multiple of
        `log_every` iterations."""
        c, agent = self.counters, self.agent
        host = jax.tree.map(lambda x: np.asarray(x)[:count], host)
        self._check_metrics(host.metric_sums, last_checkpoint)
        steps, per_s = agent.steps_per_iteration, dt / count
        steady = c.iteration > 0  # the run's first chunk (its compile, warm-up) is not timed
        # the chunk's iterations in runs that end a row (at multiples of log_every) or the chunk
        ends = {j + 1 for j in range(count) if (c.iteration + j + 1) % self.log_every == 0}
        bounds = sorted({0, *ends, count})
        rows = []
        for a, b in itertools.pairwise(bounds):
            n, updates = b - a, int(host.updates[a:b].sum())
            c.iteration += n
            c.env_steps += n * steps
            c.updates += updates
            c.wall_s += n * per_s
            if steady:
                c.steady_steps += n * steps
                c.steady_s += n * per_s
            over = host.game_over[a:b]
            c.episodes += int(over.sum())
            self.returns.extend(host.finished_return[a:b][over].tolist())
            self.lengths.extend(host.finished_length[a:b][over].tolist())
            since = self._since
            since.iterations += n
            since.updates += updates
            since.seconds += n * per_s
            for k in self._names:
                since.sums.setdefault(k, []).extend(host.metric_sums[k][a:b].tolist())
            if b in ends:
                rows.append(self.flush())
        return rows

    def flush(self) -> dict | None:
        """The row of the iterations counted since the last row (None if there are none):
        counters and return window as they stand, metric means over its learner updates,
        `iteration_updates` the updates since the last row."""
        c, since = self.counters, self._since
        if not since.iterations:
            return None
        self._since = _Since()
        steps = since.iterations * self.agent.steps_per_iteration
        means = dict.fromkeys(self._names, math.nan)  # no learner update yet
        if since.updates:
            means = {k: math.fsum(since.sums[k]) / since.updates for k in self._names}
        return {
            "env_steps": c.env_steps,
            "frames": c.env_steps * frames_per_step(self.agent.env),
            "iteration": c.iteration,
            "updates": c.updates,
            "iteration_updates": since.updates,
            "episodes": c.episodes,
            "return_mean": self.return_mean,
            "length_mean": float(np.mean(self.lengths)) if self.lengths else math.nan,
            "sps": steps / since.seconds if since.seconds > 0 else math.nan,
            "wall_s": c.wall_s,
            **means,
        }

    def timed(self, n: int, count: int = 1) -> tuple[float, int, int]:
        """(seconds, env steps, learner updates) of `n` syncs of `count` iterations (for
        benchmarks)."""
        c = self.counters
        steps, updates, t0 = c.env_steps, c.updates, time.perf_counter()
        for _ in range(n):
            self.step(count=count)
        return time.perf_counter() - t0, c.env_steps - steps, c.updates - updates

    def _check_metrics(self, sums: dict, last_checkpoint: str):
        c = self.counters
        if set(sums) != set(self._names):
            raise ValueError(
                f"{type(self.agent).__name__} returned metrics {sorted(sums)} but declares "
                f"metric_names {sorted(self._names)}"
            )
        for name in self._names:
            bad = np.flatnonzero(~np.isfinite(sums[name]))
            if bad.size:
                raise NonFiniteError(
                    f"non-finite {name} ({sums[name][bad[0]]}) in iteration "
                    f"{c.iteration + bad[0]} (env step "
                    f"{c.env_steps + bad[0] * self.agent.steps_per_iteration}); run stopped, "
                    f"last good checkpoint: {last_checkpoint}"
                )


class PopulationLoop:
    """The runner's loop over an agent's members (engine/protocol.py: a single agent is
    a population of one, a `Population` has P): one program iteration for all members, then
    each member's output counted by its own `TrainLoop` (its counters, return window and
    metrics), as its single run would count it. With an `evolver`
    (engine.evolution.Evolver) a generation runs when due, ranked by the members' return
    windows; members that took another's weights start a new window. `step` returns, per
    member, the rows its iterations completed, each with the member's hyper-parameters
    (`hp_<field>`) and, at a generation (a row is made there), its `generation` and
    `parent`; `lineage` gets the generation's records. `since[i]`: when member i's
    hyper-parameters took effect (`member_config`), kept up to date here;
    `write_configs(since)` is called after each generation (member configs rewritten)."""

    def __init__(
        self, pop, state, counters: list[Counters], return_window: int = 20, evolver=None,
        lineage=None, since: list[dict] | None = None, write_configs=None, log_every: int = 1,
    ):  # fmt: skip
        self.agent, self.state = pop, state
        self.evolver, self.lineage = evolver, lineage
        self.since = list(since) if since is not None else [dict(DRAWN)] * pop.size
        self.write_configs = write_configs
        self.last_s = 0.0
        self.loops = [
            TrainLoop(m, None, c, return_window, log_every)
            for m, c in zip(pop.members, counters, strict=True)
        ]

    @property
    def counters(self) -> Counters:
        """Member 0's counters (env steps and iterations are the same for every member)."""
        return self.loops[0].counters

    def _hparams(self, i: int, row: dict) -> dict:
        row.update({f"hp_{k}": float(f"{v[i]:.7g}") for k, v in self.agent.hparams.items()})
        return row

    def flush(self) -> list[list[dict]]:
        """Each member's row of the iterations since its last one (none if there are none)."""
        rows = [loop.flush() for loop in self.loops]
        return [[] if row is None else [self._hparams(i, row)] for i, row in enumerate(rows)]

    def step(self, last_checkpoint: str = "none", count: int = 1) -> list[list[dict]]:
        c = self.counters
        t0 = time.perf_counter()
        self.state, out = self.agent.train_chunk(self.state, c.iteration, c.env_steps, count)
        host = jax.device_get(out)  # the chunk's host sync (a host-driven one is synced)
        dt = self.last_s = time.perf_counter() - t0
        members = self.agent.split_chunk(host)
        pairs = zip(self.loops, members, strict=True)
        rows = [loop.record(h, count, dt, last_checkpoint) for loop, h in pairs]
        for i, member_rows in enumerate(rows):
            for row in member_rows:
                self._hparams(i, row)
        if self.evolver is not None and self.evolver.due(c.env_steps):
            for mine, flushed in zip(rows, self.flush(), strict=True):
                mine += flushed  # a row at the generation, with the hyper-parameters it ran
            scores = [loop.return_mean for loop in self.loops]
            self.state, records = self.evolver.step(self.agent, self.state, scores, c.env_steps)
            if records is not None:
                for i, (loop, rec) in enumerate(zip(self.loops, records, strict=True)):
                    rows[i][-1].update(generation=rec["generation"], parent=rec["parent"])
                    if rec["parent"] != rec["member"] or rec["resampled"]:
                        loop.returns.clear()  # its scores were another member's learner's
                        loop.lengths.clear()
                        # its hyper-parameters are its parent's, perturbed, from now on
                        self.since[i] = {k: rec[k] for k in ("generation", "env_steps")}
                if self.lineage is not None:
                    self.lineage.write(records)
                if self.write_configs is not None:
                    self.write_configs(self.since)
        return rows


class StopRequest:
    """Ends training early but cleanly: after `max_minutes`, or on SIGTERM / SIGINT, the
    loop finishes the iterations of its current sync (about a second's worth, or
    --iterations-per-sync of them), checkpoints, evaluates and writes summary.json. A second
    signal aborts at once (the default handler)."""

    def __init__(self, max_minutes: float | None):
        self.max_minutes = max_minutes
        self.deadline = math.inf if max_minutes is None else time.monotonic() + 60 * max_minutes
        self.reason: str | None = None
        self._previous: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous = signal.signal(sig, self._on_signal)
                # None: a handler not installed from Python; restore the default then.
                self._previous[sig] = signal.SIG_DFL if previous is None else previous
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _on_signal(self, signum, frame):
        name = signal.Signals(signum).name
        signal.signal(signum, self._previous.pop(signum))  # the next one aborts
        self.reason = self.reason or name
        print(f"{name}: stopping after this sync (send it again to abort)", file=sys.stderr)

    def requested(self) -> bool:
        """Whether to stop now; every process of a multi-process run gets process 0's answer."""
        if self.reason is None and time.monotonic() >= self.deadline:
            self.reason = f"max_minutes={self.max_minutes:g}"
        stop = self.reason is not None
        if jax.process_count() > 1:  # one decision, or the collectives would hang
            from jax.experimental import multihost_utils

            stop = bool(multihost_utils.broadcast_one_to_all(np.int32(stop)))
            self.reason = self.reason or ("process 0" if stop else None)
        return stop


def resolve_run_dir(args: TrainArgs) -> Path:
    run = args.run
    if run.run_dir:
        return Path(run.run_dir)
    last = run.seed + run.num_seeds - 1
    seeds = f"seed{run.seed}" if run.num_seeds == 1 else f"seeds{run.seed}-{last}"
    env = run.env.replace("/", "-")  # gymnax/Breakout-MinAtar: one folder, not two
    return Path("runs") / (run.exp_name or f"{run.agent}-{env}-{seeds}")


def init_distributed(args: TrainArgs):
    """Join the multi-controller runtime (must run before any other JAX call)."""
    run = args.run
    if run.num_processes > 1 or run.coordinator_address:
        if not run.coordinator_address:
            raise ValueError("--num-processes > 1 needs --coordinator-address HOST:PORT")
        jax.distributed.initialize(
            coordinator_address=run.coordinator_address,
            num_processes=run.num_processes,
            process_id=run.process_id,
        )


def devices_line(agent) -> str:
    """What a run computes on, in one line: the backend, its devices and processes."""
    devices = list(agent.mesh.devices.flat) if agent.mesh is not None else jax.devices()[:1]
    kinds = sorted({getattr(d, "device_kind", d.platform) for d in devices})
    procs = jax.process_count()
    return (
        f"jax {jax.__version__} on {jax.default_backend()}: {len(devices)} device(s) "
        f"({', '.join(kinds)})" + (f" over {procs} processes" if procs > 1 else "")
    )


class Runner:
    """A training run in a run folder (module docstring). `run()` returns the summary (on
    process 0; None on the others)."""

    def __init__(self, args: TrainArgs, resuming: bool = False):
        if args.run.log_every == 0:  # resolved once: config.json keeps it for a resume
            run = dataclasses.replace(args.run, log_every=auto_log_every(args.run.total_steps))
            args = dataclasses.replace(args, run=run)
        self.args, self.resuming = args, resuming
        self.run_dir = resolve_run_dir(args)
        self.lead = jax.process_index() == 0  # only process 0 writes files

    def _check_new_run_dir(self):
        run_dir = self.run_dir
        if (run_dir / "config.json").exists() or (run_dir / "checkpoints").exists():
            raise ValueError(
                f"{run_dir} already holds a run; pass --resume {run_dir} to continue it, or "
                "choose another --exp-name / --run-dir"
            )

    def _build(self):
        run = self.args.run
        procs = jax.process_count()
        if procs > 1:  # each process steps its own share of the envs
            check_divisible("--num-envs", self.args.config.num_envs, procs, "processes")
        check_run(self.args)  # env count, observations, sizes: before any env is made
        if self.population:
            return self._build_population()
        many = (run.num_devices or jax.local_device_count()) > 1 or procs > 1
        mesh = make_mesh(run.num_devices) if many else None  # None: one device
        n = self.args.config.num_envs // procs
        env = make_env(
            run.env,
            n,
            run_env_seed(run.seed, n, jax.process_index(), procs),
            train=True,
            reward_clip=run.reward_clip,
            num_threads=run.num_threads,
            **env_options(run),
        )
        return env, build_agent(self.args, env, mesh)

    def _build_population(self):
        """P members, member i built exactly as the single run with seed `seed + i` builds
        its env and agent; the population split over the devices by member."""
        run = self.args.run
        n = run.num_seeds
        mesh = make_mesh(run.num_devices, axis=POP)
        check_divisible("--num-seeds", n, mesh.size)  # one line, before anything is built
        agent_cls = agent_class(get_agent(run.agent))
        if not agent_cls.supports_population:
            raise ConfigError(f"--num-seeds > 1 is not supported by --agent {run.agent}")
        tunable = agent_cls.tunable
        hparams = draw_hparams(hparam_specs(run), n, tunable, run.seed)
        n_env = self.args.config.num_envs
        pool = make_env(
            run.env, n * n_env, run_env_seed(run.seed, n_env), train=True,
            reward_clip=run.reward_clip, num_threads=run.num_threads, **env_options(run),
        )  # fmt: skip
        try:
            members = [
                build_agent(self.args, view, None, seed=run.seed + i)
                for i, view in enumerate(member_envs(pool, n))
            ]
            return pool, Population(members, mesh, hparams)
        except Exception:
            pool.close()
            raise

    def run(self) -> dict | None:
        """Bad input fails here with a one-line ValueError before anything is compiled or
        written: the run folder's place, the env id, the config against the env."""
        debug_nans = jax.config.jax_debug_nans
        if self.args.run.debug:
            jax.config.update("jax_debug_nans", True)
            enable_data_checks()
        try:
            return self._build_and_run()
        finally:  # process-wide switches: as they were before the run, whatever failed
            if self.args.run.debug:
                enable_data_checks(False)
            jax.config.update("jax_debug_nans", debug_nans)

    def _build_and_run(self) -> dict | None:
        if self.lead:
            check_run_dir_writable(self.run_dir)
            check_run_folder_links(self.run_dir)  # nothing is written through a link
        env, agent = self._build()
        lock = None
        try:
            self._check_pace(agent)
            if self.lead:  # one writer per run folder; the lock dies with its process
                lock = RunLock(self.run_dir).acquire()
                if not self.resuming:
                    self._check_new_run_dir()
            return self._run(env, agent)
        finally:
            agent.close()
            if lock is not None:
                lock.close()

    def _check_pace(self, agent) -> None:
        """--iterations-per-sync within what the agent can run per program, and
        --exact-resume on one device (one line, before anything is compiled)."""
        if self.args.run.exact_resume and agent.num_devices > 1:
            raise ConfigError(
                f"--exact-resume runs on one device (this run has {agent.num_devices}: "
                "--num-devices 1)"
            )
        n = self.args.run.iterations_per_sync
        if n > agent.max_chunk:
            raise ConfigError(
                f"--iterations-per-sync {n}: this run can take at most {agent.max_chunk} per sync"
            )

    @property
    def population(self) -> bool:
        """Whether this run trains a population (`--num-seeds` > 1: `_build` made one)."""
        return self.args.run.num_seeds > 1

    def _run(self, env, agent) -> dict | None:
        """One path for every run: `agent`'s members view (engine/protocol.py) makes a
        single run a population of one; only the run folder's layout tells them apart."""
        run, run_dir, size = self.args.run, self.run_dir, agent.size
        state = agent.init(agent.member_keys(jax.random.PRNGKey, run.seed), jit=True)
        ckpt_dir = run_dir / "checkpoints"
        checkpointer = Checkpointer(ckpt_dir, keep=run.keep_checkpoints)
        members, last_ckpt = [Counters() for _ in range(size)], "none"
        generation = 0  # the last generation of an evolving population
        since = [DRAWN] * size  # when each member's hyper-parameters took effect
        exact = run.exact_resume
        windows = None
        if self.resuming and checkpointer.steps():  # damaged ones: set aside, or one error
            learner, meta, step = restore_checkpoint(
                checkpointer, state.learner, exact=exact_tree(state) if exact else None
            )
            where = f"checkpoint {step} in {ckpt_dir}"
            if exact:
                learner, saved = learner
                windows = restored_windows(meta, size, where)
            members = restored_counters(meta, step, size, where)
            generation = _meta_int(meta.get("generation", 0), "generation", where)
            agent.hparams = agent.member_hparams(learner)
            # unknown (null) after a generation in a checkpoint of an older version
            unknown = dict.fromkeys(DRAWN) if generation else DRAWN
            since = meta.get("hparams_since", [unknown] * size)
            _check_since(since, size, where)
            iteration = members[0].iteration

            # New episodes, with a key that depends only on (seed, iteration, process).
            def actor_key(seed):
                key = jax.random.fold_in(jax.random.PRNGKey(seed + 7), iteration)
                return jax.random.fold_in(key, jax.process_index())

            if exact:  # the replay, env states, episodes and keys as they were
                state = state._replace(learner=learner, **saved)
            else:
                keys = agent.member_keys(actor_key, run.seed)
                state = agent.reset_actor(state._replace(learner=learner), keys)
            last_ckpt = str(ckpt_dir / str(step))
            until = f"on to env step {run.total_steps:,}"
            if run.max_minutes is not None:  # given again: a limit is not carried over
                until += f" or for --max-minutes {run.max_minutes:g}, whichever comes first"
            print(f"resumed {run_dir} from checkpoint at env step {step}; {until}", file=sys.stderr)
        elif self.resuming:
            why = _progress_to_keep(run_dir, ckpt_dir, member_dirs(run_dir, size), run)
            note = ""
            if why and self.lead:  # its logs set aside, not truncated to step 0
                logs = [run_dir / "lineage.csv", run_dir / "summary.json"]
                for folder in member_dirs(run_dir, size):
                    logs += [folder / "metrics.csv", folder / "summary.json"]
                aside = [
                    str(set_aside(p).relative_to(run_dir))
                    for p in dict.fromkeys(logs)
                    if p.is_file()
                ]
                note = f" ({why}; set aside: {', '.join(aside)})"
            print(
                f"{run_dir} has no checkpoint to resume from: starting it over{note}",
                file=sys.stderr,
            )
        if self.lead:
            self._write_config(agent, env)
            print(devices_line(agent), file=sys.stderr)
        compile_s = agent.compile(state)
        folders = member_dirs(run_dir, size)
        write_configs = None
        if size > 1 and self.lead:
            for folder in folders:
                folder.mkdir(exist_ok=True)
            write_configs = functools.partial(self._write_member_configs, agent, folders)
            write_configs(since)
        extra = [f"hp_{k}" for k in agent.hparams]
        extra += ["generation", "parent"] if run.evolve != "none" else []
        loggers = [
            RunLogger(
                folder,
                [*RUN_COLUMNS, *agent.metric_names, *extra],
                run.total_steps,
                start_step=members[0].env_steps,
                tensorboard=not run.debug,
                progress=run.progress and self.lead and i == 0,
                write=self.lead,
            )
            for i, folder in enumerate(folders)
        ]
        evolver = lineage = None
        if run.evolve != "none":
            evolver = Evolver(
                run.evolve, run.evolve_every, run.evolve_fraction, run.seed, agent.tunable,
                replace=run.evolve_replace, std_max=run.cem_std_max, generation=generation,
            )  # fmt: skip
            if self.lead:
                columns = [*LINEAGE_COLUMNS, *extra[: len(agent.hparams)]]
                lineage = LineageLog(run_dir, columns, start_step=members[0].env_steps)
        per = agent.members[0].steps_per_iteration
        loop = PopulationLoop(
            agent, state, members, run.return_window, evolver, lineage, since, write_configs,
            log_every=log_every_iterations(run.log_every, per),
        )  # fmt: skip
        counters = loop.counters
        logged = [lp.counters.env_steps for lp in loop.loops]  # the progress bars' positions

        def log(rows):
            for i, (logger, member_rows) in enumerate(zip(loggers, rows, strict=True)):
                for row in member_rows:
                    logger.log(row, row["env_steps"] - logged[i])
                    logged[i] = row["env_steps"]

        if windows is not None:  # restored_windows checked there is one per loop
            for train_loop, window in zip(loop.loops, windows, strict=True):
                train_loop.returns.extend(window["returns"])
                train_loop.lengths.extend(window["lengths"])
        every = run.checkpoint_every
        next_ckpt = (counters.env_steps // every + 1) * every
        stop = StopRequest(run.max_minutes)
        pace = SyncPace(agent.max_chunk, run.iterations_per_sync)
        try:
            with stop:
                while counters.env_steps < run.total_steps:
                    before = counters.env_steps
                    # iterations until the next checkpoint, generation or the end
                    boundary = min(next_ckpt, run.total_steps)
                    if evolver is not None:
                        boundary = min(boundary, evolver.next_due)
                    count = pace.count(-(-(boundary - before) // per))
                    log(loop.step(last_ckpt, count))
                    pace.observe(count, loop.last_s)
                    stopping = stop.requested()
                    if stopping or counters.env_steps >= min(next_ckpt, run.total_steps):
                        log(loop.flush())  # a row at every checkpoint: a resume goes on from it
                        meta = {
                            "counters": [dataclasses.asdict(lp.counters) for lp in loop.loops],
                            "hparams_since": loop.since,
                        }
                        if evolver is not None:
                            meta["generation"] = evolver.generation
                        saved = None
                        if exact:  # and the logged return windows (PBT ranks by them)
                            saved = exact_tree(loop.state)
                            meta["windows"] = [
                                {"returns": list(lp.returns), "lengths": list(lp.lengths)}
                                for lp in loop.loops
                            ]
                        path = checkpointer.save(
                            counters.env_steps, checkpoint_tree(loop.state.learner), meta, saved
                        )
                        last_ckpt = str(path)
                        next_ckpt = (counters.env_steps // every + 1) * every
                    if stopping:
                        break
        except NonFiniteError as err:
            raise ValueError(str(err)) from None
        finally:
            for logger in loggers:
                logger.close()
            if lineage is not None:
                lineage.close()
            checkpointer.close()
            agent.close()  # before the evaluation: stop actor threads
        state = loop.state
        if jax.process_count() > 1:  # lets users (and the tests) see that replicas agree
            local = jax.device_get(local_replica(state.learner.params))
            checksum = sum(
                float(np.abs(np.asarray(x, np.float64)).sum()) for x in jax.tree.leaves(local)
            )
            print(f"process {jax.process_index()}: params checksum {checksum:.12e}", flush=True)
        if not self.lead:
            return None
        summaries = [
            self._finish(
                member, agent.member_learner(state.learner, i), loop.loops[i], compile_s,
                last_ckpt, stop.reason, folders[i], run.seed + i,
            )
            for i, member in enumerate(agent.members)
        ]  # fmt: skip
        if size == 1:
            return summaries[0]
        c = loop.counters
        summary = {
            "agent": run.agent,
            "env": run.env,
            "num_seeds": size,
            "seeds": [s["seed"] for s in summaries],
            "env_steps_per_member": c.env_steps,
            "env_steps": c.env_steps * size,
            "wall_s": c.wall_s,
            "sps": size * loop.loops[0].sps,  # over all members, steady state
            "compile_s": compile_s,
            "devices": agent.num_devices,
            "eval_return_mean": [s["eval_return_mean"] for s in summaries],
            "members": [str(f.relative_to(run_dir)) for f in folders],
            "last_checkpoint": last_ckpt,
            "stopped_by": stop.reason or "total_steps",
        }
        write_json_atomic(run_dir / "summary.json", summary)
        print(
            f"population of {size}: {summary['env_steps']} env steps in {c.wall_s:.1f} s "
            f"({summary['sps']:.0f} steps/s over all members) -> {run_dir}/summary.json"
        )
        return summary

    def _write_member_configs(self, pop, folders, since: list[dict]):
        """Every member's config.json (`member_config`), with the population's current
        hyper-parameters; each file is replaced atomically."""
        for i, folder in enumerate(folders):
            data = member_config(self.args, i, pop.size, pop.hparams, since[i])
            write_json_atomic(folder / "config.json", data)

    def _write_config(self, agent, env):
        spec = env.spec
        write_json_atomic(
            self.run_dir / "config.json",
            {
                **config_json(self.args),
                "env_spec": {
                    "env_id": spec.env_id,
                    "obs_shape": None if spec.pytree_obs else list(spec.obs_shape),
                    "obs_spec": obs_spec_json(spec.obs_spec),
                    "num_actions": spec.num_actions,
                    "action_shape": list(spec.action_shape),
                    "backend": spec.backend,
                    "is_atari": spec.is_atari,
                },
                "replay_bytes_per_transition": agent.bytes_per_transition,
                "jax": jax.__version__,
                "devices": [
                    str(d) for d in (agent.mesh.devices.flat if agent.mesh else jax.devices()[:1])
                ],
                "processes": jax.process_count(),
                "python": platform.python_version(),
            },
        )

    def _finish(
        self, agent, learner, loop, compile_s, last_ckpt, stopped_by, run_dir, seed
    ) -> dict:
        """Evaluate `learner` and write `run_dir`/summary.json (a run, or one member)."""
        run, c = self.args.run, loop.counters
        returns, eval_s = np.zeros(0), 0.0
        if run.eval_episodes:
            n_eval = min(run.eval_episodes, 16)
            eval_env = make_eval_env(
                run.env, n_eval, eval_env_seed(seed, n_eval), **env_options(run)
            )
            t0 = time.perf_counter()
            returns, _ = evaluate(
                agent.act(run.eval_greedy),
                agent.acting_params(learner),
                eval_env,
                run.eval_episodes,
                jax.random.PRNGKey(seed + 1),
                agent.initial_core(eval_env.spec.num_envs),
                feedback=eval_feedback(agent.core_feedback, agent.env.spec.reward_clip),
            )
            eval_s = time.perf_counter() - t0
        evaluated = len(returns) > 0
        summary = {
            "agent": run.agent,
            "env": run.env,
            "preset": run.preset,
            "seed": seed,
            "env_steps": c.env_steps,
            "frames": c.env_steps * frames_per_step(agent.env),
            "episodes": c.episodes,
            "updates": c.updates,
            "wall_s": c.wall_s,
            "sps": loop.sps,
            "compile_s": compile_s,
            "train_return_mean": loop.return_mean,
            "eval_return_mean": float(np.mean(returns)) if evaluated else None,
            "eval_return_std": float(np.std(returns)) if evaluated else None,
            "eval_episodes": len(returns),
            "eval_policy": "greedy" if run.eval_greedy else "sample",
            "eval_s": eval_s,
            "replay_bytes_per_transition": agent.bytes_per_transition,
            "devices": agent.num_devices,
            "processes": jax.process_count(),
            "last_checkpoint": last_ckpt,
            "stopped_by": stopped_by or "total_steps",
        }
        write_json_atomic(run_dir / "summary.json", summary)
        early = f" (stopped early: {stopped_by})" if stopped_by else ""
        result = (
            f"eval return {summary['eval_return_mean']:.1f} ± {summary['eval_return_std']:.1f} "
            f"over {len(returns)} episodes"
            if evaluated
            else "no evaluation (--eval-episodes 0)"
        )
        print(
            f"{run.agent} on {run.env}: {c.env_steps} env steps{early} in {c.wall_s:.1f} s "
            f"({summary['sps']:.0f} steps/s, compile {compile_s:.1f} s); {result} -> "
            f"{run_dir}/summary.json"
        )
        return summary
