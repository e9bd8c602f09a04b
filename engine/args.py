"""The command line of `python -m experiments.train`: the run options below plus the chosen
agent's own config dataclass (agents/<name>/config.py), whose fields are its flags.

`--agent NAME` picks the agent (default: the one `--preset` belongs to, else acer) and
`--preset NAME` (default: the agent's own) a set of paper values; flags given explicitly
override the preset. A flag that belongs to another agent is an error that names both
agents. `--help` lists the run options and the chosen agent's flags (`--agent reactor
--help` for the Reactor's).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import tyro

from agents.core.config import check_only_with, flag
from agents.core.hooks import check_given_again, hook_fields
from agents.core.registry import AgentSpec, agent_names, all_specs, get_agent, preset_owner
from engine.evaluation import MAX_EPISODES
from engine.evolution import draw_hparams
from engine.runfolder import check_run_dir_writable
from envs.gymnax_env import PREFIX as GYMNAX
from envs.protocols import PROTOCOLS, check_protocol_env

C = TypeVar("C")


@dataclass(frozen=True)
class RunArgs:
    """Train an agent on an envpool (or gymnasium) environment. Outputs go to the run
    folder: config.json, metrics.csv, TensorBoard events, checkpoints/ and summary.json."""

    agent: str = "acer"
    """Which agent to train (default: the agent --preset belongs to, else acer; see the
    agent's own flags with --agent NAME --help)."""
    preset: str | None = None
    """Named hyper-parameter preset (default: <agent>-classic); explicit flags override it."""
    env: str = "CartPole-v1"
    """Environment id: envpool ids (Pong-v5, CartPole-v1, Acrobot-v1, HalfCheetah-v5, ...),
    gymnax/<id> for gymnax's JAX-native envs stepped on the device (gymnax/CartPole-v1,
    gymnax/Breakout-MinAtar; gymnax/<Game>-MinAtar-full: all 6 MinAtar actions), or any
    gymnasium id envpool lacks (MinAtar/Breakout-v1, MiniGrid-DoorKey-5x5-v0, ...)."""
    total_steps: int = 100_000
    """Environment steps to train for (agent steps over all envs; one Atari step = 4 frames),
    rounded up to whole iterations (num_envs × trace_len env steps each)."""
    seed: int = 0
    """Random seed for parameters, actions, replay sampling and the environments."""
    num_threads: int = 0
    """envpool worker threads (0: envpool's default)."""
    reward_clip: bool | None = None
    """Clip training rewards to [-1, 1] (default: on for Atari, off otherwise). Evaluation
    always uses raw rewards."""
    protocol: str = "none"
    """A published evaluation protocol the run follows (envs/protocols.py): "atari100k"
    (Kaiser et al. 2019: one of its 26 games as <Game>-v5, 100,000 agent steps, no FIRE at
    resets, 100 evaluation episodes; the run's --total-steps and --eval-episodes are the
    protocol's unless given, and must equal them), or "none"."""
    flatten_obs: bool = False
    """Flatten each observation array to a vector, read by the agents' MLP torso instead of a
    CNN (MinAtar's [10, 10, C] as gymnax-blines' and PureJaxRL's MLP agents read it)."""
    privileged_obs: tuple[int, ...] | None = None
    """Dimensions of the vector observations that are privileged (e.g. CartPole-v1's
    velocities: 1 3): hidden from every network, and given only to SAC's prediction model
    (--prediction: its inputs and reconstruction targets). Agents that do not read them
    (all but SAC) refuse the flag."""
    run_dir: str | None = None
    """Run folder; default runs/<exp-name>."""
    exp_name: str | None = None
    """Name of the experiment (the run folder's name); default <agent>-<env>-seed<seed>
    (a population: seeds<first>-<last>; a '/' of the env id becomes '-')."""
    resume: str | None = None
    """Resume the run in this folder from its latest complete checkpoint. Its saved options
    are used; only --total-steps, --max-minutes, --progress, --iterations-per-sync, the
    evaluation flags and where it runs (devices, processes, threads) may change. Hooks
    (PPO, A2C: --reshape-reward, --preprocess-obs) are never imported from the folder: give
    the run's again."""

    num_seeds: int = 1
    """Train this many independent learners in one program: member i is the run with seed
    --seed + i (its own envs, RNG streams and replay), vmapped over a population axis and
    split over --num-devices (which must divide it). Logs go to <run>/member-<i>/. Agents
    that support it: ACER, DQN, R2D1, Reactor with --no-decoupled, PPO and A2C (with the
    one-program --update-loop scan or unroll), SAC and TD3; envs stepped inside XLA only
    (envpool's XLA step, gymnax). At most 4,096 members."""

    vary: tuple[str, ...] = ()
    """Population hyper-parameters (with --num-seeds > 1), FIELD=SPEC each: FIELD one the
    agent can vary (ACER, Reactor: lr, entropy_weight, discount; DQN, R2D1: lr, discount;
    PPO: those of ACER and value_weight, gae_lambda, clip_eps; A2C: PPO's but clip_eps;
    SAC: actor_lr, critic_lr, alpha_lr, tau, discount; TD3: SAC's but alpha_lr, and
    target_noise; PQN: lr, td_lambda, discount) and SPEC `v1,v2,...` (member i: value i mod
    their number), `loguniform:LOW:HIGH`, `uniform:LOW:HIGH` or `normal:MEAN:STD[:LOW:HIGH]`
    (truncated), drawn from --seed."""
    sweep_lr: str | None = None
    """Shorthand for --vary lr=VALUES (e.g. --sweep-lr 1e-4,3e-4,1e-3)."""
    evolve: str = "none"
    """Evolve the population every --evolve-every env steps (per member), ranked by each
    member's mean training return over --return-window episodes: "pbt" (truncation
    selection: the bottom --evolve-fraction copy weights, optimiser state and
    hyper-parameters from the top, then perturb them by 0.8 or 1.2), "cem" (the elites'
    per-weight Gaussian resamples --evolve-replace members), or "none"."""
    evolve_every: int | None = None
    """Env steps per member between generations (required with --evolve)."""
    evolve_fraction: float = 0.25
    """PBT: the fraction copied / copied from (Jaderberg et al.: 0.2-0.25). CEM: the elite
    fraction (the Advanced-SAC seed's evolver_cem_best: 0.3), at least 2 elites."""
    evolve_replace: int = 0
    """CEM: resample only this many worst members (the seed's evolver_remove_worst; 0: all
    members, the seed's default of resampling every learner)."""
    cem_std_max: float = 1.0
    """CEM: upper bound of each weight's standard deviation."""

    # Data parallelism (replaces Hogwild threads).
    num_devices: int | None = None
    """Devices per process for data parallelism (default: all local devices). Envs, replay
    and batches are split evenly over the devices; gradients are averaged with lax.pmean."""
    coordinator_address: str | None = None
    """Multi-host: HOST:PORT of process 0 for jax.distributed.initialize."""
    num_processes: int = 1
    """Multi-host: number of processes (each runs its own envpool on num_envs / P envs)."""
    process_id: int = 0
    """Multi-host: this process's index; only process 0 writes logs and summary.json."""

    # Logging, evaluation, checkpoints.
    eval_episodes: int = 20
    """Full episodes (no life loss, no reward clipping) to evaluate at the end (0: skip)."""
    eval_greedy: bool = False
    """Evaluate the greedy (argmax) policy instead of sampling from π."""
    checkpoint_every: int = 50_000
    """Write a checkpoint every this many env steps (and at the end)."""
    keep_checkpoints: int = 3
    """How many recent checkpoints to keep (>= 1)."""
    exact_resume: bool = False
    """Checkpoint the whole training state: the learner and also the replay, the envs'
    states, the running episodes and the RNG keys (as Dopamine saves its replay), so that a
    run stopped and resumed is the same experiment, bit for bit, as one that never stopped.
    JAX-native envs only (gymnax/<id>: their state is arrays), one device and process; each
    checkpoint grows by the replay's size. Without it a resumed run refills its replay and
    starts new episodes."""
    return_window: int = 20
    """Episodes in the moving window of the logged mean return."""
    max_minutes: float | None = None
    """Stop training after this many minutes (after compilation), then checkpoint, evaluate
    and write summary.json as at the end; for job time limits. SIGTERM and Ctrl-C stop the
    same way (a second signal aborts)."""
    iterations_per_sync: int = 0
    """Training iterations per host sync; 0: chosen as it runs, about one sync per second; at
    most the agent's chunk size. Where the host drives each iteration (e.g. host-stepped
    envs, data-parallel runs, convolutions on CPU: docs/command-line.md, "Many iterations per
    host sync") they still sync one by one. A stop request (--max-minutes, SIGTERM) waits
    for the sync's iterations. The metrics rows do not depend on it (--log-every)."""
    log_every: int = 0
    """Write a metrics.csv row every this many env steps (rounded up to whole iterations),
    and at every checkpoint and the end, however the iterations were synced: the same seed
    and command give the same rows. 0: about 200 rows over --total-steps (a new run saves
    the value it resolves to in config.json, so that a resumed run keeps it)."""
    progress: bool = True
    """Show a live progress bar."""
    debug: bool = False
    """Debug mode: every loss checks its data at run time (actions in range, probabilities
    valid: agents.losses.checked), jax_debug_nans on, no TensorBoard. Slower."""

    # Options that do nothing without their switch (agents.core.config.check_only_with).
    ONLY_WITH: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("vary", "sweep_lr", "evolve"), "num_seeds>1"),
        **dict.fromkeys(("evolve_every", "evolve_fraction"), "evolve=pbt|cem"),
        **dict.fromkeys(("evolve_replace", "cem_std_max"), "evolve=cem"),
        "eval_greedy": "eval_episodes>0",
    }

    def __post_init__(self):
        def need(ok: bool, name: str, allowed: str):
            if not ok:
                raise ValueError(f"{flag(name)} must be {allowed}, got {getattr(self, name)!r}")

        need(self.total_steps >= 1, "total_steps", ">= 1")
        # Env seeds are derived from it within envpool's int32 (envs.run_env_seed).
        need(0 <= self.seed < 2**30, "seed", "in [0, 2**30)")
        need(self.num_threads >= 0, "num_threads", ">= 0")
        need(self.num_seeds >= 1, "num_seeds", ">= 1")
        need(
            self.num_seeds == 1 or self.num_processes == 1, "num_seeds",
            "1 with --num-processes > 1 (a population runs in one process)",
        )  # fmt: skip

        # Population options: a flag that does not apply is an error, not a silent no-op.
        need(self.evolve in ("none", "pbt", "cem"), "evolve", '"none", "pbt" or "cem"')
        check_only_with(self)
        every = self.evolve_every
        unset_ok = every is None and self.evolve == "none"
        need(unset_ok or (every or 0) >= 1, "evolve_every", ">= 1 (required with --evolve)")
        need(0 < self.evolve_fraction < 1, "evolve_fraction", "in (0, 1)")
        need(0 <= self.evolve_replace <= self.num_seeds, "evolve_replace", "in [0, --num-seeds]")
        need(0 < self.cem_std_max < math.inf, "cem_std_max", "> 0 and finite")
        for entry in self.vary:
            need(entry.partition("=")[0].strip() != "" and "=" in entry, "vary", "FIELD=SPEC")
        if self.sweep_lr is not None and any(e.startswith("lr=") for e in self.vary):
            raise ValueError("--sweep-lr and --vary lr=... give lr twice: use one")
        need(self.num_devices is None or self.num_devices >= 1, "num_devices", ">= 1")
        need(self.num_processes >= 1, "num_processes", ">= 1")
        address = self.coordinator_address
        need(
            address is None or _is_host_port(address),
            "coordinator_address",
            "HOST:PORT with PORT in [1, 65535]",
        )
        need(0 <= self.process_id < self.num_processes, "process_id", "in [0, --num-processes)")
        need(
            0 <= self.eval_episodes <= MAX_EPISODES, "eval_episodes",
            f"in [0, {MAX_EPISODES:,}] (0 skips the evaluation)",
        )  # fmt: skip
        need(self.checkpoint_every >= 1, "checkpoint_every", ">= 1")
        need(self.protocol in PROTOCOLS, "protocol", " or ".join(f'"{p}"' for p in PROTOCOLS))
        check_protocol_env(self.protocol, self.env)
        for name, value in PROTOCOLS[self.protocol].get("run", {}).items():
            if name == "eval_episodes" and self.eval_episodes < 1:
                raise ValueError(
                    f"--eval-episodes must be >= 1 with --protocol {self.protocol} (it reports "
                    f"the final evaluation: {value} episodes), got {self.eval_episodes}"
                )
            if getattr(self, name) != value:
                raise ValueError(
                    f"{flag(name)} {getattr(self, name)!r} differs from --protocol "
                    f"{self.protocol}'s {value!r}"
                )
        need(self.iterations_per_sync >= 0, "iterations_per_sync", ">= 0 (0: automatic)")
        need(self.log_every >= 0, "log_every", ">= 0 (0: about 200 rows over --total-steps)")
        need(self.keep_checkpoints >= 1, "keep_checkpoints", ">= 1")
        if self.exact_resume and not self.env.startswith(GYMNAX):
            raise ValueError(
                f"--exact-resume needs a JAX-native env (gymnax/<id>), whose state can be "
                f"checkpointed; {self.env} keeps its state outside JAX"
            )
        need(
            not self.exact_resume or self.num_processes == 1, "num_processes",
            "1 with --exact-resume",
        )  # fmt: skip
        need(self.return_window >= 1, "return_window", ">= 1")
        need(
            self.max_minutes is None or (math.isfinite(self.max_minutes) and self.max_minutes > 0),
            "max_minutes",
            "a finite number > 0",
        )
        dims = self.privileged_obs
        need(
            dims is None or (len(dims) > 0 and min(dims) >= 0), "privileged_obs",
            "one or more dimension indices >= 0",
        )  # fmt: skip
        for name in ("run_dir", "exp_name", "resume", "env"):
            value = getattr(self, name)
            need(value is None or value.strip() != "", name, "non-empty")
        check_env(self.env)
        name = self.exp_name
        need(
            name is None or ("/" not in name and name.strip() not in (".", "..")),
            "exp_name",
            "a folder name (no '/'; a path goes in --run-dir)",
        )


