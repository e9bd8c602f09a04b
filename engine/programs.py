"""One helper that turns an agent's pure functions into device programs.

`Program(fn, mesh=..., in_specs=..., out_specs=..., donate_argnums=...)` is `jax.jit(fn)` on
one device, or `jax.jit(jax.shard_map(fn))` over a 1-D data-parallel mesh: `fn` is called
with `axis_name=None` or `axis_name=DATA` so the same code averages gradients with
`lax.pmean` only when sharded. `compile(*args)` compiles ahead of time (args may be arrays or
`jax.ShapeDtypeStruct`s); later calls run the compiled executable, which refuses inputs of
another shape or dtype rather than silently recompiling. `traces` counts how often `fn` was
traced (a test asserts it stays at 1).

With data checks on (`enable_data_checks()`, what `--debug` does), every loss of
`agents.losses` traced inside a Program also checks its data at run time (actions in range,
probabilities valid; see `agents.losses.checked`): the program is `checkify`-ed and each call
raises on the first failed check. It costs reductions and a host read per call.

`Program(fn, population=True, mesh=...)` is the population form (engine/population.py):
`fn` written for one learner is `vmap`ped over the leading population axis of every argument
and output, with `axis_name=None` (members never average gradients with each other); over a
mesh the members are split between devices by `jax.shard_map` along the mesh axis `POP`, each
device vmapping its own share. With `member_loop=True` the members are instead unrolled one
after another inside the same program (`member_loop` below): no batching over members, which
on XLA:CPU keeps a convolution a plain convolution (vmapped over members its weights become a
grouped convolution, 1.8-2.8x slower per member there; docs/results/population/).

`RolloutProgram` does the same for acting: envpool's XLA step inside one jitted `lax.scan`
when the env has it, else a host loop (gymnasium), and under data parallelism it acts on
this process's first device and then splits the traces over the mesh by env.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify
from jax.sharding import PartitionSpec as P

from agents.core.parallel import (
    DATA,
    POP,
    ROLLOUT_SPECS,
    abstract_rollout,
    local_replica,
    place_rollout,
)
from agents.losses._checks import debug_scope
from engine.rollout import make_host_rollout, make_xla_rollout, rollout_shape
from networks.torsos import convolves_on_cpu

_DATA_CHECKS = [False]

# The most iterations one chunk program runs: its outputs hold `[N, T, B]` episode statistics,
# kept under about 2**18 elements per field.
MAX_CHUNK, CHUNK_ELEMENTS = 1024, 2**18


def chunk_length(steps_per_iteration: int) -> int:
    """Iterations per chunk program for iterations of `steps_per_iteration` env steps."""
    return max(1, min(MAX_CHUNK, CHUNK_ELEMENTS // steps_per_iteration))


def initial_state(key, init_learner, init_actor, init_replay, mesh=None, *, jit=False):
    """A fresh `TrainState` from the run key: the learner from one half of it (the same in
    every process: replicated over `mesh`), the actor from the other (each process folds in
    its index: different actions), the replay from `init_replay()`. `jit=True` builds the
    learner with one compiled program instead of op by op: the faster way in a fresh process
    (SAC 4.2 -> 2.6 s, Reactor 6.8 -> 3.8 s on the 2-vCPU machine), the slower one for a
    later agent of a process, whose ops are compiled already (SAC 0.07 -> 1.4 s). The runner
    passes it; tests, which build many agents in one process, do not."""
    from agents.core.parallel import to_global
    from engine.protocol import TrainState

    learner_key, actor_key = jax.random.split(key)
    if jax.process_count() > 1:
        actor_key = jax.random.fold_in(actor_key, jax.process_index())
    actor = init_actor(actor_key)
    learner = (jax.jit(init_learner) if jit else init_learner)(learner_key)
    if mesh is not None:
        learner = to_global(learner, mesh, P())
    return TrainState(learner, init_replay(), actor)


def signature(tree) -> tuple:
    """What a compiled program of `tree` (its arguments: arrays or `jax.ShapeDtypeStruct`s)
    depends on: its structure, shapes and dtypes, and the JAX settings that change a trace
    (jax.jit keys its own cache on them too)."""
    leaves, structure = jax.tree.flatten(tree)
    flags = tuple(
        getattr(jax.config, name)
        for name in ("jax_enable_x64", "jax_debug_nans", "jax_debug_infs",
                     "jax_numpy_rank_promotion", "jax_default_matmul_precision")
    )  # fmt: skip
    avals = tuple((x.shape, x.dtype, getattr(x, "weak_type", False)) for x in leaves)
    return structure, avals, flags


def host_reason(env, mesh, config) -> str | None:
    """Why each training iteration of an agent on `env` (data parallel over `mesh`, or None)
    needs the host; None: many iterations can run in one device program."""
    if _DATA_CHECKS[0]:
        return "--debug checks every loss's data in one-iteration programs"
    if not env.has_xla:
        return f"{env.spec.env_id} is stepped on the host ({env.spec.backend})"
    if mesh is not None:
        return "a data-parallel run places each rollout on the mesh from the host"
    if convolves_on_cpu(env.spec, config):
        return "a convolution's weight gradient in a rolled loop is slow on XLA:CPU"
    return None


def enable_data_checks(on: bool = True) -> None:
    """Programs built from now on check their losses' data at run time (module docstring)."""
    _DATA_CHECKS[0] = on


