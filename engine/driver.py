"""The training driver: an agent's pure functions (`agents.core.parts.AgentParts`) run as
compiled programs, written once for every agent.

`agent_class(spec)` gives such an agent, registered with its `make`, the training protocol
(engine/protocol.py) that the runner, evaluation, populations, data parallelism,
checkpoints and sweeps speak, through `PartsAgent` below: so a new agent is its folder and a
registry line. One training iteration, written once (`_Chunk`'s `iteration`)::

    actor, traj = rollout(act, acting(learner), actor)   # T steps of every env, in XLA
    learner, metrics = learn(learner, traj, hyper)

An agent with a trace replay (`AgentParts.replay`: ACER, the Reactor, DQN, R2D1, SAC, TD3)
then stores the rollout and runs the replay updates the iteration owes
(`ReplayParts.updates_due`, counted on the host, each a sample of the replay, the agent's
`update`, the new priorities stored; or the agent's own `step`)::

    replay = add(replay, traj)
    repeat updates_due(iteration, env_steps) times:      # a fori_loop inside the program
        learner, replay, metrics = replay_update(learner, replay)

Many iterations per host sync are a `lax.scan` of it in one compiled program (`_Chunk`). Where
the host must drive each iteration (`engine.programs.host_reason`: an env stepped on the
host, a data-parallel mesh, `--debug`'s data checks, a convolution on XLA:CPU) the same two
pieces run as two programs (`train_iteration`: a `RolloutProgram`, then `absorb`, `shard_map`ped
over the mesh with gradients averaged inside `learn`); an agent whose learning the host must
drive stage by stage (`AgentParts.staged`: PPO's `--update-loop dispatch`) runs its stages
there as programs of their own, and an agent that acts decoupled from learning
(`AgentParts.decoupled`: the Reactor's actor thread, engine/actor_thread.py) gets its
rollouts from a thread that steps the envs with the params published after each iteration's
updates. A population (`--num-seeds`) vmaps the same `act` and `absorb` over its members
(engine/population.py).

`make` is called once per (config, env spec), and its functions are shared by every agent
built from equal values; an agent on an env whose step is a pure function of its task (a
`program_key`: gymnax's) also shares the compiled chunk program of the equal agents built
before it in the process (a resume, an evaluation, the next test), so it traces and compiles
nothing (tests/agents/test_no_recompile.py). The seed is not part of that key: nothing the
programs compute depends on it except through the keys in their state.
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from agents.core.learning import Hyper, replay_step
from agents.core.parallel import DATA, ROLLOUT_SPECS, P, check_divisible, local_replica
from agents.core.parts import AgentParts
from agents.core.registry import AgentSpec
from engine.actor_thread import ActorThread
from engine.programs import (
    Program,
    RolloutProgram,
    chunk_length,
    data_checks,
    host_chunk,
    host_reason,
    initial_state,
    metric_sums,
    replay_program_specs,
    rollout_program_specs,
    signature,
    unshared,
)
from engine.protocol import Acting, ChunkOutput, IterationOutput, OneMember, TrainState
from engine.rollout import initial_actor_state, make_xla_rollout, trace_step_spec
from envs import obs_zeros
from envs.core import spec_key
from networks.torsos import convolves_on_cpu
from replay import make_trace_replay

# `make`'s results by (make, config, the env spec's `spec_key`): the most recent ones.
_PARTS: collections.OrderedDict = collections.OrderedDict()
PARTS_KEPT = 64


def make_parts(make, config, spec) -> AgentParts:
    """`make(config, spec)`, the same object for equal (config, spec) values."""
    key = (make, config, spec_key(spec))
    parts = _PARTS.pop(key, None)
    if parts is None:
        parts = make(config, spec)
    _PARTS[key] = parts  # the most recent last
    while len(_PARTS) > PARTS_KEPT:
        _PARTS.popitem(last=False)
    return parts


@functools.lru_cache(maxsize=128)
def _jitted_policy(parts: AgentParts, greedy: bool):
    return jax.jit(parts.evaluate(greedy))


def absorb(parts, config, replay, learner, replay_state, rollout, axis_name=None, hparams=None):
    """Take in a fresh rollout: `learn` from it (with a population member's `hparams`, or the
    config's), and store it in the replay where the agent has one. Pure; returns (learner,
    replay state, [metrics] or [] where `learn` gave none)."""
    learner, metrics = parts.learn(learner, rollout, Hyper(config, hparams), axis_name)
    if replay is not None:
        replay_state = replay.add(replay_state, rollout.obs, rollout.steps, rollout.core_state)
    return learner, replay_state, [] if metrics is None else [metrics]


def replay_update(parts, config, replay, batch_size, learner, replay_state, axis_name=None,
                  hparams=None):  # fmt: skip
    """One update from the replay (`ReplayParts`): (learner, replay state, metrics). Pure."""
    hyper = Hyper(config, hparams)
    if parts.replay.step is not None:
        return parts.replay.step(replay, replay_state, learner, batch_size, hyper, axis_name)
    update = functools.partial(parts.replay.update, hyper=hyper, axis_name=axis_name)
    return replay_step(replay, replay_state, learner, batch_size, update, axis_name)


class _Chunk:
    """Up to `length` training iterations of a parts agent in one compiled program: a
    `lax.scan` over `length` steps, step i running the iteration if i < `count` (a
    `lax.cond`; the skipped steps cost nothing but the branch), so one executable serves
    every count; `todos[i]`: the replay updates iteration i owes (computed on the host). The
    state is donated. Outputs: a `ChunkOutput` stacked `[length, ...]`."""

    def __init__(self, parts: AgentParts, config, env, length: int, replay=None):
        self.length, self.traces = length, 0
        self._compiled: dict = {}  # signature(state) -> executable
        rollout = make_xla_rollout(
            env, parts.act, config.trace_len, config.discount, parts.feedback
        )
        names = parts.metric_names

        def learn_owed(learner, replay_state, todo):
            def body(_, carry):
                learner, replay_state, sums = carry
                learner, replay_state, m = replay_update(
                    parts, config, replay, config.batch_size, learner, replay_state
                )
                return learner, replay_state, {k: sums[k] + m[k] for k in names}

            sums = dict.fromkeys(names, jnp.float32(0.0))
            return jax.lax.fori_loop(0, todo, body, (learner, replay_state, sums))

        def iteration(state: TrainState, todo):
            actor, traj = rollout(parts.acting(state.learner), state.actor)
            learner, replay_state, metrics = absorb(
                parts, config, replay, state.learner, state.replay, traj
            )
            sums, count = metric_sums(metrics, names)
            if replay is not None:
                learner, replay_state, more = learn_owed(learner, replay_state, todo)
                sums, count = {k: sums[k] + more[k] for k in names}, count + todo
            stats = (traj.finished_return, traj.finished_length, traj.game_over)
            return TrainState(learner, replay_state, actor), ChunkOutput(sums, count, *stats)

        def chunk(state, todos, count):
            self.traces += 1  # once per trace, not per call
            shapes = jax.eval_shape(iteration, state, todos[0])[1]
            zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

            def body(state, xs):
                i, todo = xs
                return jax.lax.cond(i < count, iteration, lambda s, _: (s, zeros), state, todo)

            return jax.lax.scan(body, state, (jnp.arange(length), todos))

        self._jitted = jax.jit(chunk, donate_argnums=(0,))

    def compile(self, state) -> None:
        key = signature(state)
        if key not in self._compiled:
            todos = jax.ShapeDtypeStruct((self.length,), jnp.int32)
            count = jax.ShapeDtypeStruct((), jnp.int32)
            self._compiled[key] = self._jitted.lower(state, todos, count).compile()

    def __call__(self, state, todos: list):
        """`todos`: the replay updates owed by each of the `len(todos)` iterations to run."""
        if not 1 <= len(todos) <= self.length:
            raise ValueError(f"a chunk runs 1 to {self.length} iterations, not {len(todos)}")
        state = unshared(state)  # a donated argument may not hold one buffer twice
        padded = np.zeros((self.length,), np.int32)
        padded[: len(todos)] = todos
        run = self._compiled.get(signature(state), self._jitted)
        return run(state, padded, np.int32(len(todos)))


# Programs shared by equal agents (`shared`): the most recently used ones.
_SHARED: collections.OrderedDict = collections.OrderedDict()
SHARED_KEPT = 32


def shared(key, build: Callable[[], Any]):
    """`build()`, or the object an equal agent's `build()` gave under `key` (hashable values:
    the agent's parts, config, env task, ...) before in this process, so its programs are not
    traced or compiled again; `key` None: never shared."""
    if key is None:
        return build()
    program = _SHARED.pop(key, None) or build()
    _SHARED[key] = program  # the most recent last
    while len(_SHARED) > SHARED_KEPT:
        _SHARED.popitem(last=False)
    return program


def chunk_program(parts: AgentParts, config, env, length: int, replay=None) -> _Chunk:
    """The chunk program of `parts` with `config` on `env` (and `replay`, the agent's, built
    from them): the one an equal agent built before in this process got, where the env's step
    is a pure function of its task (a `program_key`); a new one where it calls out to a pool
    of its own (envpool)."""
    env_key = getattr(env, "program_key", None)
    key = None if env_key is None else ("chunk", parts, config, env_key, length)
    return shared(key, lambda: _Chunk(parts, config, env, length, replay))


def _init_learner(parts: AgentParts, spec, key):
    """A fresh learner state of `parts` for an env of `spec` (its `num_envs` observations)."""
    return parts.init(key, obs_zeros(spec.obs_spec, (spec.num_envs,), jnp))


def scanned_updates(update: Callable, count: int, learner, replay_state, axis_name=None):
    """`count` replay updates (`update(learner, replay state, axis_name)`) in one
    `lax.scan`; metrics stacked `[count]`."""

    def body(carry, _):
        learner, replay_state, metrics = update(*carry, axis_name)
        return (learner, replay_state), metrics

    (learner, replay_state), metrics = jax.lax.scan(
        body, (learner, replay_state), None, length=count
    )
    return learner, replay_state, metrics


class PartsAgent(OneMember):
    """The training protocol (engine/protocol.py) over an agent's `AgentParts`; see the
    module docstring. Built for an agent by `agent_class`; never subclassed by one."""

    name: ClassVar[str]
    make: ClassVar[Callable[[Any, Any], AgentParts]]
    tunable: ClassVar[dict[str, tuple[float, float]]] = {}
    discrete_only: ClassVar[bool] = True
    privileged_obs: ClassVar[bool] = False  # keeps EnvSpec.privileged_obs from its networks
    supports_population: ClassVar[bool] = True  # `learn` reads hyper-parameters via `hyper`

    @classmethod
    def acting(cls, config, env, *, seed: int = 0) -> Acting:
        """The acting part alone, for `env` with any env count (`Member.acting`)."""
        parts = make_parts(cls.make, config, env.spec)
        n = env.spec.num_envs
        return Acting(
            functools.partial(_jitted_policy, parts), parts.acting, parts.initial_core,
            lambda key: parts.init(key, obs_zeros(env.spec.obs_spec, (n,), jnp)),
            parts.feedback,
        )  # fmt: skip

    def __init__(self, config, env, *, seed: int = 0, mesh=None, replay_memory_limit=None):
        """`mesh`: a 1-D mesh from `agents.core.parallel.make_mesh` for data parallelism; None
        or a single device: one device. `replay_memory_limit`: bytes a device's replay may
        take (default: what the device has)."""
        spec, procs = env.spec, jax.process_count()
        if self.discrete_only and not spec.discrete:
            raise ValueError(
                f"{self.name} needs discrete actions; {spec.env_id} has a continuous action "
                f"space of shape {spec.action_shape}"
            )
        if getattr(spec, "privileged_obs", ()) and not self.privileged_obs:
            raise ValueError(
                f"{self.name} does not keep privileged observation dimensions from its "
                f"networks; {spec.env_id} declares {list(spec.privileged_obs)} (--privileged-obs)"
            )
        if config.num_envs != spec.num_envs * procs:
            raise ValueError(
                f"config.num_envs={config.num_envs} but the env has {spec.num_envs} envs "
                f"x {procs} process(es)"
            )
        self.mesh = mesh if mesh is not None and mesh.size > 1 else None
        self.num_devices = self.mesh.size if self.mesh is not None else 1
        self.config, self.env, self.seed = config, env, seed
        self.parts = parts = make_parts(type(self).make, config, spec)
        if self.mesh is not None:  # each device steps and learns from its share of the envs
            check_divisible("--num-envs", config.num_envs, self.num_devices)
            if parts.replay is not None:
                check_divisible("--batch-size", config.batch_size, self.num_devices)
            if parts.check_devices is not None:
                parts.check_devices(self.num_devices)
        self.metric_names, self.modules = parts.metric_names, parts.modules
        self.core_feedback = parts.feedback  # read by the acting loops (evaluation too)
        self.steps_per_iteration = config.trace_len * config.num_envs
        self.max_chunk = chunk_length(self.steps_per_iteration)
        self.compile_s = 0.0
        # seconds the learner waited on other threads, by what for (benchmarks read it)
        self.wait_s = {"learner_waiting_for_actor": 0.0} if parts.decoupled else {}
        self._chunk: _Chunk | None = None
        self._actor_thread: ActorThread | None = None
        self._memory_limit = replay_memory_limit
        self.replay = None if parts.replay is None else self._make_replay(replay_memory_limit)

    # ------------------------------------------------------------------ the protocol
    @property
    def host_driven(self) -> str | None:
        if self.parts.staged is not None:
            return self.parts.staged.why
        return self.parts.decoupled or host_reason(self.env, self.mesh, self.config)

    @property
    def bytes_per_transition(self) -> float:
        return 0.0 if self.replay is None else self.replay.bytes_per_transition

    def init_learner(self, key):
        return _init_learner(self.parts, self.env.spec, key)

    def _init_actor(self, key):
        return initial_actor_state(self.env, self.parts.initial_core(self.env.spec.num_envs), key)

    def _init_replay(self):
        if self.replay is None:
            return ()
        if self.mesh is None:
            return self.replay.init()
        specs = self.replay.partition_specs(DATA)  # each device its own envs' streams
        init = jax.shard_map(self.replay.init, mesh=self.mesh, in_specs=(), out_specs=specs)
        return jax.jit(init)()

    def init(self, key, *, jit: bool = False) -> TrainState:
        """`engine.programs.initial_state` of this agent's pieces; with `jit`, the learner's
        init is one program, shared by equal agents (`shared`)."""
        init_learner = self.init_learner
        if jit:
            spec = self.env.spec
            init_learner = shared(
                ("init", self.parts, spec_key(spec)),
                lambda: jax.jit(functools.partial(_init_learner, self.parts, spec)),
            )
        return initial_state(key, init_learner, self._init_actor, self._init_replay, self.mesh)

    def reset_actor(self, state: TrainState, key) -> TrainState:
        self.close()  # a decoupled actor's thread steps the envs with its own actor state
        return state._replace(actor=self._init_actor(key))

    def compile(self, state: TrainState) -> float:
        t0 = time.perf_counter()
        if self.host_driven is None:
            self._chunk_program().compile(unshared(state))
        else:
            rollout, learn = self._host_programs
            params = self.parts.acting(state.learner)
            rollout.compile(params, state.actor)
            placed = rollout.abstract(params, state.actor)
            if self.parts.staged is not None:
                self._compile_staged(learn, state.learner, placed)
            else:
                learn[0].compile(state.learner, state.replay, placed)
                for program in learn[1:]:  # one update, and K scanned
                    program.compile(state.learner, state.replay)
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def updates_due(self, iteration: int, env_steps: int) -> int:
        """The replay updates this iteration owes after its rollout (none without a replay)."""
        if self.replay is None:
            return 0
        return self.parts.replay.updates_due(iteration, env_steps, self.seed)

    def train_chunk(self, state: TrainState, iteration: int, env_steps: int, count: int):
        if not 1 <= count <= self.max_chunk:
            raise ValueError(f"train_chunk runs 1 to {self.max_chunk} iterations, not {count}")
        steps = self.steps_per_iteration
        if self.host_driven is not None:
            return host_chunk(
                self.train_iteration, state, iteration, env_steps, steps, count,
                self.metric_names,
            )  # fmt: skip
        todos = [self.updates_due(iteration + k, env_steps + k * steps) for k in range(count)]
        return self._chunk_program()(state, todos)

    def act(self, greedy: bool):
        return _jitted_policy(self.parts, greedy)

    def acting_params(self, learner):
        """The actor's params: this process's replica when data parallel."""
        params = self.parts.acting(learner)
        return params if self.mesh is None else local_replica(params)

    def initial_core(self, num_envs: int):
        return self.parts.initial_core(num_envs)

    @property
    def programs(self) -> dict[str, Any]:
        """The device programs, by name (their `traces` count compilations)."""
        if self._chunk is not None:
            return {"chunk": self._chunk}
        rollout, learn = self._host_programs
        names = ("prepare", "step", "refresh") if self.parts.staged else (
            "absorb", "replay_update", "replay_updates",
        )  # fmt: skip
        return {"rollout": rollout, **dict(zip(names, learn, strict=False))}

    def close(self) -> None:
        """Stop the decoupled actor's thread, if one runs (idempotent)."""
        if self._actor_thread is not None:
            self._actor_thread.close()
            self._actor_thread = None

    # ------------------------------------------------------------------ the pieces
    def _make_replay(self, memory_limit):
        """The replay of one device (`ReplayParts.wrap` of the trace replay): its step spec
        is what `act` records, its extras the recurrent state at each trace's start."""
        spec, n, parts = self.env.spec, self.env.spec.num_envs, self.parts
        learner = jax.eval_shape(self.init_learner, jax.random.PRNGKey(0))
        obs = jax.eval_shape(lambda: obs_zeros(spec.obs_spec, (n,), jnp))
        first = jax.ShapeDtypeStruct((n,), jnp.bool_)
        core = parts.initial_core(n)
        out = jax.eval_shape(
            parts.act, jax.eval_shape(parts.acting, learner), obs, first, core,
            jax.random.PRNGKey(0),
        )  # fmt: skip
        c = self.config
        if self.num_devices > 1 and c.microbatch_traces:
            check_divisible(
                "--batch-size per device", c.batch_size // self.num_devices,
                c.microbatch_traces, "--microbatch-traces",
            )  # fmt: skip
        extras = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), core)
        return parts.replay.wrap(
            make_trace_replay(
                spec, trace_step_spec(out), trace_len=c.trace_len, buffer_size=c.buffer_size,
                shards=self.num_devices, extras_spec=extras, memory_limit=memory_limit,
            )
        )  # fmt: skip

    def _chunk_program(self) -> _Chunk:
        if self._chunk is None:
            self._chunk = chunk_program(
                self.parts, self.config, self.env, self.max_chunk, self.replay
            )
        return self._chunk

    @functools.cached_property
    def _host_programs(self) -> tuple:
        """The one-iteration path's programs: the rollout, then (`absorb`, `replay_update`),
        or the staged learning's three programs. Those an equal agent built before in this
        process are shared (`shared`): the learning programs always (they see no env), the
        rollout where the env's step is a pure function of its task (a `program_key`)."""
        c, mesh, parts = self.config, self.mesh, self.parts
        env_key = getattr(self.env, "program_key", None)
        rollout = shared(
            None if env_key is None else ("rollout", parts, c, env_key, mesh),
            lambda: RolloutProgram(
                self.env, parts.act, c.trace_len, c.discount, mesh, parts.feedback
            ),
        )
        key = ("learn", parts, c, spec_key(self.env.spec), mesh, self._memory_limit,
               data_checks())  # fmt: skip
        build = self._staged_programs if parts.staged is not None else self._learn_programs
        return rollout, shared(key, build)

    def _learn_programs(self) -> tuple:
        """`absorb`, then `replay_update` and K of them scanned where the agent has a replay:
        programs of module functions over the parts, config and replay (no reference to this
        agent or its env, so an equal agent may share them)."""
        mesh, replay = self.mesh, self.replay
        replay_specs = () if replay is None else replay.partition_specs(DATA)
        take, update = {}, {}
        if mesh is not None:
            take, update = rollout_program_specs(replay_specs), replay_program_specs(replay_specs)
        absorb_fn = functools.partial(absorb, self.parts, self.config, replay)
        learn = [Program(absorb_fn, mesh=mesh, donate_argnums=(0, 1), name="absorb", **take)]
        if replay is not None:
            b = self.config.batch_size // self.num_devices
            one = functools.partial(replay_update, self.parts, self.config, replay, b)
            learn.append(
                Program(one, mesh=mesh, donate_argnums=(0, 1), name="replay_update", **update)
            )
            if self.updates_per_program > 1:
                many = functools.partial(scanned_updates, one, self.updates_per_program)
                learn.append(
                    Program(many, mesh=mesh, donate_argnums=(0, 1), name="replay_updates", **update)
                )
        return tuple(learn)

    def _staged_programs(self) -> tuple:
        staged, mesh, specs = self.parts.staged, self.mesh, [{}, {}, {}]
        if mesh is not None:
            buf = staged.buffer_specs
            specs = [
                dict(in_specs=(P(), ROLLOUT_SPECS), out_specs=(P(), buf)),
                dict(in_specs=(P(), buf, P(), P()), out_specs=(P(), P())),
                dict(in_specs=(P(), buf), out_specs=buf),
            ]
        fns, donated = (staged.prepare, staged.step, staged.refresh), ((0,), (0,), (1,))
        return tuple(
            Program(fn, mesh=mesh, donate_argnums=d, **spec)
            for fn, d, spec in zip(fns, donated, specs, strict=True)
        )

    def _compile_staged(self, programs, learner, placed) -> None:
        prepare, step, refresh = programs
        out = jax.eval_shape(prepare._jitted, learner, placed)
        learner_shape, buffer = out[1] if prepare.checks else out  # --debug: (error, out)
        prepare.compile(learner, placed)
        step.compile(learner_shape, buffer, *self.parts.staged.steps[0][1])
        if any(again for again, _ in self.parts.staged.steps):
            refresh.compile(learner_shape, buffer)

    def collect(self, state: TrainState):
        """One rollout: `(actor, rollout, rollout placed on the mesh)`. With the current
        policy; a decoupled agent's is the next one its actor thread made (with the params
        published last: `train_iteration`)."""
        rollout = self._host_programs[0]
        if not self.parts.decoupled:
            return rollout(self.parts.acting(state.learner), state.actor)
        if self._actor_thread is None:
            self._actor_thread = ActorThread(rollout, self.acting_params(state.learner),
                                             state.actor)  # fmt: skip
        actor, traj, waited = self._actor_thread.get()
        self.wait_s["learner_waiting_for_actor"] += waited
        return actor, traj, rollout.place(traj)

    def train_iteration(self, state: TrainState, iteration: int, env_steps: int):
        """One iteration as the host drives it: the rollout program (`collect`), then
        `absorb`'s and the owed `replay_update`s (or the staged learning's: `prepare`, then
        each step)."""
        learn = self._host_programs[1]
        actor, traj, placed = self.collect(state)
        replay, staged = state.replay, self.parts.staged
        if staged is None:
            learner, replay, metrics = learn[0](state.learner, replay, placed)
            todo = self.updates_due(iteration, env_steps)
            learner, replay, more = self.run_replay_updates(learner, replay, todo)
            metrics += more
            if self._actor_thread is not None and todo:
                self._actor_thread.publish(self.acting_params(learner))
        else:
            prepare, step, refresh = learn
            learner, buffer = prepare(state.learner, placed)
            metrics = []
            for again, args in staged.steps:
                if again:
                    buffer = refresh(learner, buffer)
                learner, m = step(learner, buffer, *args)
                metrics.append(m)
        stats = (traj.finished_return, traj.finished_length, traj.game_over)
        return TrainState(learner, replay, actor), IterationOutput(metrics, *stats)

    @property
    def updates_per_program(self) -> int:
        """Replay updates per host-driven program (`ReplayParts.per_program`)."""
        return 1 if self.parts.replay is None else self.parts.replay.per_program

    def run_replay_updates(self, learner, replay, count: int):
        """`count` replay updates as the host-driven path runs them: whole programs of
        `updates_per_program` (their metrics stacked `[K]`: one entry stands for K updates),
        then single ones. (learner, replay, [metrics of each program])."""
        programs, metrics = self._host_programs[1], []
        k = self.updates_per_program
        for _ in range(count // k if k > 1 else 0):
            learner, replay, m = programs[2](learner, replay)
            metrics.append(m)
        for _ in range(count % k if k > 1 else count):
            learner, replay, m = programs[1](learner, replay)
            metrics.append(m)
        return learner, replay, metrics

    def absorb(self, learner, replay, traj, axis_name=None, hparams=None):
        """`absorb` (module function) with this agent's parts, config and replay."""
        return absorb(self.parts, self.config, self.replay, learner, replay, traj, axis_name,
                      hparams)  # fmt: skip

    def replay_update(self, learner, replay, axis_name=None, hparams=None):
        """One update from the replay (this device's share of the batch)."""
        b = self.config.batch_size // self.num_devices
        return replay_update(
            self.parts, self.config, self.replay, b, learner, replay, axis_name, hparams
        )

    def scanned_updates(self, learner, replay, axis_name=None):
        """`updates_per_program` replay updates in one `lax.scan`; metrics stacked `[K]`."""
        return scanned_updates(
            self.replay_update, self.updates_per_program, learner, replay, axis_name
        )

    # ------------------------------------------------------------------ as a population member
    # What engine/population.py reads of its members: the same pieces.
    @property
    def select_action(self):
        return self.parts.act

    def reset_params(self, state, params, hparams: dict | None = None):
        return self.parts.reset_params(state, params, Hyper(self.config, hparams))

    def policy_params(self, learner):
        return self.parts.acting(learner)

    @property
    def convolves_on_cpu(self) -> bool:
        return convolves_on_cpu(self.env.spec, self.config)

    def population_conflict(self) -> str | None:
        if self.parts.decoupled:
            why = self.parts.decoupled
            return f"a population acts and learns in lock-step (one program for all): {why}"
        return None if self.parts.staged is None else self.parts.staged.population


@functools.cache
def agent_class(spec: AgentSpec) -> type:
    """The class implementing the training protocol (engine/protocol.py) of the registered
    agent `spec`: its `make` given the protocol (`parts_agent`, built once per spec), or the
    class an agent that implements the protocol itself registers."""
    if isinstance(spec.make, type):
        return spec.make
    return parts_agent(
        spec.name, spec.make, tunable=dict(spec.tunable), discrete_only=spec.discrete_only,
        privileged_obs=spec.privileged_obs,
    )  # fmt: skip


def parts_agent(
    name: str,
    make: Callable[[Any, Any], AgentParts],
    *,
    tunable: dict[str, tuple[float, float]] | None = None,
    discrete_only: bool = True,
    privileged_obs: bool = False,
) -> type:
    """The agent class (`agent_class`) of an agent written as `make(config, spec)`.
    `tunable`: the config fields a population may vary per member (`--vary`, `--evolve`),
    with their ranges: fields `learn` reads through its `hyper` argument, and `discount`,
    which the rollout writes into the traces. `privileged_obs`: whether its networks keep
    an env's privileged observation dimensions (`EnvSpec.privileged_obs`) out; an agent
    that does not refuses such an env."""
    return type(
        f"{name.upper()}Agent",
        (PartsAgent,),
        {
            "name": name,
            "make": staticmethod(make),
            "tunable": dict(tunable or {}),
            "discrete_only": discrete_only,
            "privileged_obs": privileged_obs,
            "__module__": make.__module__,
        },
    )
