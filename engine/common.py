"""What the experiment scripts share: reading a run folder's config back into the agent's
spec and config (also the layout older versions wrote), building the agent, and restoring
its learner from a checkpoint."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import jax
import jax.numpy as jnp

from agents.core.config import from_dict, renamed_fields
from agents.core.hooks import hook_fields
from agents.core.learning import episode_fields
from agents.core.registry import get_agent
from engine.args import RunArgs, TrainArgs, hparam_specs
from engine.checkpoint import Checkpointer
from engine.driver import agent_class
from engine.population import Population, PopulationLearner, member_envs
from engine.runfolder import read_json, write_json_atomic
from envs import make_env, run_env_seed

COMPILE_CACHE_OFF = "REACTOR_JAX_NO_COMPILE_CACHE"
"""Set to 1 in the environment to compile every program afresh (`use_compile_cache`)."""


def use_compile_cache() -> Path | None:
    """Keep the compiled programs between processes (JAX's persistent compilation cache), so
    that a command run again loads its programs instead of compiling them.

    The cache is JAX_COMPILATION_CACHE_DIR where the user set it (JAX reads it itself), else
    $XDG_CACHE_HOME/reactor-jax/jax (~/.cache/...), never a run folder's (untrusted data).
    Every program is kept, not only those that took JAX's default 1 s to compile, unless
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS says otherwise. Off (returns None) with
    REACTOR_JAX_NO_COMPILE_CACHE=1. Call it before the first compile."""
    if os.environ.get(COMPILE_CACHE_OFF, "") not in ("", "0"):
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    chosen = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    folder = Path(chosen) if chosen else Path(base) / "reactor-jax" / "jax"
    jax.config.update("jax_compilation_cache_dir", str(folder))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return folder


def cold_process_env() -> dict[str, str]:
    """The environment for a benchmark's timed train process: this one's, with the compile
    cache off, so that every process compiles its programs as a first run does."""
    return {**os.environ, COMPILE_CACHE_OFF: "1"}


def load_run(run_dir: str | Path) -> TrainArgs:
    """The TrainArgs a run folder was started with, from its config.json, without its hooks.

    Reads the current layout ({"run": ..., "agent_config": ...}) and the flat one of earlier
    versions ({"args": {...every flag...}, "agent_config": ...}). A run folder is data: the
    hook fields (`module:function` names, agents.core.hooks) are left at None, never imported;
    `trained_hooks` reads the names, and a caller that needs a hook takes it from its own
    command line. Problems are one-line ValueErrors naming the file."""
    return _read_run(run_dir)[0]


def trained_hooks(run_dir: str | Path) -> dict[str, str]:
    """`{field: "module:function"}` of the hooks a run was trained with, as config.json
    names them (read as text, never imported); empty when it had none."""
    return _read_run(run_dir)[1]


def _read_run(run_dir: str | Path) -> tuple[TrainArgs, dict[str, str]]:
    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise ValueError(f"{run_dir} is not a run folder (no config.json)")
    data = read_json(path, "run config")
    where = str(path)
    if "run" in data:
        run = from_dict(RunArgs, data["run"], f"{where} [run]")
    elif "args" in data and isinstance(data["args"], dict):  # layout before the agent registry
        run = from_dict(RunArgs, data["args"], f"{where} [args]", ignore_unknown=True)
    else:
        raise ValueError(f"{where}: has neither 'run' nor 'args'")
    try:
        spec = get_agent(run.agent)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    saved = data.get("agent_config")
    if not isinstance(saved, dict):
        raise ValueError(f"{where}: 'agent_config' is missing or not an object")
    saved = renamed_fields(saved, spec.config_cls)
    # Hooks are taken out before the config is built: building it would import them.
    hooks = {k: saved.pop(k) for k in hook_fields(spec.config_cls) if k in saved}
    for name, value in hooks.items():
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{where} [agent_config]: {name} = {value!r} is not a string")
    config = from_dict(spec.config_cls, saved, f"{where} [agent_config]")
    return TrainArgs(run, config), {k: v for k, v in hooks.items() if v is not None}


def config_json(args: TrainArgs) -> dict:
    return {
        "agent": args.run.agent,
        "run": dataclasses.asdict(args.run),
        "agent_config": dataclasses.asdict(args.config),
    }


def build_agent(args: TrainArgs, env, mesh=None, seed: int | None = None):
    """The agent `args.run.agent`, configured by `args.config` for `env` (num_envs is the
    env's, over every process)."""
    spec = get_agent(args.run.agent)
    config = dataclasses.replace(args.config, num_envs=env.spec.num_envs * jax.process_count())
    return agent_class(spec)(config, env, seed=args.run.seed if seed is None else seed, mesh=mesh)


def checkpoint_tree(learner) -> dict:
    """The arrays a checkpoint holds: the whole learner state (replicated over the mesh when
    data parallel). The counters go into the JSON metadata. The replay and the env states
    are saved only with --exact-resume (`exact_tree`, an item of its own); otherwise a
    resumed run refills its replay and starts new episodes."""
    return {"learner": learner._asdict()}


def exact_tree(state) -> dict:
    """What --exact-resume adds to a checkpoint (its `exact` item): the replay and the actor
    (env states, observations, recurrent cores, running episodes, RNG key) of a TrainState."""
    return {"replay": state.replay, "actor": state.actor}


def restore_checkpoint(checkpointer: Checkpointer, learner, step: int | None = None, exact=None):
    """Restore a learner of `learner`'s structure; returns (learner, meta, step). With
    `exact` (an `exact_tree`): ((learner, exact_tree), meta, step).

    Checkpoints of early versions still load: those that also hold an `actor_key` array (no
    longer used: a resumed run draws new episodes from its seed and iteration), those
    saved before a learner state had one of its episode fields
    (`agents.core.learning.episode_fields`: PPO's per-env returns), restored as zeros, and
    those saved before it had a field that is empty here (`()`: ICM's state with
    --icm-coef off; engine.checkpoint leaves such fields out of what it reads)."""
    target = checkpoint_tree(learner)
    if exact is not None:
        (restored, saved), meta, step = checkpointer.restore(target, step, exact=exact)
        return (_with_episode_fields(restored["learner"], learner), saved), meta, step
    key = {"actor_key": jax.ShapeDtypeStruct((2,), jnp.uint32)}
    older = {"learner": _without_episode_fields(learner)}
    mismatch = None
    for candidate in (target, {**target, **key}, older, {**older, **key}):
        try:
            restored, meta, step = checkpointer.restore(candidate, step)
            break
        except ValueError as err:  # a structure mismatch: the target's error is the one told
            mismatch = mismatch or err
    else:
        raise mismatch
    return _with_episode_fields(restored["learner"], learner), meta, step


def _is_state(tree) -> bool:
    return isinstance(tree, tuple) and hasattr(tree, "_fields")


def _without_episode_fields(state):
    """A learner state (or a population's, which holds one) as nested dicts without its
    episode fields: the layout of a checkpoint saved before it had them."""
    if not _is_state(state):
        return state
    own = episode_fields(state)
    return {f: _without_episode_fields(getattr(state, f)) for f in state._fields if f not in own}


def _with_episode_fields(saved, like):
    """`saved` (restored fields) back into `like`'s NamedTuples; a field it lacks (an episode
    field, older than the checkpoint) as zeros shaped as `like`'s."""
    if not _is_state(like):
        return saved
    saved = saved._asdict() if _is_state(saved) else saved
    zeros = lambda t: jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), t)  # noqa: E731
    return type(like)(
        **{
            f: _with_episode_fields(saved[f], getattr(like, f)) if f in saved else zeros(v)
            for f, v in like._asdict().items()
        }
    )