def data_checks() -> bool:
    """Whether programs built now check their losses' data (`enable_data_checks`)."""
    return _DATA_CHECKS[0]


def member_loop_map(fn):
    """`jax.vmap(fn)`'s contract (map the leading axis of every argument leaf, stack the
    outputs), computed as an unrolled loop over that axis inside the traced program: one
    copy of `fn` per member, none of them batched."""

    def looped(*args):
        leaves = jax.tree.leaves(args)
        if not leaves:
            raise ValueError("member_loop_map needs at least one array argument")
        outs = [fn(*jax.tree.map(lambda x, i=i: x[i], args)) for i in range(leaves[0].shape[0])]
        return jax.tree.map(lambda *xs: jnp.stack(xs), *outs)

    return looped


def over_members(member_loop: bool):
    """How a population maps a member's function over its members: `member_loop_map` or
    `jax.vmap`."""
    return member_loop_map if member_loop else jax.vmap


class Program:
    """A pure function compiled for one device or a data-parallel mesh (module docstring)."""

    def __init__(
        self,
        fn,
        *,
        mesh=None,
        in_specs: Any = None,
        out_specs: Any = None,
        donate_argnums: tuple[int, ...] = (),
        name: str | None = None,
        population: bool = False,
        member_loop: bool = False,
    ):
        self.name = name or getattr(fn, "__name__", "program")
        self.traces = 0
        self.checks = _DATA_CHECKS[0]
        axis_name = DATA if mesh is not None and not population else None
        if population:
            member_fn = fn
            mapped = over_members(member_loop)

            def fn(*args, axis_name=None):  # one learner per member: no axis
                return mapped(lambda *a: member_fn(*a, axis_name=None))(*args)

            if mesh is not None:  # every argument and output split by member
                in_specs = out_specs = jax.sharding.PartitionSpec(POP)

        def counted(*args):
            self.traces += 1  # runs once per trace, not per call
            if not self.checks:
                return fn(*args, axis_name=axis_name)
            with debug_scope():  # the losses emit checkify checks while traced
                return fn(*args, axis_name=axis_name)

        if mesh is not None:
            counted = jax.shard_map(counted, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
        if self.checks:
            counted = checkify.checkify(counted, errors=checkify.user_checks)
        self._jitted = jax.jit(counted, donate_argnums=donate_argnums)
        self._compiled, self._compiled_for = None, None

    def compile(self, *args) -> Program:
        """Compile for `args`' shapes, unless compiled for them already (a program shared by
        equal agents, engine/driver.py, is compiled once)."""
        key = signature(args)
        if key != self._compiled_for:
            self._compiled, self._compiled_for = self._jitted.lower(*args).compile(), key
        return self

    def __call__(self, *args):
        out = (self._compiled or self._jitted)(*args)
        if self.checks:
            err, out = out
            checkify.check_error(err)
        return out


class RolloutProgram:
    """`T` steps of every env with the current policy, recorded time-major.

    `run(params, actor) -> (actor, Rollout)` acts with `params` on this process's first
    device (`acting_params` gives them); `place(traj)` splits a rollout over the mesh by env
    (identity on one device). `abstract(params, actor)` is the placed rollout's shape."""

    def __init__(
        self, env, select_action, trace_len: int, discount: float, mesh=None, feedback=None
    ):
        self.env, self.mesh = env, mesh
        self._select_action, self._trace_len, self._discount = select_action, trace_len, discount
        self._feedback = feedback
        self.traces = 0
        self._jitted = self._compiled_for = None
        if env.has_xla:
            rollout = make_xla_rollout(env, select_action, trace_len, discount, feedback)

            def counted(params, actor):
                self.traces += 1
                return rollout(params, actor)

            self._run = self._jitted = jax.jit(counted)
        else:
            self._run = make_host_rollout(env, select_action, trace_len, discount, feedback)

    def acting_params(self, params):
        """This process's replica of replicated params (no copy); params on one device."""
        return params if self.mesh is None else local_replica(params)

    def run(self, params, actor):
        return self._run(params, actor)

    def place(self, traj):
        return traj if self.mesh is None else place_rollout(traj, self.mesh)

    def __call__(self, params, actor):
        """Act with the learner's params; returns (actor, rollout, placed rollout)."""
        actor, traj = self._run(self.acting_params(params), actor)
        return actor, traj, self.place(traj)

    def abstract(self, params, actor):
        """Shape of the placed rollout (for compiling the programs that consume it)."""
        shape = rollout_shape(
            self.env, self._select_action, self._trace_len, self._discount,
            self.acting_params(params), actor, self._feedback,
        )  # fmt: skip
        return shape if self.mesh is None else abstract_rollout(shape, self.mesh)

    def compile(self, params, actor):
        """Compile the XLA rollout for these shapes, unless compiled for them already."""
        if self._jitted is None:
            return
        args = (self.acting_params(params), actor)
        key = signature(args)
        if key != self._compiled_for:
            self._run, self._compiled_for = self._jitted.lower(*args).compile(), key


def rollout_program_specs(replay_specs):
    """in/out specs of a program `(learner, replay, rollout) -> (learner, replay, metrics)`."""
    P = jax.sharding.PartitionSpec
    return dict(in_specs=(P(), replay_specs, ROLLOUT_SPECS), out_specs=(P(), replay_specs, P()))


def replay_program_specs(replay_specs):
    """in/out specs of a program `(learner, replay) -> (learner, replay, metrics)`."""
    P = jax.sharding.PartitionSpec
    return dict(in_specs=(P(), replay_specs), out_specs=(P(), replay_specs, P()))


def unshared(tree):
    """`tree` with a leaf that repeats an earlier one (the same array object, e.g. a target
    network initialised as the online one) replaced by a copy: a donated argument may not
    hold one buffer twice."""
    seen: set[int] = set()

    def fresh(x):
        if not isinstance(x, jax.Array):
            return x
        if id(x) in seen:
            return jnp.copy(x)
        seen.add(id(x))
        return x

    return jax.tree.map(fresh, tree)


def copy_tree(tree):
    """Fresh buffers of a pytree (so a donated original and the copy never alias)."""
    return jax.tree.map(jnp.copy, tree)


def metric_sums(metrics: list, names, members: int | None = None, xp=jnp):
    """`(sums, count)` of an iteration's metrics list (`IterationOutput.metrics`), with `xp`
    `jax.numpy` (traced) or `numpy` (host arrays): each entry one update's dict of scalars or
    K scanned updates' dict of `[K]` arrays. With `members` (a population), each entry is
    `(metrics, active)` with `[P]` or `[P, K]` leaves and only active updates count; sums and
    count are then `[P]`."""
    shape = () if members is None else (members,)
    sums = {name: xp.zeros(shape, xp.float32) for name in names}
    count = xp.zeros(shape, xp.int32)
    for entry in metrics:
        m, active = entry if members is not None else (entry, None)
        if active is None:
            active = xp.ones(xp.shape(m[names[0]]), bool) if names else xp.ones((), bool)
        axes = tuple(range(len(shape), xp.ndim(active)))
        for name in names:
            value = xp.where(active, xp.asarray(m[name], xp.float32), 0.0)
            sums[name] = sums[name] + xp.sum(value, axis=axes, dtype=xp.float32)
        count = count + xp.sum(active, axis=axes, dtype=xp.int32)
    return sums, count


def host_chunk(
    train_iteration, state, iteration, env_steps, steps, count, names, members: int | None = None
):
    """`count` iterations driven from the host, one `train_iteration(state, iteration,
    env_steps)` after another (`steps` env steps each), as one `ChunkOutput` stacked over
    them, on the host: each iteration syncs here (its env steps on the host, or its programs
    run one iteration each), and no device work is queued beside its programs (on XLA:CPU a
    data-parallel program's collectives wait for every device's thread). The runner then
    logs one metrics row per `count` iterations, as for a chunk program. An iteration with a
    non-finite metric ends the chunk there (fewer than `count` entries: the runner stops the
    run on it)."""
    from engine.protocol import ChunkOutput

    chunks = []
    for k in range(count):
        state, out = train_iteration(state, iteration + k, env_steps + k * steps)
        out = jax.device_get(out)
        sums, updates = metric_sums(out.metrics, names, members, xp=np)
        stats = (out.finished_return, out.finished_length, out.game_over)
        chunks.append(ChunkOutput(sums, updates, *stats))
        if not all(np.isfinite(v).all() for v in sums.values()):
            break  # the runner stops the run on it (NonFiniteError): no need to go on
    return state, jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *chunks)


