"""What every agent config shares: field checks with one-line messages that name the flag,
and loading a config back from a run folder's JSON.

An agent's config is a frozen dataclass subclassing `Config` (its `replace`; see
agents/acer/config.py). It is the command line
of `python -m experiments.train --agent NAME`: each field is a flag (`lr` is `--lr`), its
docstring the `--help` text, its default the only default. `__post_init__` checks the fields
with `check`, so a bad value fails before anything is built or compiled, with a message that
names the flag and the allowed range.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable
from typing import Any, Self


def flag(name: str) -> str:
    """The command-line flag of a config field: `replay_ratio` -> `--replay-ratio`."""
    return "--" + name.replace("_", "-")


class ConfigError(ValueError):
    """A config value outside its allowed range; the message is one line naming the flag."""


def field_defaults(config) -> dict[str, Any]:
    """Each field of the dataclass (or dataclass type) `config` and its default."""
    return {f.name: f.default for f in dataclasses.fields(config)}


def check(ok: bool, name: str, value: Any, allowed: str) -> None:
    """Raise `ConfigError("--name must be <allowed>, got <value>")` unless `ok`."""
    if not ok:
        raise ConfigError(f"{flag(name)} must be {allowed}, got {value!r}")


# "Only with" tables. A config (or engine.args.RunArgs) may declare, next to its fields,
#
#     ONLY_WITH: ClassVar[dict[str, str]] = {"priority_exponent": "prioritized", ...}
#
# mapping a field to the switch without which it has no effect. A switch is `name` (on when
# the field is truthy), `!name` (on when it is falsy), `name>N` (on when above the number N)
# or `name=a|b` (on when the field's value, as text, is one of the words). `check_only_with`
# turns a flag that would do nothing into a one-line error naming the missing switch.


def _switch_on(config, switch: str) -> bool:
    if switch.startswith("!"):
        return not getattr(config, switch[1:])
    if ">" in switch:
        name, _, bound = switch.partition(">")
        return getattr(config, name) > float(bound)
    if "=" in switch:
        name, _, words = switch.partition("=")
        return str(getattr(config, name)) in words.split("|")
    return bool(getattr(config, switch))


def describe_switch(switch: str) -> str:
    """A switch as the command line says it: `--prioritized`, `--no-noisy`, `--rnd-coef > 0`,
    `--evolve pbt or cem`."""
    if switch.startswith("!"):
        return flag("no_" + switch[1:])
    if ">" in switch:
        name, _, bound = switch.partition(">")
        return f"{flag(name)} > {bound}"
    if "=" in switch:
        name, _, words = switch.partition("=")
        return f"{flag(name)} {' or '.join(words.split('|'))}"
    return flag(switch)


def _switch_field(switch: str) -> str:
    return switch.lstrip("!").partition(">")[0].partition("=")[0]


def check_only_with(config, given: Iterable[str] | None = None, name_of=flag) -> None:
    """Raise `ConfigError("--field needs --switch")` for a field of `config`'s `ONLY_WITH`
    table (see above) that is set while its switch is off.

    `given`: the fields the user set explicitly (the command line's flags); a preset's values
    are not in it, so `--preset dqn-atari --noisy` keeps the preset's ε schedule, while
    `--noisy --eps-end 0.1` is an error. None (a config's own `__post_init__`): the fields
    whose value differs from the class default count as set, but only for switches that are
    off by default (opt-in features such as --prioritized in DQN), so that a preset's values
    for a feature on by default survive the user switching it off. `name_of` names a field
    in the message (default: its flag)."""
    table = getattr(type(config), "ONLY_WITH", {})
    defaults = field_defaults(config)
    if given is None:
        opt_in = {
            switch
            for switch in set(table.values())
            if not _switch_on(types.SimpleNamespace(**defaults), switch)
        }
        given = [
            name
            for name, switch in table.items()
            if switch in opt_in and getattr(config, name) != defaults[name]
        ]
    given = set(given)
    for name, switch in table.items():
        if name in given and not _switch_on(config, switch):
            raise ConfigError(f"{name_of(name)} needs {describe_switch(switch)}")


def check_only_with_table(cls) -> None:
    """A one-line ValueError unless every entry of `cls.ONLY_WITH` ties a field of `cls` to a
    switch on another field (agents.core.registry checks every agent's config with it: a typo in
    the table would silently disable a check)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    for name, switch in getattr(cls, "ONLY_WITH", {}).items():
        target = _switch_field(switch)
        if name not in fields or target not in fields or target == name:
            raise ValueError(f"{cls.__name__}.ONLY_WITH: bad entry {name!r}: {switch!r}")


def renamed_fields(saved: dict, config_cls) -> dict:
    """`saved` (a config.json's fields) with the former names in the class's `RENAMED` table
    (`old -> new`, a `ClassVar` beside its fields, for old run folders) made current."""
    renamed = getattr(config_cls, "RENAMED", {})
    return {renamed.get(k, k): v for k, v in saved.items()}


def check_positive_int(config, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        check(
            isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            name,
            value,
            "an integer >= 1",
        )


def check_finite(config, *names: str) -> None:
    """Every named float field is finite (inf and NaN are never meant)."""
    for name in names:
        value = getattr(config, name)
        check(isinstance(value, int | float) and math.isfinite(value), name, value, "finite")


def check_floats_finite(config) -> None:
    """Every float field (float or float | None) of `config` is finite or None."""
    hints = typing.get_type_hints(type(config))
    for name in (f.name for f in dataclasses.fields(config)):
        tp = hints[name]
        if tp is float or (
            typing.get_origin(tp) in (typing.Union, types.UnionType)
            and float in typing.get_args(tp)
        ):
            value = getattr(config, name)
            if value is not None:
                check_finite(config, name)


def check_choices(config) -> None:
    """Every `Literal` field of `config` holds one of its words (the command line's parser
    refuses the others itself; this catches a config built in code or read from a file)."""
    hints = typing.get_type_hints(type(config))
    for name in (f.name for f in dataclasses.fields(config)):
        if typing.get_origin(hints[name]) is typing.Literal:
            words = typing.get_args(hints[name])
            check(getattr(config, name) in words, name, getattr(config, name), "|".join(words))


def check_trace_replay(
    config, need: int, unit: str = "traces", sizes: str = "", divisible=("batch_size",)
) -> None:
    """What every trace-replay config checks: `--microbatch-traces` >= 0 and dividing the
    fields `divisible`, and a buffer of at least `need` `unit` (whole traces) per env;
    `sizes` adds the settings behind `need` to the message."""
    m = config.microbatch_traces
    check(m >= 0, "microbatch_traces", m, ">= 0")
    for name in divisible if m else ():
        value = getattr(config, name)
        check(value % m == 0, name, value, f"divisible by --microbatch-traces {m}")
    envs, trace = config.num_envs, config.trace_len
    check(
        config.buffer_size // (envs * trace) >= need, "buffer_size", config.buffer_size,
        f"at least {need} {unit} per env (>= {need * envs * trace} for num_envs={envs}, "
        f"trace_len={trace}{sizes})",
    )  # fmt: skip


def module_from_config(module_cls, config, **given):
    """`module_cls(**given, ...)` (a flax module, a dataclass), its other fields read from the
    config's fields of the same name: a network's setting is a config field, named once."""
    names = {f.name for f in dataclasses.fields(config)}
    shared = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(module_cls)
        if f.init and f.name in names and f.name not in given
    }
    return module_cls(**given, **shared)


def _coerce(name: str, tp: Any, value: Any, where: str) -> Any:
    """JSON value -> the field's type (lists become tuples); a mismatch is a one-line error."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arm in args:
            if arm is type(None):
                continue
            try:
                return _coerce(name, arm, value, where)
            except ValueError:
                continue
        raise ValueError(f"{where}: {name} = {value!r} is not a {tp}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{where}: {name} = {value!r} is not a list")
        item = args[0] if args else Any
        return tuple(_coerce(name, item, v, where) for v in value)
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"{where}: {name} = {value!r} is not one of {list(args)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: {name} = {value!r} is not a bool")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}: {name} = {value!r} is not an int")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}: {name} = {value!r} is not a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ValueError(f"{where}: {name} = {value!r} is not a string")
        return value
    return value


def from_dict(cls, data: Any, where: str, *, ignore_unknown: bool = False):
    """Build the dataclass `cls` from a JSON object, checking keys and types.

    Unknown keys are an error (or skipped with `ignore_unknown`); missing keys take the
    field's default. Every problem is a one-line `ValueError` that names `where`."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - fields)
    if unknown and not ignore_unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)} for {cls.__name__}")
    hints = typing.get_type_hints(cls)
    kwargs = {k: _coerce(k, hints[k], v, where) for k, v in data.items() if k in fields}
    try:
        return cls(**kwargs)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def check_prioritized_replay(config) -> None:
    """The prioritized-replay flags every agent with PER shares (DQN, R2D1, SAC, TD3):
    α = `priority_exponent` and β = `importance_exponent` in [0, 1], and β's annealing
    `importance_exponent_steps` >= 0 (their `ONLY_WITH` entries tie them to --prioritized)."""
    for name in ("priority_exponent", "importance_exponent"):
        check(0.0 <= getattr(config, name) <= 1.0, name, getattr(config, name), "in [0, 1]")
    steps = config.importance_exponent_steps
    check(steps >= 0, "importance_exponent_steps", steps, ">= 0")
    low, high = config.td_error_min, config.td_error_max
    check(low >= 0, "td_error_min", low, ">= 0")
    check(high is None or high > low, "td_error_max", high, f"> --td-error-min {low}")


