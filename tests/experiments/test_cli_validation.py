"""Every bad input of every entry point is rejected up front, with one line naming the flag.

The train cases are derived from the dataclass fields of the run options and of every
registered agent's config, so a new flag is covered by the generic invalid values of its
type (negative counts, 0 for sizes, NaN and ±inf for floats, -1 for non-negative floats,
1.5 for probabilities and discounts, "" for strings); the exceptions and the cross-field
rules are listed by hand below. Each generic value is refused by the dataclass itself, built
directly for every agent (cheap); the command line is given it once per check that refuses
it: once for a check shared by several agents (NaN and ±inf of every float field are one
function's), once per agent for an agent's own check (its bound may differ).

Entry points are called in-process: they raise `SystemExit("error: ...")`, which Python
prints as that one line with exit status 1. A few subprocess runs check exactly that.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import time
import types
import typing
from pathlib import Path

import numpy as np
import pytest

from agents.core.config import describe_switch, field_defaults, flag
from agents.core.registry import BUILTIN, get_agent
from benchmarks import bench_losses, bench_replay, bench_scaling, bench_throughput
from engine import preflight, runner
from engine.args import RunArgs, cli, parse
from engine.protocol import ChunkOutput
from engine.runner import Runner
from experiments import evaluate, plot, train

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--num-envs", "4", "--trace-len", "5", "--batch-size", "4", "--buffer-size", "400"]


# --------------------------------------------------------------------------- helpers


class Reached(Exception):
    """An entry point got past its checks: the input was accepted."""


@pytest.fixture
def no_training(monkeypatch):
    """Training (compile, checkpoints, metrics) fails the test; run folders chosen are
    recorded in the list returned."""
    chosen = []

    def run(self, env, agent):
        chosen.append(self.run_dir)
        raise Reached(f"training started in {self.run_dir}")

    monkeypatch.setattr(Runner, "_run", run)
    return chosen


def rejected(main, argv, capsys, reports: str | None = None) -> str:
    """The one-line message `main(argv)` exits with; nothing else may reach stderr but
    lines starting with `reports` (what was done on the way, such as a damaged checkpoint
    set aside)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    message = exit_info.value.code
    err = capsys.readouterr().err
    assert isinstance(message, str), f"{argv}: exit code {message!r}, stderr:\n{err}"
    assert message.startswith("error: ") and "\n" not in message, message
    other = [line for line in err.splitlines() if not (reports and line.startswith(reports))]
    assert not other, f"{argv} printed to stderr besides its message:\n{err}"
    return message


def tree(path: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under `path`: to see that nothing was written."""
    return {
        str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _strip_optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(arms) == 1:
            return arms[0], True
    return tp, False


# --------------------------------------------------------------------------- train: per field

# Integer fields for which 0 is meaningful (every other integer field must refuse 0, so a
# new agent's or flag's zero-means-off integer must be listed here); every integer field
# refuses -1.
ZERO_OK = {
    RunArgs: {
        "seed",
        "num_threads",
        "process_id",
        "eval_episodes",
        "evolve_replace",
        "iterations_per_sync",
        "log_every",
        "privileged_obs",  # indices
    },
    get_agent("acer").config_cls: {"start_train_at", "lstm_size", "microbatch_traces"},
    get_agent("reactor").config_cls: {
        "start_train_at",
        "priority_neighbours",
        "microbatch_traces",
        "anneal_steps",
    },
    get_agent("dqn").config_cls: {
        "start_train_at",
        "microbatch_traces",
        "eps_decay_steps",
        "eps_decay_start",
        "importance_exponent_steps",
        "anneal_steps",
        "head_hidden",
    },
    get_agent("r2d1").config_cls: {
        "anneal_steps",
        "start_train_at",
        "importance_exponent_steps",
        "microbatch_traces",
        "eps_decay_steps",
        "eps_decay_start",
        "burn_in",
    },
    get_agent("sac").config_cls: {
        "start_train_at",
        "burn_in",
        "importance_exponent_steps",
        "target_update_period",
    },
    get_agent("td3").config_cls: {
        "start_train_at",
        "importance_exponent_steps",
        "target_update_period",
    },
    get_agent("ppo").config_cls: {"anneal_steps", "lstm_size", "recurrence", "microbatch_traces"},
    get_agent("a2c").config_cls: {
        "anneal_steps",
        "lstm_size",
        "recurrence",
        "microbatch_traces",
        "n_step",
    },
    get_agent("pqn").config_cls: {"anneal_steps"},
    bench_throughput.BenchArgs: {"num_threads", "warmup"},
    bench_scaling.ScalingArgs: set(),
    bench_losses.Args: {"seed"},
    bench_replay.Args: {"seed"},
    evaluate.EvalArgs: {"num_envs", "step", "seed", "worst"},
}
# Float fields that may be negative; every other float field must refuse -1.
NEGATIVE_OK = {"v_min", "v_max", "target_entropy", "log_std_min", "log_std_max", "log_std_init"}
# Probabilities, discounts and decays: must refuse 1.5.
UNIT_INTERVAL = {
    "discount", "retrace_lambda", "tau", "uniform_mix", "adam_b1", "adam_b2", "priority_epsilon",
    "priority_exponent", "importance_exponent", "priority_eta", "eps_start", "eps_end",
    "eval_epsilon", "target_entropy_scale",
    "gae_lambda", "rmsprop_alpha", "td_lambda", "vtrace_lambda", "icm_beta",
}  # fmt: skip
# Tuples of ints that may be empty (every other one must refuse no values).
EMPTY_OK = {"hidden"}


def generic_invalid(cls) -> list[tuple[str, list[str]]]:
    """(field, [invalid values as command-line text]) for every field of `cls` whose type
    has generic invalid values."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp, _ = _strip_optional(hints[f.name])
        name = f.name
        if tp is int:
            values = ["-1"] + ([] if name in ZERO_OK.get(cls, ()) else ["0"])
        elif tp is float:
            values = ["nan", "inf", "-inf"]
            values += [] if name in NEGATIVE_OK else ["-1"]
            values += ["1.5"] if name in UNIT_INTERVAL else []
        elif tp is str:
            values = [""]
        elif typing.get_origin(tp) is tuple and typing.get_args(tp)[0] is int:
            # Sizes refuse 0; indices (ZERO_OK) refuse -1. None: the flag alone.
            values = ["-1" if name in ZERO_OK.get(cls, ()) else "0"]
            values += [] if name in EMPTY_OK else [None]
        else:
            continue  # bools and Literals: tyro's own usage errors (see below)
        out.append((name, values))
    return out


def _flag_argv(name: str, value: str | None) -> list[str]:
    return [flag(name)] if value is None else [f"{flag(name)}={value}"]


# The run options, then every built-in agent's config (its fields are its flags).
TRAIN_PARTS = {
    "run": (RunArgs, ["--agent", "acer"]),
    **{name: (get_agent(name).config_cls, ["--agent", name]) for name in sorted(BUILTIN)},
}
SKIP_GENERIC = {"resume"}  # --resume "" is below, with the other resume cases
# Run options refused by the command line's parsing (engine.args.lookup), not by RunArgs.
PARSED = {"agent", "preset"}

# Which check refuses each generic case. The dataclass of its part is built directly, from
# its agent's default preset as train.main starts, with the one bad value; the check is the
# function that raised (those that only word the message skipped).
WORDING = {"check", "check_finite", "RunArgs.__post_init__.<locals>.need"}
# Checks that treat every field they are given alike: the command line is shown reaching
# each once per kind of field and value; that every agent's config runs them on each of
# its fields is shown by building the configs directly
# (test_every_config_refuses_the_generic_values_itself).
UNIFORM = {"check_floats_finite", "check_positive_int"}
# Checks shared by several parts, and the parts whose generic cases they refuse: one command
# line case per (check, field, value), the same test showing it for the others. Every other
# check is one part's own (its `__post_init__`): one command line case per (part, field,
# value), since its bound can differ from another agent's. check_only_with's: the value is
# refused because its switch is off (the flag would do nothing), not by a range check.
SHARED_CHECKS = {
    "check_floats_finite": set(BUILTIN),
    "check_positive_int": set(BUILTIN),
    "check_trace_replay": {"acer", "dqn", "r2d1", "reactor"},
    "check_q_learning": {"dqn", "r2d1"},
    "check_prioritized_replay": {"dqn", "r2d1", "sac", "td3"},
    "OnPolicyConfig.__post_init__": {"ppo", "a2c"},
    # hooks (agents.core.hooks)
    "_import_function": set(BUILTIN),  # every agent's --network
    "OffPolicyConfig.__post_init__": {"sac", "td3"},
    "check_only_with": {"run", "sac"},
    "check_icm": {"a2c", "dqn", "ppo", "sac", "td3"},  # ICM's flags (agents.core.icm)
}


@functools.cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _typed(cls, name: str, text: str | None):
    """A generic invalid value as the field's value (what tyro parses the text to)."""
    tp, _ = _strip_optional(_hints(cls)[name])
    if text is None:  # the flag alone: no values
        return ()
    return tp(text) if tp in (int, float, str) else (int(text),)


def refused_by(part: str, name: str, text: str | None) -> tuple[str, str | None]:
    """(the check that refuses field `name` of `part` at `text`, its message); ("parse",
    None) where the dataclass takes the value."""
    cls, prefix = TRAIN_PARTS[part]
    spec = get_agent(prefix[1])
    run_values, config_values = spec.split_preset(spec.default_preset)
    values = config_values
    if cls is RunArgs:
        values = {"agent": spec.name, "preset": spec.default_preset, **run_values}
    try:
        cls(**{**values, name: _typed(cls, name, text)})
    except ValueError as err:
        frames, tb = [], err.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame.f_code.co_qualname)
            tb = tb.tb_next
        return next(f for f in reversed(frames) if f not in WORDING), str(err)
    return "parse", None