def hparam_specs(run: RunArgs) -> dict[str, str]:
    """`field -> spec` from --vary and --sweep-lr (engine.evolution.draw_hparams)."""
    specs: dict[str, str] = {}
    for entry in run.vary:
        name, _, spec = entry.partition("=")
        name = name.strip()
        if name in specs:
            raise ValueError(f"--vary: {name} is given twice")
        specs[name] = spec.strip()
    if run.sweep_lr is not None:
        specs["lr"] = run.sweep_lr
    return specs


def check_env(env_id: str) -> None:
    """A one-line ValueError naming --env (with close matches) unless envpool or gymnasium
    has `env_id`. Builds no env."""
    from envs.factory import check_env_id  # imports envpool: only when checking

    try:
        check_env_id(env_id)
    except ValueError as err:
        raise ValueError(f"--env: {err}") from None


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host.strip()) and port.isdigit() and 1 <= int(port) <= 65535


@dataclass(frozen=True)
class TrainArgs(Generic[C]):
    """The whole command line: run options and the agent's config; `given`, the fields the
    command line set explicitly (a flag that does not apply is an error even at its
    default)."""

    run: RunArgs
    config: C
    given: frozenset[str] = frozenset()


# What --resume may change: the budget, the display, the evaluation at the end, and where
# the run executes (devices, processes, threads). Everything that defines the experiment is
# read from the run folder; an explicit flag that differs from it is an error.
RESUME_MAY_CHANGE = (
    "total_steps", "max_minutes", "progress", "iterations_per_sync", "log_every", "eval_episodes",
    "eval_greedy", "num_devices",
    "num_threads", "coordinator_address", "num_processes", "process_id", "resume", "run_dir",
)  # fmt: skip