def check_q_learning(config) -> None:
    """The checks DQN and R2D1 share (their replay, targets, priorities, optimiser and ε
    schedule fields), each a one-line `ConfigError` naming the flag."""
    c = config
    check(c.start_train_at >= 0, "start_train_at", c.start_train_at, ">= 0")
    check(c.replay_ratio > 0, "replay_ratio", c.replay_ratio, "> 0")
    check(0.0 < c.discount <= 1.0, "discount", c.discount, "in (0, 1]")
    check(c.huber_delta >= 0, "huber_delta", c.huber_delta, ">= 0")
    check_prioritized_replay(c)
    check(0.0 <= c.priority_eta <= 1.0, "priority_eta", c.priority_eta, "in [0, 1]")
    check(c.lr > 0, "lr", c.lr, "> 0")
    check(c.anneal_steps >= 0, "anneal_steps", c.anneal_steps, ">= 0 (0: constant)")
    check(c.adam_eps > 0, "adam_eps", c.adam_eps, "> 0")
    check(c.max_grad_norm > 0, "max_grad_norm", c.max_grad_norm, "> 0")
    for name in ("eps_start", "eps_end", "eval_epsilon"):
        check(0.0 <= getattr(c, name) <= 1.0, name, getattr(c, name), "in [0, 1]")
    check(c.eps_decay_steps >= 0, "eps_decay_steps", c.eps_decay_steps, ">= 0")
    check(c.eps_decay_start >= 0, "eps_decay_start", c.eps_decay_start, ">= 0")
    check(all(h >= 1 for h in c.hidden), "hidden", c.hidden, "widths >= 1")