def _case_key(part: str, name: str, text: str | None, check: str) -> tuple:
    """What one command line case stands for: a uniform check's kind of field and value, a
    shared check's field and value, a part's own check's (or the parser's) part too."""
    if check in UNIFORM:
        tp, optional = _strip_optional(_hints(TRAIN_PARTS[part][0])[name])
        return check, tp.__name__ + " | None" * optional, text
    return (check, name, text) if check in SHARED_CHECKS else (check, part, name, text)


# (part, field, value as text) -> (check, message), for every generic invalid value.
GENERIC_REFUSALS = {
    (part, name, v): refused_by(part, name, v)
    for part, (cls, _) in TRAIN_PARTS.items()
    for name, values in generic_invalid(cls)
    if name not in SKIP_GENERIC
    for v in values
}


def _one_case_per_key() -> dict[tuple, tuple]:
    """`_case_key` -> the (part, field, value) the command line is given for it: the first
    part's."""
    cases: dict[tuple, tuple] = {}
    for case, (check, _) in GENERIC_REFUSALS.items():
        cases.setdefault(_case_key(*case, check), case)
    return cases


GENERIC_CASES = _one_case_per_key()


def _generic_param(part: str, name: str, text: str | None):
    """A command line case, to be refused with the dataclass's own message (by its check)."""
    argv = [*(TRAIN_PARTS[part][1] if name != "agent" else []), *_flag_argv(name, text)]
    needle = GENERIC_REFUSALS[part, name, text][1] or f"error: {flag(name)}: "
    return pytest.param(argv, needle, id=f"{part}:{name}={text}")


GENERIC_TRAIN = [_generic_param(*case) for case in GENERIC_CASES.values()]