def flag_value(argv: list[str], name: str) -> str | None:
    """The value of flag `name` (`--name V` or `--name=V`) in `argv`; the last one wins, as
    in tyro. A flag followed by another flag has no value here (tyro reports it)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def _flag_names(argv: list[str]) -> list[str]:
    """The field name of every flag in `argv`, in order (`--no-x` is `x`)."""
    names = []
    for arg in argv:
        if arg.startswith("--") and len(arg) > 2:
            name = arg[2:].split("=", 1)[0].replace("-", "_")
            names.append(name[3:] if name.startswith("no_") else name)
    return names


def explicit_flags(argv: list[str]) -> set[str]:
    """Field names given explicitly on the command line (`--no-x` counts as `x`)."""
    return set(_flag_names(argv))


def check_given_once(argv: list[str]) -> None:
    """A flag given twice is an error naming it: tyro keeps the last one, so `--vary lr=...
    --vary discount=...` would drop lr without a word (`--x` and `--no-x` count as one flag)."""
    seen = set()
    for name in _flag_names(argv):
        if name in seen:
            hint = " with all its values (--vary A=... B=...)" if name == "vary" else ""
            raise ValueError(
                f"{flag(name)} is given twice (only the last would count); give it once{hint}"
            )
        seen.add(name)


def check_given_apply(argv: list[str], args: TrainArgs) -> None:
    """Every flag given explicitly (and every field --vary varies) has an effect: one that
    needs a switch that is off is an error naming the switch (the configs' `ONLY_WITH`
    tables; a preset's values are not checked here, the user did not give them)."""
    given = explicit_flags(argv)
    if {"exp_name", "run_dir"} <= given:
        raise ValueError(
            "--exp-name does nothing with --run-dir (the run folder is --run-dir; --exp-name "
            "names runs/<exp-name>): give one of them"
        )
    check_only_with(args.run, given)
    check_only_with(args.config, given)
    specs = hparam_specs(args.run)
    check_only_with(args.config, specs, name_of=lambda name: f"--vary {name}")
    # Every spec readable and inside its field's range, before anything is built: --vary's
    # (its errors name --vary) and --sweep-lr's, checked on their own to name their flag.
    from engine.driver import agent_class  # the compiled engine: only where --vary is read

    run, tunable = args.run, agent_class(get_agent(args.run.agent)).tunable
    vary = {k: v for k, v in specs.items() if run.sweep_lr is None or k != "lr"}
    if vary:
        draw_hparams(vary, run.num_seeds, tunable, run.seed)
    if run.sweep_lr is not None:
        try:
            draw_hparams({"lr": run.sweep_lr}, run.num_seeds, tunable, run.seed)
        except ValueError as err:
            raise ValueError(
                f"--sweep-lr must be values or a distribution, as --vary's SPEC ({err}), "
                f"got {run.sweep_lr!r}"
            ) from None


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def lookup(agent: str | None, preset: str | None = None) -> AgentSpec:
    """The spec of `--agent agent` (None: the agent `preset` belongs to, else acer), with
    `--preset preset` (None: its default) checked against it; the errors name the flag."""
    if agent is None:
        agent = preset_owner(preset or "") or "acer"
    try:
        spec = get_agent(agent)
    except ValueError as err:
        raise ValueError(f"--agent: {err}") from None
    try:
        spec.split_preset(preset)
    except ValueError as err:
        raise ValueError(f"--preset: {err}") from None
    return spec


def check_flags(argv: list[str], spec: AgentSpec) -> None:
    """A flag of another agent is an error naming both agents; an unknown one lists close
    matches (tyro would print a box; we want one line)."""
    mine = _fields(RunArgs) | _fields(spec.config_cls) | {"help"}
    for name in sorted(explicit_flags(argv) - mine):
        owners = [s.name for s in all_specs() if name in _fields(s.config_cls)]
        if owners:
            raise ValueError(
                f"{flag(name)} does not apply to --agent {spec.name} (it is a flag of "
                f"{' and '.join(f'--agent {o}' for o in owners)})"
            )
        import difflib

        close = difflib.get_close_matches(name, sorted(mine), n=1)
        hint = f" (did you mean {flag(close[0])}?)" if close else ""
        raise ValueError(f"unknown flag {flag(name)}{hint}; see --agent {spec.name} --help")


def parse(
    argv: list[str], run_default: RunArgs | None = None, config_default: Any = None
) -> TrainArgs:
    """Parse `argv` for the agent it names. Defaults: the preset's, unless given (resume)."""
    check_given_once(argv)
    name, preset = flag_value(argv, "--agent"), None
    if run_default is None:
        preset = flag_value(argv, "--preset")  # checked against the agent by `lookup`
    elif name is None:  # a resumed run: its saved agent
        name = run_default.agent
    spec = lookup(name, preset)
    argv = renamed_flags(argv, spec.config_cls)
    check_flags(argv, spec)
    if run_default is None:
        preset = spec.default_preset if preset is None else preset
        run_values, config_values = spec.split_preset(preset)
        run_default = RunArgs(agent=spec.name, preset=preset, **run_values)
        config_default = spec.config_cls(**config_values)
    run_cls, config_cls = _unchecked(RunArgs), _unchecked(spec.config_cls)
    cli = tyro.cli(
        _Cli[run_cls, config_cls],
        default=_Cli(_recast(run_cls, run_default), _recast(config_cls, config_default)),
        args=argv,
        prog="python -m experiments.train",
        description=f"Agents: {', '.join(agent_names())}. These are the flags of --agent "
        f"{spec.name} ({spec.description}); see another's with --agent NAME --help.",
        config=(tyro.conf.OmitArgPrefixes,),
    )
    # Checked here, outside tyro: a bad value is our one-line ValueError, not tyro's box.
    args = TrainArgs(
        _recast(RunArgs, protocol_run_values(cli.run, explicit_flags(argv))),
        _recast(spec.config_cls, cli.config),
        frozenset(explicit_flags(argv)),
    )
    check_given_apply(argv, args)
    return args


def renamed_flags(argv: list[str], config_cls) -> list[str]:
    """`argv` with the agent config's deprecated flags (`DEPRECATED_FLAGS`: old field -> new
    field) under their new names, each named once on stderr (they go in the next release)."""
    table = getattr(config_cls, "DEPRECATED_FLAGS", {})
    out = []
    for word in argv:
        name, eq, value = word.partition("=")
        old = name[2:].replace("-", "_") if name.startswith("--") else None
        if old in table:
            new = flag(table[old])
            print(f"warning: {name} is deprecated: it is {new} now (the old name goes in 0.4)",
                  file=sys.stderr)  # fmt: skip
            word = new + eq + value
        out.append(word)
    return out


def protocol_run_values(run, given) -> Any:
    """`run` (tyro's unchecked run options) with the run values of its --protocol in place of
    those not given on the command line (RunArgs then refuses a given one that differs)."""
    values = PROTOCOLS.get(run.protocol, {}).get("run", {})
    keep = {name: value for name, value in values.items() if name not in given}
    return dataclasses.replace(run, **keep) if keep else run


R = TypeVar("R")


@dataclass(frozen=True)
class _Cli(Generic[R, C]):
    """The whole command line: run options and the agent's config."""

    run: R
    config: C


@functools.cache
def _unchecked(cls: type) -> type:
    """The dataclass `cls` with its `__post_init__` checks switched off, for tyro to build.

    tyro turns a ValueError raised while it builds a nested dataclass into a box of text and
    exit code 2; `parse` builds the real, checked classes from tyro's values instead."""
    namespace = {
        "__post_init__": lambda self: None,
        "__doc__": cls.__doc__,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    return dataclass(frozen=True)(type(cls.__name__, (cls,), namespace))


def _recast(cls: type, value: Any) -> Any:
    """`value`'s fields as a `cls` (running `cls`'s checks)."""
    return cls(**{f.name: getattr(value, f.name) for f in dataclasses.fields(cls)})


def check_output_file(name: str, path: str | None) -> None:
    """A one-line ValueError naming the flag `name` unless a file can be written at `path`
    (None: no file), its folder made if need be; checked before any work is done."""
    if path is None:
        return
    if not path.strip() or Path(path).is_dir():
        raise ValueError(f"{flag(name)} must be a file path, got {path!r}")
    try:
        check_run_dir_writable(Path(path).parent, what="folder")
    except ValueError as err:
        raise ValueError(f"{flag(name)} {path!r}: {err}") from None


def cli(cls: type[C], argv: list[str] | None = None, **tyro_kwargs) -> C:
    """`tyro.cli(cls)` for a script's argument dataclass, with its `__post_init__` checks
    run outside tyro: a bad value is a one-line `SystemExit("error: ...")` (tyro's own usage
    errors, such as a word for an int flag, stay tyro's)."""
    raw = tyro.cli(_unchecked(cls), args=argv, **tyro_kwargs)
    try:
        return _recast(cls, raw)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def parse_train_args(argv: list[str] | None = None) -> TrainArgs:
    """Parse the CLI of a new run; bad values become a one-line SystemExit."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return parse(argv)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def resume_args(
    argv: list[str], saved: TrainArgs, hooks: dict[str, str] | None = None
) -> TrainArgs:
    """The saved args of a run with the changes `argv` may make on --resume: any other flag
    that differs from the saved value is an error naming it.

    `saved` holds no hooks (engine.common.load_run: a run folder's are never imported)
    and `hooks` names those the run was trained with: each must be given again in `argv` (the
    user's own choice of module, which is imported), and no other may be added."""
    agent = flag_value(argv, "--agent")
    if agent is not None and agent != saved.run.agent:
        raise ValueError(
            f"--agent {agent} differs from the resumed run's --agent {saved.run.agent}"
        )
    new = parse(argv, saved.run, saved.config)
    # The run folder is the one resumed, wherever it was first made (or has been moved to).
    folder = new.run.resume
    if "run_dir" in explicit_flags(argv) and Path(new.run.run_dir) != Path(folder):
        raise ValueError(f"--run-dir {new.run.run_dir} differs from --resume {folder}")
    # A time limit belongs to one invocation (a job's slot), not to the experiment: a resumed
    # run goes on to --total-steps unless given --max-minutes again.
    limit = new.run.max_minutes if "max_minutes" in explicit_flags(argv) else None
    new = dataclasses.replace(
        new, run=dataclasses.replace(new.run, run_dir=folder, max_minutes=limit)
    )
    hooks = hooks or {}
    for name in hook_fields(new.config):
        check_given_again(name, hooks.get(name), getattr(new.config, name), "the resumed run")
    for part in ("run", "config"):
        old_part, new_part = getattr(saved, part), getattr(new, part)
        for f in dataclasses.fields(old_part):
            if f.name in RESUME_MAY_CHANGE or f.name in hook_fields(new_part):
                continue
            before, after = getattr(old_part, f.name), getattr(new_part, f.name)
            if before != after:
                raise ValueError(
                    f"{flag(f.name)} {after!r} differs from the resumed run's {before!r}; "
                    f"only {', '.join(flag(n) for n in RESUME_MAY_CHANGE[:-2])} may change on "
                    "--resume"
                )
    return new