def restore_learner(init_learner, run_dir: Path, step: int | None = None):
    """Restore the learner state of a run, into the structure of `init_learner(key)` (an
    agent's, or its `Acting` part's), without building its replay or stepping envs; for a
    population member's folder (`<run>/member-<i>`), its row of the population's checkpoint.
    Returns (learner_state, meta, step)."""
    run_dir = Path(run_dir)
    learner = jax.eval_shape(init_learner, jax.random.PRNGKey(0))
    config = read_json(run_dir / "config.json", "run config")
    member = config.get("population")
    run = load_run(run_dir).run
    if member is None:
        size = run.num_seeds
        if size > 1:
            raise ValueError(
                f"{run_dir} is a population of {size} (--num-seeds): give one member's folder, "
                f"{run_dir}/member-<i>"
            )
        return _restore(run_dir, learner, step)
    # A population member: its learner is row i of the population's checkpoint.
    index, size = _member_index(member, run.num_seeds, run_dir / "config.json")
    if run_dir.name != f"member-{index}" or not (run_dir.parent / "config.json").is_file():
        raise ValueError(
            f"{run_dir}/config.json names population member {index}, but the folder is not "
            f"member-{index} of a population's run folder"
        )
    fields = hparam_specs(run)
    stacked = jax.tree.map(lambda x: jax.ShapeDtypeStruct((size, *x.shape), x.dtype), learner)
    hparams = {k: jax.ShapeDtypeStruct((size,), jnp.float32) for k in fields}
    saved, meta, step = _restore(run_dir.parent, PopulationLearner(stacked, hparams), step)
    return jax.tree.map(lambda x: x[index], saved.member), meta, step


def _member_index(member, num_seeds: int, path: Path) -> tuple[int, int]:
    """(index, size) of a member's `population` block, checked against the run's
    --num-seeds: a one-line ValueError naming the file and the field otherwise."""
    if not isinstance(member, dict):
        raise ValueError(f"{path}: population must be an object, got {member!r}")
    index, size = member.get("member"), member.get("of")
    if type(size) is not int or size != num_seeds:
        raise ValueError(f"{path}: population.of must be --num-seeds {num_seeds}, got {size!r}")
    if type(index) is not int or not 0 <= index < size:
        raise ValueError(
            f"{path}: population.member must be an integer in [0, {size}), got {index!r}"
        )
    return index, size