# Cross-field rules, places, names: (argv, text the message must hold).
EXPLICIT_TRAIN = [
    (["--agent", "dqnn"], "--agent"),
    (["--agent", "acer", "--agent", "dqnn"], "--agent"),
    (["--agent", "dqn", "--distributional", "--value-rescale"], "--value-rescale"),
    (["--agent", "dqn", "--num-atoms", "1"], "--num-atoms"),
    (["--agent", "dqn", "--buffer-size", "64"], "--buffer-size"),
    (["--agent", "dqn", "--importance-exponent-steps", "1000"], "--importance-exponent-steps"),
    (["--agent", "r2d1", "--seq-len", "15"], "--seq-len"),
    (["--agent", "r2d1", "--burn-in", "5"], "--burn-in"),
    (["--agent", "r2d1", "--buffer-size", "100"], "--buffer-size"),
    (["--agent", "acer", "--preset", "reactor-classic"], "--preset"),
    (["--agent", "reactor", "--preset", "acer-atari"], "--preset"),
    (["--preset", "acer-nope"], "--preset: unknown preset 'acer-nope' for --agent acer"),
    (["--agent", "reactor", "--trust-region-delta", "2"], "--trust-region-delta"),
    (["--beta-loo-c", "1"], "--beta-loo-c"),
    (["--total-step", "5"], "--total-step"),
    (["--iterations-per-sync", "1025"], "--iterations-per-sync"),
    (["--seed", str(2**30)], "--seed"),
    (["--exp-name", "a/b"], "--exp-name"),
    (["--exp-name", ".."], "--exp-name"),
    (["--process-id", "1"], "--process-id"),
    (["--num-processes", "2"], "--coordinator-address"),
    (["--coordinator-address", "localhost"], "--coordinator-address"),
    (["--coordinator-address", "localhost:70000"], "--coordinator-address"),
    (["--hidden", "64", "-1"], "--hidden"),
    (["--buffer-size", "10"], "--buffer-size must be at least 3 traces per env"),
    (["--num-envs", "3", "--microbatch-traces", "2"],
     "--num-envs must be divisible by --microbatch-traces 2"),
    (["--agent", "reactor", "--batch-size", "3", "--microbatch-traces", "2"], "--batch-size"),
    (["--agent", "reactor", "--v-min", "5", "--v-max", "5"], "--v-min"),
    (["--agent", "reactor", "--num-atoms", "1"], "--num-atoms"),
    (["--agent", "ppo", "--num-minibatches", "3"], "--num-minibatches"),
    (["--agent", "ppo", "--lstm-size", "8", "--num-minibatches", "3"], "--num-minibatches"),
    (["--agent", "ppo", "--recurrence", "4"], "--recurrence"),  # needs --lstm-size
    (["--agent", "ppo", "--lstm-size", "8", "--recurrence", "5"], "--recurrence"),
    (["--agent", "ppo", "--microbatch-traces", "7"], "--microbatch-traces"),
    (["--agent", "ppo", "--prev-action-reward"], "--prev-action-reward"),  # needs --lstm-size
    (["--agent", "a2c", "--prev-action-reward"], "--prev-action-reward"),
    (["--agent", "ppo", "--reshape-reward", "nosuchmodule_xyz:f"], "--reshape-reward"),
    (["--agent", "ppo", "--preprocess-obs", "os.path:nosuchfn"], "--preprocess-obs"),
    (["--agent", "a2c", "--preprocess-obs", "nocolon"], "--preprocess-obs"),
    (["--agent", "a2c", "--clip-eps", "0.2"], "--clip-eps"),  # a PPO flag
    (["--agent", "ppo", "--num-devices", "4", "--num-envs", "6"], "--num-envs"),
    (["--env", "Pongg-v5"], "--env: unknown environment 'Pongg-v5'; did you mean: Pong-v5"),
    # Continuous ACER's flags with discrete actions, and discrete ACER's with continuous ones.
    (["--sdn-samples", "5"], "--sdn-samples"),
    (["--log-std-init", "-1"], "--log-std-init"),
    (["--preset", "acer-mujoco", "--env", "CartPole-v1"], "--sdn-samples"),
    (["--env", "Pendulum-v1", "--lstm-size", "8"], "--lstm-size"),
    (["--env", "Pendulum-v1", "--sdn-samples", "0"], "--sdn-samples"),
    (["--agent", "td3", "--env", "CartPole-v1"], "CartPole-v1"),  # TD3 needs continuous ones
    (["--agent", "sac", "--env", "Pong-v5", "--normalize-obs"],  # vectors only: SAC's images
     "--normalize-obs takes vector observations; Pong-v5 has observations of shape"),  # take none
    (["--agent", "sac", "--num-critics", "2", "--critic-subset", "3"], "--critic-subset"),
    (["--agent", "sac", "--target", "retrace"], "--target"),
    (["--agent", "sac", "--actor-q", "max"], "--actor-q"),
    (["--agent", "sac", "--overwrite-mu"], "--overwrite-mu"),
    (["--agent", "sac", "--log-std-min", "3"], "--log-std-min"),
    # Flags of issue 13 where they do not apply: NoisyNet is DQN's (discrete actions), the
    # off-policy --normalize-obs / RND knobs need their switch, RND is not PPO's.
    (["--agent", "td3", "--noisy"], "--noisy"),
    (["--agent", "r2d1", "--noisy"], "--noisy"),
    (["--agent", "dqn", "--noisy", "--env", "Pendulum-v1"], "Pendulum-v1"),
    (["--agent", "sac", "--obs-clip", "3"], "--obs-clip"),
    (["--agent", "td3", "--rnd-lr", "0.001"], "--rnd-lr"),
    (["--agent", "sac", "--rnd-features", "32"], "--rnd-features"),
    (["--agent", "ppo", "--rnd-coef", "0.1"], "--rnd-coef"),
    # ICM's (issue 63): one curiosity at a time, vectors only (its
    # flags without --icm-coef are the ONLY_WITH cases below).
    (["--agent", "sac", "--icm-coef", "0.1", "--rnd-coef", "0.1"], "one curiosity at a time"),
    (["--agent", "sac", "--icm-coef", "0.1", "--icm-beta", "1.5"], "--icm-beta must be in"),
    (["--agent", "ppo", "--env", "gymnax/Breakout-MinAtar", "--icm-coef", "0.1"],
     "--icm-coef takes vector observations; gymnax/Breakout-MinAtar has observations of"),
    (["--agent", "dqn", "--env", "gymnax/Asterix-MinAtar", "--icm-coef", "0.1"],
     "--icm-coef takes vector observations"),
    (["--agent", "r2d1", "--icm-coef", "0.1"], "--icm-coef"),  # not the recurrent learners'
    (["--agent", "dqn", "--normalize-obs"], "--normalize-obs"),
    (["--num-devices", "64"], "--num-devices"),
    (["--num-devices", "4", "--num-envs", "6"], "--num-envs"),
    (
        ["--env", "Pong-v5", "--num-envs", "2", "--num-devices", "1", "--buffer-size", str(10**11)],
        "GiB is available; lower --buffer-size",
    ),
    # A flag given twice: tyro would keep the last one without a word.
    (["--agent", "acer", "--agent", "acer"], "--agent is given twice"),
    (["--lr", "1e-3", "--lr", "1e-4"], "--lr is given twice"),
    (["--hidden", "8", "--hidden=16"], "--hidden is given twice"),
    (["--agent", "dqn", "--prioritized", "--no-prioritized"], "--prioritized is given twice"),
    (["--num-seeds", "2", "--vary", "lr=1e-3,1e-4", "--vary", "discount=0.9,0.99"],
     "--vary is given twice"),
    # Flags that would do nothing without their switch (every table entry is below too).
    (["--agent", "dqn", "--priority-exponent", "0.9"], "--priority-exponent needs --prioritized"),
    (["--agent", "dqn", "--v-max", "500"], "--v-max needs --distributional"),
    (["--agent", "dqn", "--noisy", "--eps-end", "0.1"], "--eps-end needs --no-noisy"),
    (["--agent", "sac", "--no-autotune", "--num-seeds", "2", "--vary", "alpha_lr=1e-3,1e-4"],
     "--vary alpha_lr needs --autotune"),
    # Dict observations for an agent that takes arrays only (every agent: further below).
    (["--agent", "dqn", "--env", "MiniGrid-Empty-5x5-v0"], "takes array observations only"),
    # Sizes that cannot fit, checked before any env is made or anything compiled.
    (["--hidden", "1000000", "1000000"], "--hidden 1000000 1000000: the learner state needs"),
    (["--agent", "ppo", "--num-envs", "3000000000"], "--num-envs 3,000,000,000 is more envs"),
    (["--num-seeds", "1000000000"], "--num-seeds 1,000,000,000: 1,000,000,000 members x"),
    (["--num-seeds", "100000", "--hidden", "2048", "2048"], "--num-seeds 100,000: 100,000 members"),
    (["--agent", "ppo", "--num-envs", "100000000", "--trace-len", "1000"],
     "--num-envs 100,000,000"),
    # envpool's threads: none for a gymnasium env, at most one per env (it aborts when the
    # OS refuses to start 10**5 of them).
    (["--eval-episodes", "1000000000"], "--eval-episodes must be in [0, 1,000,000]"),
    # Flags of one kind of env only (ENV_ONLY tables), on another kind: refused, not ignored.
    (["--agent", "ppo", "--log-std-init", "-1"],
     "--log-std-init applies to continuous actions only; CartPole-v1 has none"),
    (["--agent", "a2c", "--log-std-init", "-1"], "--log-std-init applies to continuous"),
    (["--agent", "ppo", "--log-std-init", "0"], "--log-std-init applies to continuous"),
    (["--flatten-obs"], "--flatten-obs: CartPole-v1's observations are already vectors [4]"),
    (["--preset", "ppo-minatar", "--env", "CartPole-v1"],
     "--flatten-obs (set by --preset ppo-minatar): CartPole-v1's observations are already"),
    (["--agent", "ppo", "--text"], "--text applies to observations with a mission"),
    (["--agent", "sac", "--env", "Pendulum-v1", "--target-entropy-scale", "0.5"],
     "--target-entropy-scale applies to discrete actions only; Pendulum-v1 has none"),
    (["--agent", "sac", "--env", "CartPole-v1", "--log-std-max", "1"],
     "--log-std-max applies to continuous actions only"),
    # A flag that another one overrides.
    (["--agent", "sac", "--env", "CartPole-v1", "--target-entropy", "-1",
      "--target-entropy-scale", "0.5"], "--target-entropy-scale does nothing with"),
    (["--exp-name", "mine"], "--exp-name does nothing with --run-dir"),  # --run-dir: the test's
    (["--num-envs", "4", "--num-threads", "100000"],
     "--num-threads 100,000 is more than the 4 envs it steps"),
    (["--agent", "ppo", "--env", "MiniGrid-Empty-5x5-v0", "--num-threads", "2"],
     "--num-threads needs an envpool env: --env MiniGrid-Empty-5x5-v0 is a gymnasium env"),
    # The Atari 100k protocol (envs/protocols.py): its games, its budget, its evaluation.
    (["--protocol", "atari99k"], '--protocol must be "none" or "atari100k"'),
    (["--agent", "dqn", "--preset", "der", "--env", "Tennis-v5"],
     "--protocol atari100k runs one of its 26 games as <Game>-v5; 'Tennis-v5' is not one"),
    (["--agent", "dqn", "--preset", "der", "--env", "pong-v5"], "did you mean Pong-v5?"),
    (["--agent", "dqn", "--preset", "der", "--env", "Pong-v4"], "'Pong-v4' is not one"),
    (["--protocol", "atari100k"], "'CartPole-v1' is not one"),  # not an Atari env
    (["--agent", "dqn", "--preset", "der", "--eval-episodes", "0"],
     "--eval-episodes must be >= 1 with --protocol atari100k"),
    (["--agent", "dqn", "--preset", "der", "--total-steps", "50000"],
     "--total-steps 50000 differs from --protocol atari100k's 100000"),
    (["--agent", "dqn", "--cnn", "data-efficient"],
     "--cnn applies to frame-stack image observations (Atari's) only; CartPole-v1 has none"),
    (["--agent", "acer", "--cnn", "data-efficient"], "--cnn applies to frame-stack image"),
    (["--agent", "reactor", "--cnn", "data-efficient"], "--cnn applies to frame-stack image"),
    # A built-in torso's choice beside the user's torso (--network) would do nothing.
    *[(["--agent", agent, "--env", "Pong-v5", "--cnn", "data-efficient", "--network",
        "tests.agents.network_plugins:tiny"],
       "--cnn 'data-efficient' does not apply with --network, whose module replaces the "
       "built-in torso (give --cnn 'nature')") for agent in ("dqn", "acer", "reactor")],
    *[(["--agent", agent, "--hidden", "32", "--network", "tests.agents.network_plugins:tiny"],
       "--hidden 32 does not apply with --network")
      for agent in ("acer", "reactor", "pqn", "r2d1")],
    (["--agent", "pqn", "--no-layer-norm", "--network", "tests.agents.network_plugins:tiny"],
     "--no-layer-norm does not apply with --network, whose module replaces the built-in torso "
     "(give --layer-norm)"),
    (["--agent", "ppo", "--activation", "relu", "--network", "tests.agents.network_plugins:tiny"],
     "--activation 'relu' does not apply with --network"),
    # The MLP torso's widths and activation on images (a CNN of fixed widths) did nothing.
    *[(["--agent", agent, "--env", env, "--hidden", "32"],
       f"--hidden applies to vector or dict observations (an image's torso is a CNN of fixed "
       f"widths) only; {env} has none")
      for agent, env in (("acer", "Pong-v5"), ("dqn", "gymnax/Breakout-MinAtar"),
                         ("reactor", "Pong-v5"), ("ppo", "gymnax/Breakout-MinAtar"),
                         ("pqn", "gymnax/Breakout-MinAtar"), ("r2d1", "Pong-v5"))],
    (["--agent", "a2c", "--env", "gymnax/Breakout-MinAtar", "--activation", "relu"],
     "--activation applies to vector observations only; gymnax/Breakout-MinAtar has none"),
    (["--agent", "dqn", "--noisy-std", "0.1"], "--noisy-std needs --noisy"),
    # Privileged observations (--privileged-obs) and SAC's prediction model.
    (["--agent", "acer", "--privileged-obs", "1"],
     "--privileged-obs: --agent acer does not keep privileged dimensions from its networks"),
    (["--agent", "sac", "--env", "CartPole-v1", "--privileged-obs", "4"],
     "--privileged-obs 4: CartPole-v1's observations have dimensions 0 .. 3"),
    (["--agent", "sac", "--env", "CartPole-v1", "--privileged-obs", "0", "1", "2", "3"],
     "--privileged-obs hides all 4 dimensions"),
    (["--agent", "sac", "--env", "gymnax/Breakout-MinAtar", "--privileged-obs", "0"],
     "--privileged-obs needs vector observations"),
    (["--agent", "sac", "--privileged-obs", "2", "--rnd-coef", "0.1"],
     "--rnd-coef: not with --privileged-obs"),
    (["--agent", "sac", "--env", "gymnax/Breakout-MinAtar", "--prediction"],
     "--prediction reconstructs vector observations"),
]  # fmt: skip


# Every entry of every `ONLY_WITH` table (agents.core.config.check_only_with): the field given
# explicitly, at its default, with its switch off is an error naming the switch; with the
# switch on it is accepted.

