"""What a training run needs, checked before its envs are made, anything is compiled or its
run folder is written: each problem is one line naming the flag.

- Env count: envpool counts envs in an int32, so `--num-envs` × `--num-seeds` must fit in
  one (checked before any env exists).
- Observations: an agent whose `AgentSpec.dict_obs` is False refuses an env with dict
  observations (MiniGrid's), read from a probe env of one.
- Sizes: the agent is built on a stand-in env that has the real env's spec but no envs
  (nothing is allocated: its learner state is `jax.eval_shape`d, its replay only sized), and
  the run's arrays, `--num-seeds` × (learner state + replay + one rollout's observations),
  must fit in the memory of the devices it runs on: the host's physical memory (capped by
  the cgroup limit) on CPU, the devices' `bytes_limit` elsewhere. This is an estimate that
  leaves out the compiled programs' temporaries and the envs' own state: it refuses what
  cannot fit, it does not promise that the rest does.
- Env kinds: a flag of one kind of env only (`ENV_ONLY` tables: --log-std-init for
  continuous actions, --text for observations with a mission, --hidden for vector or dict
  observations) is refused for another; a built-in torso's flag (`TORSO_FIELDS`) beside
  --network too. Both judge what the user chose (given, or set by a preset): a resumed
  run's saved values were accepted when it began, only the resume's own flags count.
- Threads: --num-threads only with an envpool env, and at most one per env.
- Members: at most `MAX_MEMBERS` (each is built one by one: more would sit silent for long
  before the first step).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable

import jax
import numpy as np

from agents.core.config import ConfigError, field_defaults, flag
from agents.core.registry import AgentSpec, agent_names, get_agent
from engine.args import TrainArgs
from engine.driver import agent_class
from envs import VecEnv, make_env, obs_leaves_with_paths
from envs.core import EnvSpec
from envs.partial import FlatObsVecEnv
from networks.torsos import convolves_in_loops_slowly
from replay.memory import tree_bytes

# envpool's EnvPool config holds num_envs (and batch_size) as C++ ints.
MAX_ENVS = 2**31 - 1
# Members of one population (`check_member_count`).
MAX_MEMBERS = 4096

# Config fields that size an agent's networks; the error for a learner state too large for
# memory names those of them that the config changed (else those in use).
NETWORK_SIZE_FIELDS = (
    "hidden",
    "lstm_size",
    "torso_out",
    "num_atoms",
    "num_critics",
    "rnd_features",
)


# "Env only" tables. A config may declare, next to `ONLY_WITH`,
#
#     ENV_ONLY: ClassVar[dict[str, str]] = {"log_std_init": "continuous", ...}
#
# mapping a field to the kind of env without which it has no effect: "continuous" actions,
# "discrete" actions, "text" (observations with a mission: MiniGrid's), "frames" (Atari's
# frame stacks), "mlp" (vector or dict observations: the built-in torso's MLP widths) or
# "vectors" (vector observations: the MLP torso's activation). `check_env_only`
# (this module, once the env's spec is known) turns such a field, given as a flag
# or set to another value than its default, for an env of another kind, into a one-line
# error.

ENV_KINDS = {
    "continuous": "continuous actions",
    "discrete": "discrete actions",
    "text": "observations with a mission (MiniGrid's)",
    "frames": "frame-stack image observations (Atari's)",
    "mlp": "vector or dict observations (an image's torso is a CNN of fixed widths)",
    "vectors": "vector observations",
}


def chosen_fields(config, given: Iterable[str], saved: bool = False) -> set[str]:
    """The fields of `config` the user chose: those given on the command line (`given`) and,
    for a new run, every field whose value differs from its default (a preset's). A resumed
    run's (`saved`) other values are the run's own, accepted when it began: only what the
    resume gives counts."""
    chosen = set(given)
    if not saved:
        defaults = field_defaults(config)
        chosen |= {name for name, default in defaults.items() if getattr(config, name) != default}
    return chosen


def check_env_only(config, kinds: Iterable[str], env_id: str, chosen: Iterable[str]) -> None:
    """Raise `ConfigError("--field applies to <kind> only; <env> has none")` for a field of
    `config`'s `ENV_ONLY` table that the user chose (`chosen_fields`) while the env, of
    `kinds`, is not of the field's kind. With a `preprocess_obs` hook the torso's kinds
    ("mlp", "vectors") are not checked: the networks see the hook's output."""
    kinds, chosen = set(kinds), set(chosen)
    if getattr(config, "preprocess_obs", None) is not None:
        # the networks see the hook's output, not the env's observations: its torso's kind
        # is not the env's to judge
        kinds |= {"mlp", "vectors"}
    for name, kind in getattr(type(config), "ENV_ONLY", {}).items():
        if kind not in kinds and name in chosen:
            raise ConfigError(f"{flag(name)} applies to {ENV_KINDS[kind]} only; {env_id} has none")


def as_flags(name: str, value) -> str:
    """A field's value as the command line gives it: `--cnn 'data-efficient'`, `--hidden 64 64`,
    `--layer-norm` / `--no-layer-norm`."""
    if isinstance(value, bool):
        return flag(name if value else "no_" + name)
    if isinstance(value, tuple | list):
        return " ".join([flag(name), *map(str, value)])
    return f"{flag(name)} {value!r}"


def check_torso_fields(config, chosen: Iterable[str]) -> None:
    """A one-line `ConfigError` for a field of the config's `TORSO_FIELDS` (a `ClassVar`
    tuple: the built-in torso's fields, which a `network` hook replaces) that the user chose
    (`chosen_fields`) beside a `network` hook: it would do nothing."""
    if getattr(config, "network", None) is None:
        return
    defaults = field_defaults(config)
    for name in getattr(type(config), "TORSO_FIELDS", ()):
        if name in chosen:
            raise ConfigError(
                f"{as_flags(name, getattr(config, name))} does not apply with "
                f"{flag('network')}, whose module replaces the built-in torso (give "
                f"{as_flags(name, defaults[name])})"
            )


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Bytes one member of a run holds: the learner state (parameters, optimizer state,
    target and averaged copies), the replay, and one rollout's observations."""

    learner: int
    parameters: int
    replay: int
    rollout: int

    @property
    def total(self) -> int:
        return self.learner + self.replay + self.rollout


def check_run(args: TrainArgs) -> EnvSpec:
    """Raise a one-line ValueError naming the flag if the run cannot be made (module
    docstring); returns the env's spec (of one env). `--num-envs` must already divide over
    the processes (this process builds its share)."""
    run, config = args.run, args.config
    spec = get_agent(run.agent)
    check_env_count(config.num_envs, run.num_seeds)
    env_spec = probe_env_spec(args)
    check_observations(spec, env_spec)
    chosen = chosen_fields(config, args.given, saved=run.resume is not None)
    check_env_only(config, env_kinds(env_spec), env_spec.env_id, chosen)
    check_torso_fields(config, chosen)
    check_threads(run.num_threads, env_spec, config.num_envs // jax.process_count() * run.num_seeds)
    footprint = member_footprint(spec, args, env_spec, config.num_envs // jax.process_count())
    check_memory(args, footprint, memory_bytes(run.num_devices))
    check_member_count(run.num_seeds)
    return env_spec


def env_kinds(env_spec: EnvSpec) -> set[str]:
    """The kinds of env (`ENV_KINDS`) `env_spec` is."""
    kinds = {"discrete" if env_spec.discrete else "continuous"}
    if any(leaf.tokens for _, leaf in obs_leaves_with_paths(env_spec.obs_spec)):
        kinds.add("text")
    if not env_spec.pytree_obs and convolves_in_loops_slowly(env_spec.obs_spec):
        kinds.add("frames")  # the Nature CNN's input: a frame stack of >= 36x36 pixels
    vectors = not env_spec.pytree_obs and len(env_spec.obs_shape) == 1
    if vectors:
        kinds.add("vectors")
    if vectors or env_spec.pytree_obs:
        kinds.add("mlp")  # make_torso's MLP (a DictEncoder's after its concatenation)
    return kinds


def check_threads(num_threads: int, env_spec: EnvSpec, envs: int) -> None:
    """--num-threads sets envpool's worker threads: it does nothing for a gymnasium env
    (stepped in this process), and more threads than the `envs` a process steps would each
    be a thread of the OS (envpool aborts when it cannot start them) with nothing to do."""
    if not num_threads:
        return
    if env_spec.backend != "envpool":
        raise ValueError(
            f"--num-threads needs an envpool env: --env {env_spec.env_id} is a "
            f"{env_spec.backend} env, stepped in this process"
        )
    if num_threads > envs:
        raise ValueError(
            f"--num-threads {num_threads:,} is more than the {envs:,} envs it steps (a thread "
            f"steps one env at a time): at most {envs:,}"
        )


def check_member_count(members: int) -> None:
    """At most `MAX_MEMBERS` members: each is built as its own agent, one by one, before
    anything else happens (tens of ms each), so a population that fits in memory but has
    10**5 members would sit silent for most of an hour before its first step."""
    if members > MAX_MEMBERS:
        raise ValueError(
            f"--num-seeds {members:,}: at most {MAX_MEMBERS:,} members (each is built as its "
            "own agent, one by one, before training starts); split it into several runs"
        )


def check_env_count(num_envs: int, members: int) -> None:
    """`num_envs` per member × `members` envs must fit envpool's int32 count."""
    if num_envs > MAX_ENVS:
        raise ValueError(
            f"--num-envs {num_envs:,} is more envs than envpool can make (at most {MAX_ENVS:,})"
        )
    if num_envs * members > MAX_ENVS:
        raise ValueError(
            f"--num-seeds {members:,}: {members:,} members x --num-envs {num_envs:,} = "
            f"{num_envs * members:,} envs, more than envpool can make (at most {MAX_ENVS:,})"
        )


def probe_env_spec(args: TrainArgs) -> EnvSpec:
    """The spec of the run's env, from one env made and closed again. --flatten-obs on an
    env whose observations are already vectors would do nothing: a one-line error (here,
    not in the env: a run folder saved with it still evaluates)."""
    run = args.run
    env = make_env(run.env, 1, run.seed, train=True, reward_clip=run.reward_clip)
    try:
        spec = env.spec
        if run.flatten_obs:
            if not spec.pytree_obs and len(spec.obs_shape) <= 1:
                by = "" if "flatten_obs" in args.given else f" (set by --preset {run.preset})"
                raise ValueError(
                    f"--flatten-obs{by}: {spec.env_id}'s observations are already vectors "
                    f"{list(spec.obs_shape)}"
                )
            spec = FlatObsVecEnv(env).spec  # what make_env(..., flatten_obs=True) hands out
        if run.privileged_obs:  # as make_env(..., privileged_obs=...) declares them
            spec = dataclasses.replace(spec, privileged_obs=tuple(run.privileged_obs))
        return spec
    finally:
        env.close()


def check_observations(spec: AgentSpec, env_spec: EnvSpec) -> None:
    """An agent that does not take dict observations refuses an env that has them, and one
    that does not read privileged observations (`AgentSpec.privileged_obs`) an env that
    declares some (--privileged-obs)."""
    if env_spec.privileged_obs and not spec.privileged_obs:
        takers = [n for n in agent_names() if get_agent(n).privileged_obs]
        raise ValueError(
            f"--privileged-obs: --agent {spec.name} does not keep privileged dimensions from "
            f"its networks; agents that do: {', '.join(takers)}"
        )
    if env_spec.pytree_obs and not spec.dict_obs:
        obs = env_spec.obs_spec
        keys = ", ".join(obs) if isinstance(obs, dict) else type(obs).__name__
        takers = [n for n in agent_names() if get_agent(n).dict_obs]
        raise ValueError(
            f"--agent {spec.name} takes array observations only; --env {env_spec.env_id} has "
            f"dict observations ({keys}); agents that take them: {', '.join(takers)}"
        )


def member_footprint(
    spec: AgentSpec, args: TrainArgs, env_spec: EnvSpec, num_envs: int
) -> Footprint:
    """The `Footprint` of one member, from the agent built on a stand-in env of `num_envs`
    envs (this process's) with the real env's spec: nothing is allocated or compiled. The
    agent's own checks against the env (action space, observation shapes, replay size) run
    here, so they too fail before any env is made."""
    stand_in = VecEnv(dataclasses.replace(env_spec, num_envs=num_envs))
    agent = agent_class(spec)(args.config, stand_in, seed=args.run.seed, mesh=None)
    try:
        learner = jax.eval_shape(agent.init_learner, jax.random.PRNGKey(0))
        per_transition = agent.bytes_per_transition
    finally:
        agent.close()
    obs_bytes = sum(
        math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize
        for _, leaf in obs_leaves_with_paths(env_spec.obs_spec)
    )
    config = args.config
    replay = int(per_transition * config.buffer_size) if per_transition else 0
    return Footprint(
        learner=tree_bytes(learner),
        parameters=sum(math.prod(x.shape) for x in jax.tree.leaves(learner.params)),
        replay=replay,
        rollout=config.num_envs * (config.trace_len + 1) * obs_bytes,
    )


def memory_bytes(num_devices: int | None) -> tuple[int, str] | None:
    """(bytes, what they are) the run's arrays may take at most: on CPU the host's physical
    memory, capped by its cgroup's limit; elsewhere the `bytes_limit` of the devices used
    (`num_devices`, None: all local ones). None when the backend does not tell."""
    devices = jax.local_devices()
    if num_devices is not None:
        devices = devices[:num_devices]
    if devices[0].platform == "cpu":
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
        limit = _cgroup_limit()
        if limit is not None and limit < total:
            return limit, "the memory limit of this cgroup"
        return total, "host memory"
    limits = []
    for device in devices:
        try:
            stats = device.memory_stats() or {}
        except Exception:  # backends without memory stats raise various errors
            return None
        if "bytes_limit" not in stats:
            return None
        limits.append(int(stats["bytes_limit"]))
    return sum(limits), f"memory of {len(limits)} {devices[0].platform} device(s)"


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def check_memory(args: TrainArgs, footprint: Footprint, memory: tuple[int, str] | None) -> None:
    """The run's members must fit in `memory` (None: unknown, no check); the error names the
    flag behind the largest part: --num-seeds when one member fits, else --hidden (and the
    other network sizes), --buffer-size or --num-envs."""
    if memory is None:
        return
    limit, where = memory
    members, config = args.run.num_seeds, args.config
    one = footprint.total
    if members * one <= limit:
        return
    than = f"more than the {_size(limit)} of {where}"
    if one <= limit:
        parts = ", ".join(
            f"{name} {_size(size)}"
            for name, size in (
                ("learner", footprint.learner),
                ("replay", footprint.replay),
                ("rollout", footprint.rollout),
            )
            if size
        )
        raise ValueError(
            f"--num-seeds {members:,}: {members:,} members need {_size(members * one)} "
            f"({_size(one)} each: {parts}), {than}"
        )
    largest = max(("learner", "replay", "rollout"), key=lambda part: getattr(footprint, part))
    if largest == "learner":
        raise ValueError(
            f"{_network_flags(config)}: the learner state needs {_size(footprint.learner)} "
            f"({footprint.parameters:,} parameters, with optimizer state and target copies), "
            f"{than}"
        )
    if largest == "replay":
        raise ValueError(
            f"--buffer-size {config.buffer_size:,}: the replay needs "
            f"{_size(footprint.replay)}, {than}"
        )
    raise ValueError(
        f"--num-envs {config.num_envs:,}: one rollout of --trace-len {config.trace_len} steps "
        f"needs {_size(footprint.rollout)} of observations, {than}"
    )


def _network_flags(config) -> str:
    """The network-size flags of `config` with their values: those it changed from the
    defaults, or else those in use (not 0 or empty)."""
    defaults = field_defaults(config)
    present = [name for name in NETWORK_SIZE_FIELDS if name in defaults and getattr(config, name)]
    changed = [name for name in present if getattr(config, name) != defaults[name]]
    return ", ".join(_flag_text(name, getattr(config, name)) for name in changed or present)


def _flag_text(name: str, value) -> str:
    shown = " ".join(map(str, value)) if isinstance(value, tuple) else str(value)
    return f"--{name.replace('_', '-')} {shown}"


def _size(n: float) -> str:
    """`n` bytes for a message, in the largest binary unit it reaches (one decimal)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"