def _restore(run_dir: Path, target, step: int | None):
    if not (run_dir / "checkpoints").is_dir():  # reading creates nothing
        raise ValueError(f"{run_dir} has no complete checkpoint (no checkpoints/ folder)")
    checkpointer = Checkpointer(run_dir / "checkpoints")
    try:
        return restore_checkpoint(checkpointer, target, step)
    finally:
        checkpointer.close()


def make_agent(
    agent: str,
    env_id: str,
    *,
    preset: str | None = None,
    mesh=None,
    num_threads: int = 0,
    seed: int = 0,
    **overrides,
):
    """An agent built from a preset with config `overrides`, on a fresh training env (for
    the benchmarks). `preset=None`: the agent's default preset."""
    args = preset_args(agent, env_id, preset, seed, overrides)
    n = args.config.num_envs
    env = make_env(
        env_id, n, run_env_seed(seed, n), num_threads=num_threads, **env_options(args.run)
    )
    return build_agent(args, env, mesh)


def preset_args(agent: str, env_id: str, preset: str | None, seed: int, overrides) -> TrainArgs:
    """The TrainArgs of `agent`'s `preset` (None: its default) with config `overrides`."""
    spec = get_agent(agent)
    run_values, config_values = spec.split_preset(preset)
    config = spec.config_cls(**{**config_values, **overrides})
    run = RunArgs(agent=spec.name, preset=preset, **{**run_values, "env": env_id, "seed": seed})
    return TrainArgs(run, config)


def make_population(
    agent: str,
    env_id: str,
    size: int,
    *,
    preset: str | None = None,
    mesh=None,
    num_threads: int = 0,
    seed: int = 0,
    **overrides,
):
    """`size` members of an agent (seeds seed .. seed + size − 1) on one fresh pool of envs,
    as `--num-seeds size` builds them: the benchmarks' and tests' population."""
    args = preset_args(agent, env_id, preset, seed, overrides)
    n = args.config.num_envs
    pool = make_env(
        env_id, size * n, run_env_seed(seed, n), num_threads=num_threads, **env_options(args.run)
    )
    views = member_envs(pool, size)
    return Population(
        [build_agent(args, v, None, seed=seed + i) for i, v in enumerate(views)], mesh
    )


def bench_preset(spec) -> str | None:
    """The preset benchmarks use by default: `<agent>-atari` where it exists."""
    name = f"{spec.name}-atari"
    return name if name in spec.presets else spec.default_preset


def save_results(path: str | None, results: dict) -> None:
    """A script's `--json-out` / `--out`: strict JSON, written atomically, folder created."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, results)


def timed_train_process(argv: list[str], time_from: int) -> dict:
    """One `experiments.train` process with `argv` (a run folder of its own, removed after),
    timed from its metrics.csv: env steps per second between the first host sync at or past
    env step `time_from` and the last (past compiles and warm-up). A population
    (`--num-seeds P`) is timed from member 0's metrics.csv, whose steps are per member
    (`time_from` too), and its sps is the aggregate: P times the member's. Returns sps,
    timed_steps (aggregate), syncs (metrics rows), compile_s (compiled afresh:
    `cold_process_env`) and members; a failed run raises RuntimeError with its stderr."""
    import csv
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "experiments.train", *argv, "--run-dir", f"{tmp}/run"]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, check=False, env=cold_process_env()
        )
        if proc.returncode:
            raise RuntimeError(f"train {' '.join(argv)} failed: {proc.stderr[-2000:]}")
        summary = json.loads(Path(f"{tmp}/run/summary.json").read_text())
        members = int(summary.get("num_seeds", 1))
        metrics = f"{tmp}/run/member-0/metrics.csv" if members > 1 else f"{tmp}/run/metrics.csv"
        with open(metrics) as f:
            rows = [(int(r["env_steps"]), float(r["wall_s"])) for r in csv.DictReader(f)]
    start = next(r for r in rows if r[0] >= time_from)
    end = rows[-1]
    steps = members * (end[0] - start[0])
    sps = steps / (end[1] - start[1]) if end[1] > start[1] else float("nan")
    return {"sps": sps, "timed_steps": steps, "syncs": len(rows),
            "compile_s": summary["compile_s"], "members": members}  # fmt: skip


def env_options(run) -> dict:
    """The `envs.make_env` keyword arguments a run's options set, for its training and
    evaluation envs alike: --flatten-obs, --privileged-obs and its --protocol's env
    settings."""
    from envs.protocols import protocol_env_kwargs

    extra = {"privileged_obs": tuple(run.privileged_obs)} if run.privileged_obs else {}
    return {"flatten_obs": run.flatten_obs, **extra, **protocol_env_kwargs(run.protocol)}