# Values for fields whose default is None or empty (the others are given their default).
SAMPLE = {"vary": "lr=1e-3,1e-4", "sweep_lr": "1e-3,1e-4", "evolve_every": "10",
          "target_entropy": "-1.0", "td_error_max": "10.0"}  # fmt: skip
# Switches on by default that cannot be turned off by the generic rule below, and switches
# that need other flags to be on.
SWITCH_OFF = {"n_step=0": ["--n-step", "3"], "optimizer=adam": ["--optimizer", "rmsprop"],
              "target_update_period=0": ["--target-update-period", "2"]}  # fmt: skip
SWITCH_ON = {
    "evolve=pbt|cem": ["--num-seeds", "2", "--evolve", "pbt", "--evolve-every", "10"],
    "evolve=cem": ["--num-seeds", "2", "--evolve", "cem", "--evolve-every", "10"],
}


def _given(cls, name: str) -> list[str]:
    default = field_defaults(cls)[name]
    if isinstance(default, bool):
        return [flag(name) if default else flag("no_" + name)]
    if name in SAMPLE:
        return [flag(name), SAMPLE[name]]
    if isinstance(default, tuple):
        return [flag(name), *map(str, default)]
    return [f"{flag(name)}={default}"]


def _switch_words(cls, switch: str, on: bool) -> list[str]:
    """Command-line words that turn `switch` on or off (none when it already is)."""
    name = switch.lstrip("!").partition(">")[0].partition("=")[0]
    default = field_defaults(cls)[name]
    if switch.startswith("!"):
        return [flag("no_" + name)] if on else [flag(name)] if not default else []
    if ">" in switch:
        bound = switch.partition(">")[2]
        return [flag(name), str(int(bound) + 1)] if on else [flag(name), bound] * (default > 0)
    if "=" in switch:
        words = switch.partition("=")[2].split("|")
        if on:
            return SWITCH_ON.get(switch, [flag(name), words[0]])
        return SWITCH_OFF[switch] if str(default) in words else []
    return [flag(name)] if on else [flag("no_" + name)] if default else []


def _without(words: list[str], drop: str) -> list[str]:
    """`words` less the flag `drop` and its value."""
    i = words.index(drop) if drop in words else -1
    return words if i < 0 else words[:i] + words[i + 2 :]


ONLY_WITH_PARTS = [(part, cls, prefix) for part, (cls, prefix) in {
    "run": (RunArgs, ["--agent", "acer"]),
    **{name: (get_agent(name).config_cls, ["--agent", name]) for name in sorted(BUILTIN)},
}.items()]  # fmt: skip
ONLY_WITH_OFF = [
    pytest.param(
        [*prefix, *_switch_words(cls, switch, on=False), *_given(cls, name)],
        f"{flag(name)} needs {describe_switch(switch)}",
        id=f"{part}:{name}-needs-{switch}",
    )
    for part, cls, prefix in ONLY_WITH_PARTS
    for name, switch in cls.ONLY_WITH.items()
]
# Values other than the default for ONLY_WITH_ON (the generic rule below does not fit them).
CHANGED = {"evolve": ("pbt --evolve-every 10", "pbt"), "replay_draw": ("shared", "shared"),
           "burn_in": ("0", 0), "seq_len": ("24", 24), "evolve_replace": ("1", 1)}  # fmt: skip


def _changed(cls, name: str) -> tuple[list[str], object]:
    """Words that set field `name` to a value other than its default, and that value (None:
    only "not the default" is known, for SAMPLE's values)."""
    default = field_defaults(cls)[name]
    if name in CHANGED:
        text, value = CHANGED[name]
        return [flag(name), *text.split()], value
    if name in SAMPLE or default is None or isinstance(default, tuple):
        return _given(cls, name), None
    if isinstance(default, bool):
        return [flag("no_" + name) if default else flag(name)], not default
    value = (2 * default or 1) if isinstance(default, int) else (default / 2 or 0.5)
    return [f"{flag(name)}={value}"], value


ONLY_WITH_ON = [
    pytest.param(
        [
            *prefix,
            *_without(_switch_words(cls, switch, on=True), flag(name)),
            *_changed(cls, name)[0],
        ],
        cls,
        name,
        _changed(cls, name)[1],
        id=f"{part}:{name}-with-{switch}",
    )
    for part, cls, prefix in ONLY_WITH_PARTS
    for name, switch in cls.ONLY_WITH.items()
]


# The generic invalid values of fields that act only with a switch, given with the switch on:
# with it off they are refused for the switch (GENERIC_TRAIN), which says nothing of their own
# range check (--cem-std-max=inf passed it until this table was added).
GATED_INVALID = [
    pytest.param(
        [
            *prefix,
            *_without(_switch_words(cls, cls.ONLY_WITH[name], on=True), flag(name)),
            *_flag_argv(name, v),
        ],
        f"{flag(name)} must be",
        id=f"{part}:{name}={v}-with-{cls.ONLY_WITH[name]}",
    )
    for part, cls, prefix in ONLY_WITH_PARTS
    for name, values in generic_invalid(cls)
    if name in cls.ONLY_WITH and name not in SKIP_GENERIC
    for v in values
]


@pytest.mark.parametrize(
    "argv, needle", [*GENERIC_TRAIN, *EXPLICIT_TRAIN, *ONLY_WITH_OFF, *GATED_INVALID]
)
def test_train_rejects_bad_flag_before_anything(argv, needle, tmp_path, no_training, capsys):
    run_dir = tmp_path / "run"
    own = [] if any(a.startswith("--run-dir") for a in argv) else ["--run-dir", str(run_dir)]
    message = rejected(train.main, [*own, "--no-progress", *argv], capsys)
    assert needle in message, message
    assert not run_dir.exists() and not no_training


@pytest.mark.parametrize("argv, cls, name, value", ONLY_WITH_ON)
def test_a_flag_with_its_switch_on_is_accepted_and_taken(argv, cls, name, value):
    """The flag, at a value other than its default, with its switch on: parsed without an
    error and its value in the parsed config (a parser that dropped it would leave the
    default)."""
    args = parse(argv)
    got = getattr(args.run if cls is RunArgs else args.config, name)
    default = field_defaults(cls)[name]
    assert got != default, (name, got)
    if value is not None:
        assert got == value, (name, got, value)


def test_only_with_cases_cover_every_agent():
    """Every built-in agent declares its flags that need a switch (the tables are not empty
    by accident: an empty one is declared in the config's own class body, as PQN's, whose
    every flag acts) and the cases above are generated from all of them."""
    for name in BUILTIN:
        cls = get_agent(name).config_cls
        assert cls.ONLY_WITH or "ONLY_WITH" in vars(cls), name
    assert len(ONLY_WITH_OFF) == len(ONLY_WITH_ON) > 50


def test_env_only_flags_are_accepted_on_their_kind_of_env():
    """The ENV_ONLY tables name real fields and kinds (TORSO_FIELDS real fields of a config
    with --network), and each flag passes on its env."""
    from engine.preflight import ENV_KINDS

    for spec in map(get_agent, BUILTIN):
        names = {f.name for f in dataclasses.fields(spec.config_cls)}
        for name, kind in getattr(spec.config_cls, "ENV_ONLY", {}).items():
            assert name in names and kind in ENV_KINDS, (spec.name, name, kind)
        torso = getattr(spec.config_cls, "TORSO_FIELDS", ())
        assert set(torso) <= names and (not torso or "network" in names), (spec.name, torso)
    for argv in (
        ["--agent", "ppo", "--env", "Pendulum-v1", "--log-std-init", "-1"],
        ["--agent", "ppo", "--env", DICT_ENV, "--text"],
        ["--agent", "sac", "--env", "CartPole-v1", "--target-entropy-scale", "0.5"],
        ["--agent", "sac", "--env", "Pendulum-v1", "--log-std-min", "-3"],
        "--agent acer --env CartPole-v1 --hidden 32".split(),
        f"--agent ppo --env {DICT_ENV} --hidden 32".split(),
        "--agent ppo --env gymnax/Breakout-MinAtar --flatten-obs --hidden 32"
        " --activation relu".split(),
        # the networks see the hook's vectors, not the env's images
        "--agent ppo --env gymnax/Breakout-MinAtar --hidden 32 --activation relu"
        " --preprocess-obs tests.agents.ppo_hooks:flat".split(),
    ):
        preflight.check_run(parse(argv))


def test_a_resumed_runs_saved_values_are_its_own():
    """A run folder saved before a rule existed (here --hidden 8 on MinAtar images, and PQN's
    --hidden beside --network, both silently unused then) still resumes: only what the resume
    itself gives is judged. The same values in a new run are refused."""
    cases = (
        ("--agent acer --env gymnax/Breakout-MinAtar", "--hidden applies to vector or dict"),
        ("--agent pqn --network tests.agents.network_plugins:tiny", "--hidden 8 does not apply"),
    )
    for argv, needle in cases:
        args = parse(argv.split())
        old = dataclasses.replace(args, config=args.config.replace(hidden=(8,)))
        with pytest.raises(ValueError, match=needle):
            preflight.check_run(old)
        resumed = dataclasses.replace(old, run=dataclasses.replace(old.run, resume="runs/old"))
        preflight.check_run(resumed)
        given = dataclasses.replace(resumed, given=resumed.given | {"hidden"})
        with pytest.raises(ValueError, match=needle):
            preflight.check_run(given)