class ChunkProgram:
    """Up to `length` training iterations in one compiled program (agents/fused.py).

    `iteration(state, todo) -> (state, ChunkOutput of one iteration)` is an agent's pure
    iteration; `todo` is the number of learner updates it owes (a host schedule: int32, or
    `[P]` for a population). `run(state, todos, count)` runs it for i < `count` as a
    `lax.scan` of `length` steps, each a `lax.cond` (the skipped steps cost nothing but the
    branch), so one executable serves every count; the state is donated.

    With a `mesh`, a population's (`todo_shape` `(P,)`) members are split over its devices
    along `POP`: each device scans its own members' iterations, with no communication (the
    members are independent), so that the devices run side by side. The iteration then
    sees its local members only (`P / devices` of them)."""

    def __init__(self, iteration, length: int, todo_shape: tuple[int, ...] = (), mesh=None):
        self.length, self.todo_shape = length, todo_shape
        self.traces = 0

        def chunk(state, todos, count):
            self.traces += 1
            shapes = jax.eval_shape(iteration, state, todos[0])[1]

            def skip(state, todo):
                return state, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

            def body(state, xs):
                i, todo = xs
                return jax.lax.cond(i < count, iteration, skip, state, todo)

            return jax.lax.scan(body, state, (jnp.arange(length), todos))

        if mesh is not None:
            members, stacked = P(POP), P(None, POP)  # state [P, ...]; todos, outputs [N, P, ...]
            chunk = jax.shard_map(
                chunk,
                mesh=mesh,
                in_specs=(members, stacked, P()),
                out_specs=(members, stacked),
                # the skipped iterations' zeros vary over no device, the run ones' outputs
                # over POP: lax.cond's type check would refuse the two branches
                check_vma=False,
            )
        self._jitted = jax.jit(chunk, donate_argnums=(0,))
        self._compiled = None

    def _todos(self, todos) -> jax.Array:
        padded = np.zeros((self.length, *self.todo_shape), np.int32)
        padded[: len(todos)] = np.asarray(todos, np.int32).reshape((-1, *self.todo_shape))
        return padded

    def compile(self, state) -> ChunkProgram:
        todos = jax.ShapeDtypeStruct((self.length, *self.todo_shape), jnp.int32)
        count = jax.ShapeDtypeStruct((), jnp.int32)
        self._compiled = self._jitted.lower(state, todos, count).compile()
        return self

    def __call__(self, state, todos: list):
        """`todos`: the updates owed by each of the `len(todos)` iterations to run."""
        if not 1 <= len(todos) <= self.length:
            raise ValueError(f"a chunk runs 1 to {self.length} iterations, not {len(todos)}")
        fn = self._compiled or self._jitted
        return fn(unshared(state), self._todos(todos), np.int32(len(todos)))