class Config:
    """The base of every agent config (a frozen dataclass)."""

    def replace(self, **changes) -> Self:
        """A copy with `changes` (field=value), checked again by `__post_init__`."""
        return dataclasses.replace(self, **changes)


class ReplayWindow(Config):
    """The replay window of a trace learner (replay.TraceReplay, "Windows"), as config
    properties: a sampled trace starts `learn_len` learnt transitions, which reach
    `lookahead` steps past the trace with the n − 1 steps of their last n-step target, after
    `lookback` steps before it (R2D2's burn-in, Kapturowski et al. 2019, ICLR, §3).

    A mixin for configs with `trace_len` and `n_step`: by default one trace is learnt, with no
    look-back (DQN, feed-forward SAC); the sequence learners (R2D1, recurrent SAC) override
    `learn_len` (their `seq_len`) and `lookback` (their `burn_in`)."""

    @property
    def learn_len(self) -> int:
        """Transitions learnt per sampled trace."""
        return self.trace_len

    @property
    def lookback(self) -> int:
        return 0

    @property
    def lookahead(self) -> int:
        return self.learn_len - self.trace_len + self.n_step - 1

    @property
    def warmup_iterations(self) -> int:
        """Iterations before a trace and its look-back and look-ahead can be sampled (the
        replay update schedule's warm-up, `agents.core.learning.updates_owed`)."""
        return 1 + (self.lookback + self.lookahead) // self.trace_len

    @property
    def min_traces_per_env(self) -> int:
        """The fewest replay traces per env that leave one sampleable window."""
        return 3 + self.lookback // self.trace_len + self.lookahead // self.trace_len


def check_sequence_window(config) -> None:
    """R2D2's sequences on the trace replay (`ReplayWindow`): `burn_in` >= 0 and `seq_len`
    and `burn_in` multiples of `trace_len`, so that a window starts at a trace, where the
    recurrent state was stored (R2D1, recurrent SAC)."""
    check(config.burn_in >= 0, "burn_in", config.burn_in, ">= 0")
    for name in ("seq_len", "burn_in"):
        value = getattr(config, name)
        check(
            value % config.trace_len == 0, name, value,
            f"a multiple of --trace-len {config.trace_len}",
        )  # fmt: skip