def test_a_preset_alone_names_its_agent():
    """`--preset dqn-minatar` without `--agent` trains DQN (preset names are unique over the
    agents); an explicit `--agent` of another agent stays an error naming the preset's."""
    names = [p for name in BUILTIN for p in get_agent(name).presets]
    assert len(names) == len(set(names)), "two agents share a preset name"
    for name in BUILTIN:
        for preset in get_agent(name).presets:
            args = parse(["--preset", preset])
            assert (args.run.agent, args.run.preset) == (name, preset)
    assert parse([]).run.agent == "acer"
    with pytest.raises(ValueError, match="is for --agent dqn, not acer"):
        parse(["--agent", "acer", "--preset", "dqn-minatar"])


def test_a_preset_may_set_a_flag_whose_switch_the_user_turns_off():
    """Only explicit flags are checked: a preset's values are not the user's."""
    assert parse(["--agent", "dqn", "--preset", "dqn-atari", "--noisy"]).config.eps_end == 0.01
    assert parse(["--agent", "reactor", "--preset", "reactor-atari", "--no-distributional"])


# --------------------------------------------------------------------------- train: the env


DICT_ENV = "MiniGrid-Empty-5x5-v0"


@pytest.mark.parametrize("agent", sorted(BUILTIN))
def test_dict_observations_are_taken_or_refused_up_front(agent, tmp_path, no_training, capsys):
    """Every agent on a dict-observation env: one that takes them passes the up-front checks
    (its agent built on the env's spec); any other is refused in one line naming the agent
    and the env, before a run folder exists."""
    argv = ["--agent", agent, "--env", DICT_ENV]
    if agent == "td3":  # it takes dict observations, but continuous actions only
        with pytest.raises(ValueError, match=f"td3 needs continuous actions; {DICT_ENV} has"):
            preflight.check_run(parse(argv))
        return
    if get_agent(agent).dict_obs:
        assert preflight.check_run(parse(argv)).pytree_obs
        return
    run_dir = tmp_path / "run"
    message = rejected(train.main, [*argv, "--run-dir", str(run_dir)], capsys)
    assert f"--agent {agent} takes array observations only; --env {DICT_ENV}" in message
    assert not run_dir.exists() and not no_training


@pytest.fixture
def env_sizes(monkeypatch):
    """The sizes every env made by the runner (and its probe) was asked for."""
    sizes = []

    def recording(make_env):
        def make(env_id, num_envs, *args, **kwargs):
            sizes.append(num_envs)
            return make_env(env_id, num_envs, *args, **kwargs)

        return make

    monkeypatch.setattr(preflight, "make_env", recording(preflight.make_env))
    monkeypatch.setattr(runner, "make_env", recording(runner.make_env))
    return sizes


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--hidden", "1000000", "1000000"], "--hidden"),
        (["--agent", "ppo", "--num-envs", "3000000000"], "--num-envs"),
        (["--num-seeds", "1000000000"], "--num-seeds"),
        (["--num-seeds", "100000"], "--num-seeds"),
        ([*TINY, "--num-seeds", "100000"], "--num-seeds"),  # fits in memory: too many to build
    ],
)
def test_sizes_are_refused_quickly_before_envs_are_made(
    argv, needle, tmp_path, env_sizes, no_training, monkeypatch, capsys
):
    """Sizes that cannot fit are refused within seconds, before envpool is asked for more
    than the one probe env (on a machine of 16 GiB, whatever this one has)."""
    monkeypatch.setattr(preflight, "memory_bytes", lambda devices: (16 * 2**30, "host memory"))
    t0 = time.perf_counter()
    message = rejected(train.main, [*argv, "--run-dir", str(tmp_path / "run")], capsys)
    assert time.perf_counter() - t0 < 20
    assert message.startswith(f"error: {needle} "), message
    assert env_sizes in ([], [1]) and not (tmp_path / "run").exists() and not no_training


FOOTPRINT = preflight.Footprint(learner=2**20, parameters=2**17, replay=2**22, rollout=2**10)


@pytest.mark.parametrize(
    "argv, footprint, needle",
    [
        (["--num-seeds", "8"], FOOTPRINT, "--num-seeds 8: 8 members need 40.0 MiB (5.0 MiB each"),
        ([], dataclasses.replace(FOOTPRINT, learner=2**26),
         "--hidden 64 64: the learner state needs 64.0 MiB (131,072 parameters"),
        (["--hidden", "8"], dataclasses.replace(FOOTPRINT, learner=2**26), "--hidden 8: the"),
        ([], dataclasses.replace(FOOTPRINT, replay=2**26), "--buffer-size 50,000: the replay"),
        ([], dataclasses.replace(FOOTPRINT, rollout=2**26), "--num-envs 16: one rollout of"),
    ],
)  # fmt: skip
def test_memory_check_names_the_flag_behind_the_largest_part(argv, footprint, needle):
    with pytest.raises(ValueError, match=r"more than the 32\.0 MiB of host memory") as err:
        preflight.check_memory(parse(argv), footprint, (2**25, "host memory"))
    assert str(err.value).startswith(needle), err.value
    preflight.check_memory(parse(argv), FOOTPRINT, None)  # unknown memory: no check
    if "--num-seeds" not in argv:
        preflight.check_memory(parse(argv), footprint, (2**27, "host memory"))


def test_memory_of_this_machine_is_known():
    memory, where = preflight.memory_bytes(None)
    assert memory > 2**28 and where


@pytest.mark.parametrize("part", list(TRAIN_PARTS))
def test_every_config_refuses_the_generic_values_itself(part):
    """Every generic invalid value of every field of `part` (the run options, an agent's
    config) is refused by its dataclass, built from the agent's default preset as train.main
    starts, with one line that starts with the flag: a check shared by several agents (all of
    them for check_floats_finite's NaN and ±inf, check_positive_int's 0 and -1) is shown
    running for each, while GENERIC_TRAIN shows the command line reaching each check once.
    Only --agent and --preset are the parser's."""
    cls, _ = TRAIN_PARTS[part]
    wrong = []
    for name, values in generic_invalid(cls):
        for text in values if name not in SKIP_GENERIC else ():
            check, message = refused_by(part, name, text)
            if check == "parse":
                ok = cls is RunArgs and name in PARSED
            else:
                ok = message.startswith(flag(name) + " ") and "\n" not in message
            if not ok:
                wrong.append(f"{flag(name)}={text}: {message or 'taken by ' + cls.__name__}")
    assert not wrong, "\n".join(wrong)


def test_generic_cases_cover_every_numeric_and_text_flag():
    """A new int, float or str flag of the run options or of any agent gets generic cases
    without edits here, and each (part, flag, value) is tested on the command line: by its
    own case in GENERIC_TRAIN where its part's own check (or the parser) refuses it, or by the
    one case of the shared check that refuses it (SHARED_CHECKS; the test above shows that
    check refusing it for every part), all of them with the check's own message."""
    for part, (cls, _) in TRAIN_PARTS.items():
        hints = typing.get_type_hints(cls)
        generic = dict(generic_invalid(cls))
        for f in dataclasses.fields(cls):
            tp, _ = _strip_optional(hints[f.name])
            if tp in (int, float, str) and f.name not in SKIP_GENERIC:
                assert generic.get(f.name), (part, f.name)
                for text in generic[f.name]:
                    assert (part, f.name, text) in GENERIC_REFUSALS, (part, f.name, text)
    # Which parts each check refuses generic cases of: the shared ones as declared, every
    # other one a single part's.
    parts: dict[str, set] = {}
    for (part, _, _), (check, _) in GENERIC_REFUSALS.items():
        parts.setdefault(check, set()).add(part)
    assert set(SHARED_CHECKS) <= set(parts), set(SHARED_CHECKS) - set(parts)
    for check, found in parts.items():
        assert found == SHARED_CHECKS.get(check, found), (check, found)
        assert check in SHARED_CHECKS or len(found) == 1, (check, found)
    # Each case is refused on the command line by a case of its check, with the same message
    # (but for the flag, for a uniform check's other fields).
    for case, (check, message) in GENERIC_REFUSALS.items():
        shown = GENERIC_CASES[_case_key(*case, check)]
        shown_message = GENERIC_REFUSALS[shown][1]
        if message is None:
            assert shown == case, case
        else:
            assert GENERIC_REFUSALS[shown][0] == check, (case, shown)
            tail = message.removeprefix(flag(case[1]))
            assert tail == shown_message.removeprefix(flag(shown[1])), (case, shown)
    assert len(GENERIC_REFUSALS) > 600 and len(GENERIC_TRAIN) == len(GENERIC_CASES)
    # The uniform checks' cases: NaN and ±inf of a float (and float | None) field, 0 and -1
    # of an int field.
    floats = [(kind, text) for kind in ("float", "float | None") for text in ("nan", "inf", "-inf")]
    assert {key for key in GENERIC_CASES if key[0] in UNIFORM} == {
        *(("check_floats_finite", *kind_text) for kind_text in floats),
        *(("check_positive_int", "int", text) for text in ("0", "-1")),
    }
    # Every part's command line is reached with a bad value of its own.
    argvs = [p.values[0] for p in [*GENERIC_TRAIN, *ONLY_WITH_OFF]]
    for name in BUILTIN:
        assert any(argv[:2] == ["--agent", name] for argv in argvs), name


@pytest.mark.parametrize(
    "place, needle",
    [("file", "exists and is not a folder"), ("/proc/foo", "not writable")],
)
def test_train_rejects_an_unusable_run_folder(
    place, needle, tmp_path, monkeypatch, no_training, capsys
):
    target = tmp_path / "a-file" if place == "file" else Path(place)
    if place == "file":
        target.write_text("x")
    message = rejected(train.main, ["--run-dir", str(target)], capsys)
    assert message.startswith("error: --run-dir: ") and needle in message, message
    assert not no_training and (place != "file" or target.read_text() == "x")
    # Without --run-dir the folder is runs/<exp-name>: a file in its way names --exp-name.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").write_text("x")
    message = rejected(train.main, ["--exp-name", "x"], capsys)
    assert message.startswith("error: --exp-name: ") and "runs is a file" in message, message


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--total-steps", "abc"], "--total-steps"),
        (["--reward-clip", "maybe"], "--reward-clip"),
        (["--agent"], "--agent"),
    ],
)
def test_tyro_usage_errors_name_the_flag(argv, needle, tmp_path, no_training, capsys):
    """tyro's own usage errors (a word for an int, a missing value) keep tyro's box and
    exit status 2; they name the flag and happen before anything else."""
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        train.main([*argv, "--run-dir", str(run_dir)])
    assert exit_info.value.code == 2
    assert needle in capsys.readouterr().err
    assert not run_dir.exists() and not no_training


def test_a_good_command_line_reaches_training(tmp_path, no_training):
    """The checks above are not refusing everything."""
    with pytest.raises(Reached):
        train.main([*TINY, "--run-dir", str(tmp_path / "run"), "--eval-episodes", "0"])
    with pytest.raises(Reached):
        train.main(["--agent", "reactor", "--run-dir", str(tmp_path / "r"), "--hidden"])
    with pytest.raises(Reached):  # ACER takes continuous actions too (continuous ACER)
        train.main(["--env", "HalfCheetah-v5", "--run-dir", str(tmp_path / "c")])
    assert no_training == [tmp_path / "run", tmp_path / "r", tmp_path / "c"]


# --------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished tiny run (checkpoints at 20 and 40, --eval-episodes 0)."""
    run_dir = tmp_path_factory.mktemp("cli") / "run"
    summary = train.main(
        [*TINY, "--run-dir", str(run_dir), "--total-steps", "40", "--checkpoint-every", "20",
         "--eval-episodes", "0", "--num-devices", "1", "--no-progress"]
    )  # fmt: skip
    assert summary["env_steps"] == 40
    return run_dir


def test_eval_episodes_0_skips_the_evaluation_and_writes_nulls(trained):
    summary = json.loads(
        (trained / "summary.json").read_text(),
        parse_constant=lambda c: pytest.fail(f"summary.json holds {c}"),
    )
    assert summary["eval_episodes"] == 0
    assert summary["eval_return_mean"] is None and summary["eval_return_std"] is None
    assert sorted(p.name for p in (trained / "checkpoints").iterdir()) == ["20", "40"]


def _copy(run_dir: Path, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / name))


def _edit_config(folder: Path, edit) -> None:
    path = folder / "config.json"
    data = json.loads(path.read_text())
    text = edit(data)
    path.write_text(text if isinstance(text, str) else json.dumps(data))


CONFIG_DAMAGE = {
    "missing": (lambda d: None, "no config.json"),
    "not-json": (lambda d: '{"run": ', "not valid JSON"),
    "array": (lambda d: "[1, 2]", "JSON array"),
    "wrong-type": (lambda d: d["run"].__setitem__("total_steps", "lots"), "total_steps"),
    "unknown-agent": (lambda d: d["run"].__setitem__("agent", "dqnn"), "dqnn"),
    "no-agent-config": (lambda d: d.pop("agent_config"), "agent_config"),
    "unknown-field": (lambda d: d["agent_config"].__setitem__("bogus", 1), "bogus"),
    "out-of-range": (lambda d: d["agent_config"].__setitem__("lr", -1), "--lr"),
}


@pytest.mark.parametrize("damage", sorted(CONFIG_DAMAGE))
def test_resume_of_a_folder_with_a_bad_config_is_one_line(
    damage, trained, tmp_path, no_training, capsys
):
    folder = _copy(trained, tmp_path, "bad")
    edit, needle = CONFIG_DAMAGE[damage]
    if damage == "missing":
        (folder / "config.json").unlink()
    else:
        _edit_config(folder, edit)
    before = tree(folder)
    message = rejected(train.main, ["--resume", str(folder), "--total-steps", "80"], capsys)
    assert message.startswith("error: --resume: ") and needle in message, message
    assert tree(folder) == before and not no_training


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--agent", "reactor"], "--agent"),
        (["--env", "Acrobot-v1"], "--env"),
        (["--lr", "0.1"], "--lr"),
        (["--seed", "3"], "--seed"),
        (["--keep-checkpoints", "1"], "--keep-checkpoints"),
        (["--preset", "acer-atari"], "--preset"),
        (["--beta-loo-c", "1"], "--beta-loo-c"),
        (["--total-steps", "0"], "--total-steps"),
        (["--run-dir", "/tmp/elsewhere"], "--run-dir"),
    ],
)
def test_resume_refuses_changed_or_bad_flags(argv, needle, trained, no_training, capsys):
    before = tree(trained)
    message = rejected(train.main, ["--resume", str(trained), *argv], capsys)
    assert needle in message, message
    assert tree(trained) == before and not no_training


def test_resume_of_a_population_members_folder_is_refused(trained, tmp_path, no_training, capsys):
    """A member's folder (`<run>/member-<i>`, config.json with a `population` block) is not
    a run of its own: resuming it would start a population over inside it, overwriting its
    config. Refused, pointing at the population's folder; nothing changes."""
    member = _copy(trained, tmp_path / "pop", "member-1")
    _edit_config(member, lambda d: d.__setitem__("population", {"member": 1, "of": 2}))
    before = tree(tmp_path)
    message = rejected(train.main, ["--resume", str(member)], capsys)
    assert message == (
        f"error: --resume: {member} is a member of a population (its config.json has a "
        f"'population' block): resume the population's folder, {tmp_path / 'pop'}"
    ), message
    assert tree(tmp_path) == before and not no_training


@pytest.mark.parametrize("folder", ["", "/nonexistent/run", "/etc/passwd"])
def test_resume_of_no_run_folder_names_resume(folder, no_training, capsys):
    message = rejected(train.main, ["--resume", folder], capsys)
    assert message.startswith("error: --resume"), message


@pytest.mark.parametrize(
    "meta, needle",
    [
        ({"counters": "x"}, "meta counters must be a list of 1 (or an object), got 'x'"),
        ({"counters": {"env_steps": 40, "bogus": 1}}, "meta counters has unknown field(s) bogus"),
    ],
)
def test_resume_of_a_checkpoint_with_damaged_counters_is_one_line(
    meta, needle, trained, tmp_path, capsys
):
    """A checkpoint's meta whose counters are damaged and whose checksums were rewritten to
    match (checksums only prove a checkpoint is as written): one line naming it."""
    from engine.checkpoint import write_checksums

    folder = _copy(trained, tmp_path, "bad")
    newest = folder / "checkpoints" / "40"
    (newest / "meta" / "metadata").write_text(json.dumps(meta))
    (newest / "checksums.json").unlink()
    write_checksums(newest, 40)
    message = rejected(train.main, ["--resume", str(folder), "--total-steps", "80"], capsys)
    assert f"checkpoint 40 in {folder / 'checkpoints'}" in message and needle in message


@pytest.mark.parametrize(
    "meta, size, needle",
    [
        ({}, 1, "meta counters must be a list of 1 (or an object), got None"),
        ({"counters": ["x"]}, 1, "meta counters[0] must be an object, got 'x'"),
        ({"counters": [{"env_steps": 30}]}, 1, "counters[0].env_steps 30 is not the checkpoint's"),
        ({"counters": {"env_steps": 40, "wall_s": "x"}}, 1, "counters.wall_s is out of range"),
        ({"counters": {"env_steps": 40, "steady_s": -1.0}}, 1, "counters.steady_s is out of"),
        ({"counters": {"env_steps": 40, "steady_steps": 0.5}}, 1, "counters.steady_steps is out"),
        ({"counters": {"env_steps": 40, "steady_steps": 41}}, 1, "steady_steps 41 exceeds its"),
        ({"counters": {"env_steps": 40, "wall_s": 2, "steady_s": 2.5}}, 1, "steady_s 2.5 exceeds"),
        ({"counters": {"env_steps": 10**30}}, 1, "counters.env_steps is out of range"),
        ({"counters": {"env_steps": "NaN"}}, 1, "counters.env_steps is out of range"),
        ({"counters": {"env_steps": True}}, 1, "counters.env_steps is out of range"),
        ({"counters": {"env_steps": -5}}, 1, "counters.env_steps is out of range"),
        ({"counters": {"env_steps": 30}}, 1, "env_steps 30 is not the checkpoint's step 40"),
        ({"counters": "x"}, 2, "meta counters must be a list of 2"),
        ({"counters": [{"env_steps": 40}]}, 2, "meta counters must be a list of 2"),
        ({"counters": [{"env_steps": 40}, "x"]}, 2, "meta counters[1] must be an object"),
        ({"counters": [{"env_steps": 40}, {"episodes": -1}]}, 2, "counters[1].episodes is out"),
    ],
)
def test_restored_counters_are_checked(meta, size, needle):
    with pytest.raises(ValueError) as info:
        runner.restored_counters(meta, 40, size, "checkpoint 40 in x")
    assert str(info.value).startswith("checkpoint 40 in x: ") and needle in str(info.value)


def test_a_resumed_runs_rate_counts_its_earlier_stretches():
    # summary.json's sps (TrainLoop.sps) is the steady rate over the whole run: a run resumed
    # from counters of 9,000 steady steps in 9 s that then runs 1,000 steps in 0.1 s reports
    # 10,000 / 9.1 s, not its last stretch's 1,000 / 0.1 s. Checkpoints of earlier versions
    # (no steady counters) restore zeros: the rate is then the new stretch's.
    saved = {"env_steps": 10_000, "iteration": 10, "wall_s": 9.5, "steady_steps": 9_000,
             "steady_s": 9.0}  # fmt: skip
    (counters,) = runner.restored_counters({"counters": saved}, 10_000, 1, "x")
    spec = types.SimpleNamespace(is_atari=False)
    agent = types.SimpleNamespace(metric_names=(), steps_per_iteration=1_000,
                                  env=types.SimpleNamespace(spec=spec))  # fmt: skip
    loop = runner.TrainLoop(agent, None, counters)
    empty = np.zeros((1, 1, 1))
    loop.record(ChunkOutput({}, np.zeros(1, np.int32), empty, empty, empty > 0), 1, 0.1)
    assert loop.sps == pytest.approx(10_000 / 9.1) and counters.steady_steps == 10_000
    old = {"env_steps": 10_000, "iteration": 10, "wall_s": 9.5}
    (counters,) = runner.restored_counters({"counters": old}, 10_000, 1, "x")
    loop = runner.TrainLoop(agent, None, counters)
    loop.record(ChunkOutput({}, np.zeros(1, np.int32), empty, empty, empty > 0), 1, 0.5)
    assert loop.sps == 2_000.0


def test_restored_counters_and_since_of_a_population():
    counters = {"env_steps": 40, "iteration": 2, "episodes": 1, "updates": 7, "wall_s": 0.5}
    restored = runner.restored_counters({"counters": [counters, counters]}, 40, 2, "x")
    assert [c.env_steps for c in restored] == [40, 40] and restored[0].wall_s == 0.5
    runner._check_since([runner.DRAWN, {"generation": None, "env_steps": None}], 2, "x")
    for since in ("x", [runner.DRAWN], [runner.DRAWN, {"generation": -1, "env_steps": 0}],
                  [runner.DRAWN, {"generation": 0}]):  # fmt: skip
        with pytest.raises(ValueError, match=r"^x: meta hparams_since must be a list of 2"):
            runner._check_since(since, 2, "x")


def test_resume_accepts_equal_explicit_flags_and_uses_its_own_folder(
    trained, tmp_path, no_training
):
    moved = _copy(trained, tmp_path, "moved")  # config.json still names the old folder
    with pytest.raises(Reached):
        train.main(["--resume", str(moved), "--agent", "acer", "--lr", "0.002",
                    "--total-steps", "80"])  # fmt: skip
    assert no_training == [moved]


@pytest.mark.parametrize("steps", [[], ["--total-steps", "40"], ["--total-steps", "20"]])
def test_resume_of_a_finished_run_does_nothing_and_says_so(steps, trained, no_training, capsys):
    """A run that trained its --total-steps is not compiled, trained, evaluated nor its
    summary rewritten by a resume that asks for no more steps: one line, exit status 0 (a
    requeued job or a loop over run folders goes on), its summary returned."""
    before = tree(trained)
    summary = train.main(["--resume", str(trained), *steps])
    total = steps[1] if steps else "40"
    assert capsys.readouterr().err == (
        f"{trained} already trained to env step 40 (--total-steps {total}): nothing to do; "
        f"give a larger --total-steps to train on, or evaluate it with python -m "
        f"experiments.evaluate {trained}\n"
    )
    assert summary == json.loads((trained / "summary.json").read_text())
    assert tree(trained) == before and not no_training


def test_a_finished_population_counts_steps_per_member(trained, tmp_path):
    """A population's summary counts env_steps over its members: its steps per member are
    compared, and evaluation pointed at the members' folders."""
    folder = _copy(trained, tmp_path, "pop")  # its intact checkpoint at 40
    summary = {"env_steps": 80, "env_steps_per_member": 40, "members": ["member-0", "member-1"]}
    (folder / "summary.json").write_text(json.dumps({**summary, "stopped_by": "SIGTERM"}))
    saved, line = train.finished_run(folder, 40)
    assert saved["env_steps"] == 80 and line == (
        f"{folder} already trained to env step 40 (--total-steps 40): nothing to do; give a "
        f"larger --total-steps to train on, or evaluate it with python -m experiments.evaluate "
        f"{folder / 'member-<i>'}"
    )
    assert train.finished_run(folder, 41) is None  # more steps per member: it trains on


@pytest.mark.parametrize(
    "summary", ["missing", "stopped early", "damaged", "float steps", "damaged checkpoint"]
)
def test_resume_of_a_run_without_a_finished_summary_goes_on(
    summary, trained, tmp_path, no_training
):
    """Killed before its summary.json, stopped by --max-minutes / a signal short of its
    steps, a summary that cannot be read (the resume writes it anew), or a finished run whose
    last checkpoint is damaged (the resume sets it aside): resumed."""
    folder = _copy(trained, tmp_path, "unfinished")
    path = folder / "summary.json"
    saved = json.loads(path.read_text())
    if summary == "missing":
        path.unlink()
    elif summary == "damaged":
        path.write_text('{"env_steps": 4')
    elif summary == "damaged checkpoint":  # the summary says done, but the 40 cannot restore
        assert _damage_newest(folder) == 40
    else:
        early = {"stopped_by": "SIGTERM", "env_steps": 20}
        path.write_text(
            json.dumps({**saved, **(early if summary == "stopped early" else {"env_steps": 40.0})})
        )
    with pytest.raises(Reached):
        train.main(["--resume", str(folder)])
    assert no_training == [folder]


# --------------------------------------------------------------------------- evaluate


def _damage_newest(folder: Path) -> int:
    newest = max(int(p.name) for p in (folder / "checkpoints").iterdir() if p.name.isdigit())
    files = sorted(
        p for p in (folder / "checkpoints" / str(newest) / "state").rglob("*") if p.is_file()
    )
    data = max(files, key=lambda p: p.stat().st_size)
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    return newest


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--episodes", "0"], "--episodes"),
        (["--episodes=-1"], "--episodes"),
        (["--num-envs=-1"], "--num-envs"),
        (["--step=-1"], "--step"),
        (["--seed=-1"], "--seed"),
        (["--step", "30"], "no checkpoint 30"),
        (["--out", "/proc/foo/e.json"], "--out"),
        (["--out", "/tmp"], "--out"),
        # Sizes that would run for days or exhaust memory (10**8 envs were killed by the OS).
        (["--episodes", "1000000000"], "--episodes must be in [1, 1,000,000], got 1000000000"),
        (["--num-envs", "100000000"], "--num-envs must be in [0, --episodes]"),
        (["--episodes", "2", "--num-envs", "3"], "--num-envs must be in [0, --episodes]"),
        (["--video-format", "gif"], "--video-format needs --video"),
        (["--episodes", "20", "--worst", "50"], "--worst must be in [0, --episodes]"),
    ],
)
def test_evaluate_rejects_bad_flags(argv, needle, trained, capsys):
    message = rejected(evaluate.main, [str(trained), *argv], capsys)
    assert needle in message, message


def test_evaluate_generic_invalid_values(trained, capsys):
    for name, values in generic_invalid(evaluate.EvalArgs):
        for value in values:
            argv = [str(trained), *_flag_argv(name, value)]
            if name == "run":
                argv = [value]
            message = rejected(evaluate.main, argv, capsys)
            assert (flag(name) if name != "run" else "RUN") in message, message


def test_evaluate_of_missing_or_damaged_checkpoints(trained, tmp_path, capsys):
    message = rejected(evaluate.main, [str(tmp_path / "nothing")], capsys)
    assert "not a run folder" in message
    empty = _copy(trained, tmp_path, "empty")
    shutil.rmtree(empty / "checkpoints")
    assert "no complete checkpoint" in rejected(evaluate.main, [str(empty)], capsys)

    damaged = _copy(trained, tmp_path, "damaged")
    step = _damage_newest(damaged)
    message = rejected(evaluate.main, [str(damaged), "--step", str(step)], capsys)
    assert f"checkpoint {step}" in message and "damaged" in message
    # Without --step the damaged one is set aside (reported) and the one before it is used.
    result = evaluate.main([str(damaged), "--episodes", "1"])
    assert result["checkpoint_step"] == 20
    assert f"checkpoint {step} skipped" in capsys.readouterr().err
    _damage_newest(damaged)  # now 20 as well: its skip is reported, then the one-line error
    message = rejected(evaluate.main, [str(damaged)], capsys, reports="checkpoint 20 skipped: ")
    assert "could be restored" in message and "20: " in message


@pytest.mark.parametrize(
    "population, needle",
    [
        ("x", "population must be an object"),
        ([0, 2], "population must be an object"),
        ({"member": 0}, "population.of must be --num-seeds 2, got None"),
        ({"member": 0, "of": 3}, "population.of must be --num-seeds 2, got 3"),
        ({"member": 2, "of": 2}, "population.member must be an integer in [0, 2), got 2"),
        ({"member": -1, "of": 2}, "population.member must be an integer in [0, 2), got -1"),
        ({"member": 0.5, "of": 2}, "population.member must be an integer in [0, 2), got 0.5"),
        ({"member": "0", "of": 2}, "population.member must be an integer in [0, 2), got '0'"),
    ],
)
def test_evaluate_of_a_member_with_a_damaged_population_block(
    population, needle, trained, tmp_path, capsys
):
    """A population member's config.json whose `population` block is damaged: one line
    naming the file and the field (it indexed the checkpoint with it unchecked)."""
    member = _copy(trained, tmp_path / "pop", "member-0")

    def edit(data):
        data["run"].update(num_seeds=2, vary=["lr=0.001,0.002"])
        data["population"] = population

    _edit_config(member, edit)
    message = rejected(evaluate.main, [str(member), "--episodes", "1"], capsys)
    assert "member-0/config.json" in message and needle in message, message


def test_evaluate_with_more_envs_than_the_training_replay_fits(trained, tmp_path):
    out = tmp_path / "e.json"
    result = evaluate.main([str(trained), "--episodes", "40", "--num-envs", "40",
                            "--out", str(out)])  # fmt: skip
    assert result["episodes"] == 40
    assert json.loads(out.read_text())["checkpoint_step"] == 40


# --------------------------------------------------------------------------- plot


def _metrics_folder(tmp_path: Path, name: str, text: str | None) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    if text is not None:
        (folder / "metrics.csv").write_text(text)
    return folder


def test_plot_rejects_bad_runs_and_flags(trained, tmp_path, capsys):
    cases = {
        str(tmp_path / "missing"): "does not exist",
        str(trained / "config.json"): "not a folder",
        str(_metrics_folder(tmp_path, "none", None)): "no metrics.csv",
        str(_metrics_folder(tmp_path, "empty", "")): "is empty",
        str(_metrics_folder(tmp_path, "header", "env_steps,return_mean,wall_s\n")): "no rows",
        str(_metrics_folder(tmp_path, "cols", "a,b\n1,2\n")): "no column env_steps",
    }
    for run, needle in cases.items():
        assert needle in rejected(plot.main, [run], capsys)
    for argv, needle in [
        ([], "RUNS"),
        ([str(trained), "--thresholds", "nan"], "--thresholds"),
        ([str(trained), "--out", "/proc/foo/c.png"], "--out"),
        ([str(trained), "--out", str(tmp_path)], "--out"),
        ([str(trained), "--out", str(tmp_path / "c.xyz")], "xyz"),
    ]:
        assert needle in rejected(plot.main, argv, capsys)
    assert not list(tmp_path.glob("*.png")) and not (trained / "curves.png").exists()


def test_plot_reads_a_live_runs_half_line_and_agents_without_loss_columns(trained, tmp_path):
    live = _copy(trained, tmp_path, "live")
    with open(live / "metrics.csv", "a") as f:
        f.write("60,6")  # a row a running trainer has half written
    toy = _metrics_folder(
        tmp_path, "toy", "env_steps,frames,return_mean,wall_s,loss\n10,10,1,0,2\n"
    )
    out = plot.main([str(live), str(toy), "--out", str(tmp_path / "c.png")])
    assert out.stat().st_size > 1000


# --------------------------------------------------------------------------- benchmarks


@pytest.fixture
def no_benchmark(monkeypatch):
    def stop(*args, **kwargs):
        raise Reached("the benchmark started")

    monkeypatch.setattr(bench_throughput, "build", stop)
    monkeypatch.setattr(bench_scaling, "measure", stop)


BENCHES = {
    "throughput": (bench_throughput.BenchArgs, bench_throughput.main),
    "scaling": (bench_scaling.ScalingArgs, bench_scaling.main),
    "losses": (bench_losses.Args, lambda argv: cli(bench_losses.Args, argv)),
    "replay": (bench_replay.Args, lambda argv: cli(bench_replay.Args, argv)),
}
GENERIC_BENCH = [
    pytest.param(bench, _flag_argv(name, v), flag(name), id=f"{bench}:{name}={v}")
    for bench, (cls, _) in BENCHES.items()
    for name, values in generic_invalid(cls)
    for v in values
]
EXPLICIT_BENCH = [
    ("throughput", ["--agent", "dqnn"], "--agent"),
    ("throughput", ["--agent", "acer", "--preset", "reactor-atari"], "--preset"),
    ("throughput", ["--env", "Nope-v0"], "--env"),
    ("throughput", ["--compare", "lr"], "--compare"),
    ("throughput", ["--compare", "nope=1,2"], "--compare"),
    ("throughput", ["--compare", "lr=abc"], "--compare"),
    ("throughput", ["--compare", "lr=-1"], "--lr"),
    ("throughput", ["--compare", "lr=0.1,0.1"], "--compare"),
    ("throughput", ["--env", "CartPole-v1", "--compare", "num_envs=3"], "--compare num_envs=3"),
    ("throughput", ["--json-out", "/proc/foo/b.json"], "--json-out"),
    ("scaling", ["--agent", "dqnn"], "--agent"),
    ("scaling", ["--agent", "reactor", "--preset", "acer-atari"], "--preset"),
    ("scaling", ["--env", "Nope-v0"], "--env"),
    ("scaling", ["--devices", "8"], "--devices"),
    ("scaling", ["--devices", "3"], "--num-envs"),
    ("scaling", ["--json-out", "/proc/foo/b.json"], "--json-out"),
    ("losses", ["--json-out", "/etc/passwd/b.json"], "--json-out"),
    ("losses", ["--num-atoms", "1"], "--num-atoms"),
    ("replay", ["--capacities", "10"], "--capacities"),
    ("replay", ["--json-out", "/proc/foo/b.json"], "--json-out"),
]


@pytest.mark.parametrize("bench, argv, needle", [*GENERIC_BENCH, *EXPLICIT_BENCH])
def test_benchmarks_reject_bad_flags_before_timing(bench, argv, needle, no_benchmark, capsys):
    message = rejected(BENCHES[bench][1], argv, capsys)
    assert needle in message, message


def test_benchmarks_accept_their_defaults(no_benchmark):
    for bench in ("throughput", "scaling"):
        with pytest.raises(Reached):
            BENCHES[bench][1](["--env", "CartPole-v1"])
    for bench in ("losses", "replay"):
        assert BENCHES[bench][1]([]) == BENCHES[bench][0]()


# --------------------------------------------------------------------------- real processes


@pytest.mark.parametrize(
    "module, argv, needle",
    [
        ("experiments.train", ["--total-steps", "0"], "--total-steps"),
        ("experiments.plot", ["/nonexistent/run"], "does not exist"),
        ("experiments.arms", ["/nonexistent/experiment"], "no such folder"),
        ("benchmarks.bench_losses", ["--target-round-s", "nan"], "--target-round-s"),
        ("benchmarks.bench_replay", ["--rounds", "0"], "--rounds"),
    ],
)
def test_a_process_prints_one_line_and_exits_1(module, argv, needle, tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", module, *argv, *(["--run-dir", str(tmp_path / "r")]
                                               if module == "experiments.train" else [])],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert proc.stdout == "" and not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "argv, folder",
    [
        ([], "runs/acer-CartPole-v1-seed0"),
        (["--agent", "ppo", "--num-seeds", "4", "--seed", "2"], "runs/ppo-CartPole-v1-seeds2-5"),
        (["--env", "gymnax/Breakout-MinAtar"], "runs/acer-gymnax-Breakout-MinAtar-seed0"),
        (["--exp-name", "mine"], "runs/mine"),
    ],
)
def test_default_run_folder_is_one_folder_under_runs(argv, folder):
    from engine.args import parse_train_args
    from engine.runner import resolve_run_dir

    assert resolve_run_dir(parse_train_args(argv)) == Path(folder)
