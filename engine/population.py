"""Many learners in one program: P members of an agent behind one agent protocol.

`Population(members, mesh, hparams)` runs P independent learners, actors and replays as one
set of device programs: every state is the single run's state with a leading population
axis `[P, ...]`, and each member's pure functions (`select_action`, `absorb`,
`replay_update`) are `vmap`ped over it (`Program(..., population=True)`). With a mesh of
several devices the members are split over them (`jax.shard_map` along the mesh axis
`POP`): with an env whose step is plain JAX (gymnax), each device runs its own members'
iterations, many per program (`ChunkProgram`'s mesh); with envpool, one iteration per program.

Member i *is* the single run with seed `seed + i`. The members step ONE envpool pool of P·N
envs seeded `envs.run_env_seed(seed, N)` = seed·N: both backends seed env k of a vector env
`base + k`, and a single run with seed s seeds its N envs from s·N, so envs i·N .. i·N + N − 1
of the pool are exactly member i's single-run envs. `members[i]` is built, as its single run
builds its agent, on `envs.PoolSlice(pool, i, P)` (`member_envs`): an N-env view that
carries the spec and is never stepped itself; the rollout steps the whole pool once per
step (one XLA call for every member, not P). Member i starts from `PRNGKey(seed + i)` split
as the single run splits it, and asks its own `updates_due` (ACER's Poisson draw depends on
the seed, unless --replay-draw shared). Members due fewer updates than the most in an
iteration run the same program with their update masked out (learner and priorities kept,
the learner's RNG key not advanced), so each member's learner sees exactly the sequence of
updates its single run would. Members that owe the same counts in every iteration (lock
step: DQN, R2D1, SAC, TD3, the Reactor, ACER with --replay-draw shared) run their updates
unmasked.
Metrics come back with an `active` mask and are split per member on the host
(`split_output`).

Hyper-parameters that vary over members (`hparams`: `field -> [P]`, drawn by
`engine.evolution.draw_hparams`) live in the learner state (`PopulationLearner.hparams`, so
they are checkpointed and evolve with it). Inside the vmapped programs member 0's agent runs
every member, and each member's traced values reach its learner as the explicit `hparams`
argument of `absorb`, `replay_update` and `reset_params` (the learner reads its config
through `agents.core.learning.Hyper`, the member's values first): no config or agent is
copied or edited. Only fields the agent lists in `tunable` may vary (numbers the learner
reads arithmetically; `discount` is written into the traces by this module's rollout).
`evolve` applies a PBT or CEM generation (engine/evolution.py).

What an agent needs to take part: it is a parts agent (engine/driver.py: its iteration is
the shared one, collect, `absorb`, then `updates_due` × `replay_update`), whose pure
functions do not read its seed (randomness comes from the keys in its states), and which has
`reset_params(state, params, hparams) -> state`: its learner state restarted from new weights as its
`init` starts its own (fresh optimiser states, target or averaged copies set to them), which
CEM applies to the members it resamples. It says so with
`supports_population = True` (and `population_conflict()` names a configuration that
cannot, e.g. Reactor's decoupled actor thread). The rollout needs an env stepped inside XLA
(envpool's XLA step, or gymnax).

Member loop: by default the members are `vmap`ped; on XLA:CPU with image observations they
are instead unrolled one after another inside the same programs (`member_loop`, the acting
policy too), because a convolution vmapped over members becomes a grouped convolution that
XLA:CPU runs 1.8-2.8x slower per member. One program still serves every member; the compile
grows with P. `member_loop=True/False` overrides the choice.

Costs of the masking: a member with fewer due updates still computes the others'; with
ACER's Poisson(4) draws and P = 8 the population runs about E[max of 8] ≈ 7 updates per
iteration where a member averages 4. Under a mesh with envpool the rollout runs on the
first device (the env steps are host calls), so acting gathers every member's policy params
there once per iteration; a pure-JAX env's rollout runs on each device (`_place_all`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from agents.core.config import ConfigError
from agents.core.learning import episode_fields
from agents.core.parallel import POP, P, check_divisible
from agents.core.rollout import ActorState
from engine import evolution
from engine.programs import (
    ChunkProgram,
    Program,
    chunk_length,
    host_chunk,
    metric_sums,
    over_members,
)
from engine.protocol import ChunkOutput, IterationOutput, TrainState
from engine.rollout import _assemble, _env_action, _record
from envs import PoolSlice


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _member(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def _all_active(metrics: dict, size: int):
    """An `absorb` metrics entry as `(metrics, active)`: every member ran it; `active` has
    the leaves' shape, `[P]` (one update) or `[P, K]` (K scanned updates)."""
    leaves = jax.tree.leaves(metrics)
    return metrics, jnp.ones(jnp.shape(leaves[0]) if leaves else (size,), bool)


class PopulationLearner(NamedTuple):
    """The population's learner state: the members' learner states stacked `[P, ...]`, and
    the hyper-parameters that vary over the population (`field -> [P]`; empty when none
    do). Both are checkpointed."""

    member: Any
    hparams: dict


def check_population_support(agent) -> None:
    """A one-line ConfigError unless `agent` (a member built for one seed) can be vmapped."""
    name = getattr(agent, "name", type(agent).__name__)
    if not agent.supports_population:
        raise ConfigError(f"--num-seeds > 1 is not supported by --agent {name}")
    if not callable(getattr(agent, "reset_params", None)):
        raise ConfigError(
            f"--num-seeds > 1 with --agent {name}: it has no "
            "reset_params(state, params, hparams) (engine/population.py)"
        )
    reason = agent.population_conflict() if hasattr(agent, "population_conflict") else None
    if reason:
        raise ConfigError(f"--num-seeds > 1 with --agent {name}: {reason}")
    if agent.mesh is not None:
        raise ConfigError(
            "--num-seeds > 1 shards the population over devices, not a member's data: "
            "a member cannot also be data parallel"
        )
    if not agent.env.has_xla:
        raise ConfigError(
            f"--num-seeds > 1 needs envpool's XLA env step; {agent.env.spec.env_id} is "
            f"stepped on the host ({agent.env.spec.backend})"
        )


def member_envs(pool, size: int) -> list[PoolSlice]:
    """The P member views of `pool` (P·N envs seeded `envs.run_env_seed(seed, N)`): member i
    is built on view i exactly as the single run with seed `seed + i` is built on its env."""
    return [PoolSlice(pool, i, size) for i in range(size)]


class Population:
    """P members of one agent in one program (module docstring). Implements the agent
    protocol (engine/protocol.py) with every state stacked `[P, ...]`; `init` and
    `reset_actor` take one key per member `[P, 2]`."""

    def __init__(
        self, members: list, mesh=None, hparams: dict | None = None, member_loop: bool | None = None
    ):
        if not members:
            raise ValueError("a population needs at least one member")
        for m in members:
            check_population_support(m)
        first = members[0]
        self.members, self.size = list(members), len(members)
        self.mesh = mesh if mesh is not None and mesh.size > 1 else None
        self.num_devices = self.mesh.size if self.mesh is not None else 1
        check_divisible("--num-seeds", self.size, self.num_devices)
        pool = getattr(first.env, "pool", None)
        for i, m in enumerate(members):
            env = m.env
            if not (isinstance(env, PoolSlice) and env.pool is pool and env.index == i):
                raise ValueError(
                    "member agents must be built on engine.population.member_envs(pool, P)"
                    f"[i] in order; member {i} has {env!r}"
                )
            if env.size != self.size:
                raise ValueError(f"members are slices of {env.size}, but there are {self.size}")
        self.pool, self.member_env_count = pool, first.env.spec.num_envs
        self.name = first.name
        self.tunable = dict(getattr(first, "tunable", {}))
        self.hparams = self._check_hparams(first.config, dict(hparams or {}))
        self.config, self.env = first.config, first.env
        self.metric_names = first.metric_names
        self.member_steps_per_iteration = first.steps_per_iteration
        self.steps_per_iteration = first.steps_per_iteration * self.size
        self.updates_per_program = getattr(first, "updates_per_program", 1)
        self.compile_s = 0.0
        self._sharding = NamedSharding(self.mesh, P(POP)) if self.mesh is not None else None
        self._device = jax.devices()[0]

        if member_loop is None:  # unbatched convolutions on XLA:CPU (module docstring)
            member_loop = first.convolves_on_cpu
        self.member_loop = bool(member_loop)
        self._over_members = over_members(self.member_loop)

        self._rollout = jax.jit(self._rollout_fn)
        # the members' acting params: one jitted call per iteration (op by op it was 6 ms of
        # host work for ACER, P = 8)
        self._policy_params = jax.jit(self._policy_params_fn)
        self._evolve = None
        self._chunk = None
        prog = dict(
            mesh=self.mesh, population=True, member_loop=self.member_loop, donate_argnums=(0, 1)
        )
        self._absorb = Program(self._member_absorb, name="absorb", **prog)
        self._updates = self._all_updates = None
        if first.replay is not None:
            # (host-driven) K updates, each kept where the member owes it, or all K run by
            # every member (for members in lock step)
            self._updates = Program(self._masked_updates, name="replay_updates", **prog)
            unmasked = functools.partial(self._masked_updates, masked=False)
            self._all_updates = Program(unmasked, name="replay_updates", **prog)
        self.lock_step = self._updates is not None and self._in_lock_step()

    # ------------------------------------------------------------------ hyper-parameters
    def _check_hparams(self, config, hparams: dict) -> dict:
        """`field -> [P] float32`, each field tunable by the agent and each member's config
        valid (a one-line ConfigError naming the field otherwise)."""
        out = {}
        for name, values in hparams.items():
            if name not in self.tunable:
                allowed = ", ".join(sorted(self.tunable)) or "none"
                raise ConfigError(
                    f"--vary {name}: --agent {self.name} cannot vary {name!r} (it can: {allowed})"
                )
            values = np.asarray(values, np.float32)
            if values.shape != (self.size,):
                raise ValueError(f"{name}: {values.shape} values for a population of {self.size}")
            for v in values:
                dataclasses.replace(config, **{name: float(v)})  # the config's own checks
            out[name] = values
        return out

    def _member_absorb(self, learner: PopulationLearner, replay, traj, axis_name=None):
        """One member's `absorb`, with its hyper-parameters (inside a vmapped program)."""
        inner, replay, metrics = self.members[0].absorb(
            learner.member, replay, traj, hparams=learner.hparams
        )
        return learner._replace(member=inner), replay, metrics

    # ------------------------------------------------------------------ programs
    def _merge(self, tree):
        """`[P, N, ...]` leaves -> `[P·N, ...]` (the pool's env order)."""
        return jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), tree)

    def _split(self, tree, size: int | None = None):
        """`[P·N, ...]` leaves -> `[P, N, ...]` (member i: envs i·N .. i·N + N − 1); `size`:
        the members there are (a device's share under the chunked mesh), else all P."""
        size = size or self.size
        return jax.tree.map(lambda x: x.reshape((size, -1, *x.shape[1:])), tree)

    def _split_env_state(self, state, size: int | None = None):
        """The pool's XLA carry as P member carries (the env says how)."""
        return self.pool.split_xla_state(state, size or self.size)

    def _join_env_state(self, state):
        return self.pool.join_xla_state(state)

    def _rollout_fn(self, params, actor):
        """T steps of every member's envs: the policy vmapped over members, the pool stepped
        once per step with every member's actions, the bookkeeping vmapped
        (agents.core.rollout)."""
        first, feedback = self.members[0], self.members[0].core_feedback
        size = actor.key.shape[0]  # P, or a device's share of them (`device_iteration`)
        discount = params.hparams.get("discount")
        if discount is None:
            discount = jnp.full((size,), first.config.discount, jnp.float32)

        def record(actor, out, ts, discount):
            return _record(discount, actor, out, ts, feedback)

        def body(actor, _):
            keys = jax.vmap(jax.random.split)(actor.key)
            key, sub = keys[:, 0], keys[:, 1]
            out = self._over_members(first.select_action)(
                params.member, actor.obs, actor.first, actor.core_state, sub
            )
            pool_state, ts = self.pool.xla_step(
                self._join_env_state(actor.env_state), self._merge(_env_action(out))
            )
            actor = actor._replace(env_state=self._split_env_state(pool_state, size), key=key)
            return jax.vmap(record)(actor, out, self._split(ts, size), discount)

        end, recorded = jax.lax.scan(body, actor, None, length=first.config.trace_len)
        recorded = jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), recorded)  # [P, T, ...]
        return end, _assemble(actor, end, recorded)

    def _masked_updates(self, learner, replay, todo, axis_name=None, masked: bool = True):
        """One member's `updates_per_program` replay updates, update k kept only where
        k < `todo` (else the learner and replay stay as they were; `masked=False`: all K
        kept). K > 1 (SAC/TD3 with MLPs) is a `lax.scan`, as the single run's
        `replay_updates`; K = 1 is the one update (a conv weight gradient in a rolled scan is
        slow on XLA:CPU, PERF-NOTES, which is why convolutional agents keep K = 1). Returns
        (learner, replay, (metrics, active)) with `[K]` leaves when K > 1."""
        hparams = learner.hparams

        def update(learner, replay, k):
            return self._member_update(learner, hparams, replay, k < todo, masked)

        if self.updates_per_program == 1:
            inner, replay, out = update(learner.member, replay, 0)
            return PopulationLearner(inner, hparams), replay, out

        def body(carry, k):
            inner, replay, out = update(*carry, k)
            return (inner, replay), out

        (inner, replay), out = jax.lax.scan(
            body, (learner.member, replay), jnp.arange(self.updates_per_program)
        )
        return PopulationLearner(inner, hparams), replay, out

    def _member_update(self, learner, hparams, replay, on, masked: bool = True):
        """One replay update of one member (with its `hparams`), kept only where `on` (else
        its learner, RNG key included, and replay stay as they were); `masked=False`: kept
        (for updates every member runs). Returns (learner, replay, (metrics, on)).

        Computed, then kept or dropped: not a `lax.cond`. Vmapped, a cond is a select anyway;
        under the member loop it would skip the work, but XLA:CPU runs a Nature CNN's
        weight gradient inside a cond branch about 6x slower than called directly (batch 32
        with Adam: 362 against 56 ms, measured here 2026-11-26), and on gymnax MinAtar the
        cond gained ACER's 5 vmapped members about 5% (2,097 against 1,990 aggregate env
        steps/s, medians of two alternated rounds), where skipping would have been 1.4x."""
        new_learner, new_replay, m = self.members[0].replay_update(learner, replay, None, hparams)
        if not masked:
            return new_learner, new_replay, (m, on)

        def keep(new, old):
            return old if new is old else jnp.where(on, new, old)  # untouched: no copy

        learner = jax.tree.map(keep, new_learner, learner)
        replay = jax.tree.map(keep, new_replay, replay)
        return learner, replay, (m, on)

    # ------------------------------------------------------------------ many iterations
    @property
    def host_driven(self) -> str | None:
        """Why each iteration needs the host (None: many run in one device program)."""
        if self.mesh is not None and not self.pool.pure_xla:
            return (
                "a population split over devices runs one iteration per program unless its "
                "env steps in plain JAX (gymnax)"
            )
        if self.member_loop:
            return "a convolution's weight gradient in a rolled loop is slow on XLA:CPU"
        return self.members[0].host_driven

    @property
    def max_chunk(self) -> int:
        return chunk_length(self.steps_per_iteration)

    def device_iteration(self, state: TrainState, todo, lock_step: bool | None = None):
        """One iteration of every member as a pure function (`todo`: `[P]` updates owed):
        the rollout, the members' `absorb`, then max(todo) updates, each kept only by the
        members that owe it (masked), or unmasked with `lock_step` (every member owes the
        same; default `self.lock_step`). Under a mesh it runs on each device with that
        device's members (`todo` and every leaf: its share)."""
        names, size = self.metric_names, todo.shape[0]
        actor, traj = self._rollout_fn(self._policy_params_fn(state.learner), state.actor)
        absorb = self._over_members(lambda m, h, r, t: self._member_absorb(
            PopulationLearner(m, h), r, t))  # fmt: skip
        learner, replay, metrics = absorb(
            state.learner.member, state.learner.hparams, state.replay, traj
        )
        sums, count = metric_sums([_all_active(m, size) for m in metrics], names, size)
        hparams = learner.hparams
        # Members in lock step run their updates unmasked. Keeping the old learner where a
        # member is done costs selects that XLA:CPU fuses with the optimiser's arithmetic,
        # each re-reading the (vmapped: transposed) weight gradient: DQN on MinAtar
        # (`dqn-minatar`), 1 member 1.21 against 0.62 ms an iteration, 5 members 2.63
        # against 2.30 (docs/results/population-lockstep).
        masked = not (self.lock_step if lock_step is None else lock_step)
        update = self._over_members(functools.partial(self._member_update, masked=masked))

        def body(k, carry):
            inner, replay, sums = carry
            inner, replay, (m, on) = update(inner, hparams, replay, k < todo)
            sums = {n: sums[n] + jnp.where(on, m[n], 0.0) for n in names}
            return inner, replay, sums

        if self._updates is not None:
            inner, replay, sums = jax.lax.fori_loop(
                0, jnp.max(todo), body, (learner.member, replay, sums)
            )
            learner, count = PopulationLearner(inner, hparams), count + todo
        stats = (traj.finished_return, traj.finished_length, traj.game_over)
        return TrainState(learner, replay, actor), ChunkOutput(sums, count, *stats)

    def train_chunk(self, state: TrainState, iteration: int, env_steps: int, count: int):
        if not 1 <= count <= self.max_chunk:
            raise ValueError(f"train_chunk runs 1 to {self.max_chunk} iterations, not {count}")
        steps = self.member_steps_per_iteration
        if self.host_driven is not None:
            return host_chunk(
                self.train_iteration, state, iteration, env_steps, steps, count,
                self.metric_names, self.size,
            )  # fmt: skip
        todos = [self._todo(iteration + k, env_steps + k * steps) for k in range(count)]
        if self.lock_step and any(np.ptp(t) > 0 for t in todos):  # the sample missed it
            self.lock_step, self._chunk = False, None
        if self._chunk is None:
            self._chunk = self._chunk_program()
        return self._chunk(self._place_all(state), todos)

    def _chunk_program(self) -> ChunkProgram:
        # A new callable per program: `lax.cond` caches a traced branch per callable, and the
        # bound `device_iteration` would bring back the trace of the other `lock_step`.
        iteration = functools.partial(self.device_iteration, lock_step=self.lock_step)
        return ChunkProgram(iteration, self.max_chunk, (self.size,), self.mesh)

    def _in_lock_step(self) -> bool:
        """Whether the members owe the same updates in every iteration, judged on the first
        64 iterations and every power of two to 2^30 (a schedule that draws per seed, as
        ACER's Poisson replay counts, differs at once). A chunk whose members differ after
        all switches the population to masked updates (`train_chunk`)."""
        steps = self.member_steps_per_iteration
        probes = sorted({*range(64), *(2**k for k in range(6, 31))})
        return all(len({m.updates_due(i, i * steps) for m in self.members}) == 1 for i in probes)

    # ------------------------------------------------------------------ evolution
    def _evolve_fn(self, learner: PopulationLearner, parent, resampled, elites, hparams, key,
                   std_max):  # fmt: skip
        """The device side of one generation (engine/evolution.py): every member takes its
        parent's whole learner state (weights, optimiser state, step count); members marked
        `resampled` then draw new weights from the elites' Gaussian and restart from them as
        their learner's `reset_params` says (fresh optimiser states, the Polyak average or
        target networks set to the new weights). A member that changed gets a new RNG stream
        (its parent's key folded with its index), so two copies of one parent do not sample
        alike. A learner's `episode_fields` (state of the member's own envs, whose episodes
        go on) stay the member's."""
        old, size = learner.member, self.size
        member = evolution.exploit(old, parent)
        member = member._replace(**{f: getattr(old, f) for f in episode_fields(old)})
        index = jnp.arange(size)
        changed = (parent != index) | resampled
        folded = jax.vmap(jax.random.fold_in)(member.key, index)
        member = member._replace(key=jnp.where(changed[:, None], folded, member.key))
        if elites.shape[0]:
            noise = evolution.normal_like(key, old.params)
            params = evolution.cem_resample(old.params, elites, resampled, noise, std_max)
            member = self._reset_resampled(member, params, hparams, resampled)
        return PopulationLearner(member, hparams)

    def _reset_resampled(self, member, params, hparams, resampled):
        """Members marked `resampled` restart from their new `params` (the agent's `reset_params`
        with each member's own hyper-parameters: an optimiser state may hold a learning
        rate); the others are kept."""
        fresh = jax.vmap(self.members[0].reset_params)(member, params, hparams)

        def pick(new, old):
            mask = resampled.reshape((-1,) + (1,) * (old.ndim - 1))
            return jnp.where(mask, new, old)

        return jax.tree.map(pick, fresh, member)

    def evolve(self, state: TrainState, plan, hparams: dict, key, std_max: float = 1.0):
        """Apply a generation's `plan` (engine.evolution.Plan) and the members' new
        hyper-parameters to `state`; replays and actors stay each member's own."""
        if self._evolve is None:
            self._evolve = jax.jit(self._evolve_fn, donate_argnums=(0,), static_argnums=(6,))
        missing = set(self.hparams) ^ set(hparams)
        if missing:
            raise ValueError(f"evolve: hyper-parameters {sorted(missing)} do not match")
        self.hparams = self._check_hparams(self.members[0].config, hparams)
        learner = self._evolve(
            state.learner,
            jnp.asarray(plan.parent, jnp.int32),
            jnp.asarray(plan.resampled, bool),
            jnp.asarray(plan.elites, jnp.int32),
            {k: jnp.asarray(v) for k, v in self.hparams.items()},
            key,
            float(std_max),
        )
        return state._replace(learner=self._place(learner))

    # ------------------------------------------------------------------ placement
    def _place(self, tree):
        """Split over the mesh by member (identity on one device)."""
        return tree if self.mesh is None else jax.device_put(tree, self._sharding)

    def _place_all(self, state: TrainState) -> TrainState:
        """The whole state split over the mesh by member, the actor's too (the chunked
        programs step each device's members there); a no-op for what is placed already."""
        return TrainState(*map(self._place, state))

    def _on_first_device(self, tree):
        return tree if self.mesh is None else jax.device_put(tree, self._device)

    # ------------------------------------------------------------------ protocol
    def init_learner(self, keys) -> PopulationLearner:
        """The members' learners, one after another in one jitted program (`lax.map`):
        2-3x faster than the op-by-op vmapped init (ACER P = 8: 1.6 s vs 4.1 s; Reactor P = 2:
        4.3 s vs 8.8 s, fresh processes). Not `jit(vmap)`: the orthogonal initialisers' QR
        then runs as one batched LAPACK call per layer, and two of those at once deadlocked
        XLA:CPU's 2-thread pool (each waiting on the other's sub-tasks; seen with the Nature
        CNN's 3136x512 layer, 2 of 3 fresh processes, jax 0.10.2)."""
        member = jax.jit(lambda k: jax.lax.map(self.members[0].init_learner, k))(keys)
        hparams = {k: jnp.asarray(v) for k, v in self.hparams.items()}
        return self._place(PopulationLearner(member, hparams))

    def _init_actor(self, keys):
        """Reset the pool once; member i gets its envs' first observations and its key."""
        pool_state, ts = self.pool.xla_reset()
        n = self.member_env_count
        return ActorState(
            env_state=self._split_env_state(pool_state),
            obs=self._split(jax.tree.map(jnp.asarray, ts.obs)),
            first=self._split(jnp.asarray(ts.first)),
            frame_reset=self._split(jnp.asarray(ts.frame_reset)),
            core_state=_stack([m.initial_core(n) for m in self.members]),
            episode_return=jnp.zeros((self.size, n), jnp.float32),
            episode_length=jnp.zeros((self.size, n), jnp.int32),
            key=jnp.asarray(keys),
        )

    def _init_replay(self):
        first = self.members[0]
        if first.replay is None:  # an on-policy agent keeps no replay: ()
            return self._place(_stack([m._init_replay() for m in self.members]))
        replay = jax.jit(jax.vmap(lambda _: first.replay.init()))(jnp.arange(self.size))
        return self._place(replay)

    def init(self, keys, *, jit: bool = True) -> TrainState:
        """`keys[i]`: member i's run key, `PRNGKey(seed + i)`, split as a single run splits
        its key (engine.programs.initial_state). The learners are always built by one
        compiled program (`init_learner`); `jit` is the protocol's and changes nothing."""
        split = jax.vmap(jax.random.split)(keys)
        learner_keys, actor_keys = split[:, 0], split[:, 1]
        return TrainState(
            self.init_learner(learner_keys), self._init_replay(), self._init_actor(actor_keys)
        )

    def reset_actor(self, state: TrainState, keys) -> TrainState:
        self.close()
        return state._replace(actor=self._init_actor(keys))

    def _policy_params_fn(self, learner: PopulationLearner) -> PopulationLearner:
        """The members' acting params, with the hyper-parameters the rollout reads (jitted
        as `_policy_params`)."""
        return PopulationLearner(
            jax.vmap(self.members[0].policy_params)(learner.member), learner.hparams
        )

    def compile(self, state: TrainState) -> float:
        t0 = time.perf_counter()
        if self.host_driven is None:
            self._chunk = self._chunk_program()
            self._chunk.compile(self._place_all(state))
            self.compile_s = time.perf_counter() - t0
            return self.compile_s
        params = self._on_first_device(self._policy_params(state.learner))
        traj = jax.eval_shape(self._rollout_fn, params, state.actor)[1]
        self._rollout = self._rollout.lower(params, state.actor).compile()
        if self.mesh is not None:
            traj = jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=self._sharding), traj
            )
        self._absorb.compile(state.learner, state.replay, traj)
        if self._updates is not None:
            todo = self._place(jnp.zeros((self.size,), jnp.int32))
            if self.lock_step:
                self._all_updates.compile(state.learner, state.replay, todo)
            if not self.lock_step or self.updates_per_program > 1:  # K > 1: a remainder < K
                self._updates.compile(state.learner, state.replay, todo)
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def updates_due(self, iteration: int, env_steps: int) -> np.ndarray:
        """Each member's own count (its `updates_due`), `[P]`."""
        return np.array([m.updates_due(iteration, env_steps) for m in self.members], np.int32)

    def _todo(self, iteration: int, env_steps: int) -> np.ndarray:
        """What each member's updates after `absorb` owe (none without a replay)."""
        if self._updates is None:
            return np.zeros((self.size,), np.int32)
        return self.updates_due(iteration, env_steps)

    def train_iteration(self, state: TrainState, iteration: int, env_steps: int):
        params = self._on_first_device(self._policy_params(state.learner))
        actor, traj = self._rollout(params, state.actor)
        learner, replay, metrics = self._absorb(state.learner, state.replay, self._place(traj))
        out = [_all_active(m, self.size) for m in metrics]
        if self._updates is not None:
            todo = self.updates_due(iteration, env_steps)
            while todo.max(initial=0) > 0:
                # unmasked where every member runs all of the program's K updates
                every = np.ptp(todo) == 0 and todo[0] >= self.updates_per_program
                updates = self._all_updates if self.lock_step and every else self._updates
                learner, replay, m = updates(learner, replay, self._place(jnp.asarray(todo)))
                out.append(m)
                todo = np.maximum(todo - self.updates_per_program, 0)
        result = IterationOutput(out, traj.finished_return, traj.finished_length, traj.game_over)
        return TrainState(learner, replay, actor), result

    def split_output(self, host: IterationOutput) -> list[IterationOutput]:
        """Member i's `IterationOutput` (host arrays), as its single run would return it:
        the metrics of the updates it ran, in order."""
        outs = []
        for i in range(self.size):
            metrics = []
            for m, active in host.metrics:
                on = np.asarray(active)[i]
                if on.ndim == 0:
                    if on:
                        metrics.append({k: v[i] for k, v in m.items()})
                else:
                    metrics += [{k: v[i][j] for k, v in m.items()} for j in np.flatnonzero(on)]
            outs.append(
                IterationOutput(
                    metrics,
                    host.finished_return[i],
                    host.finished_length[i],
                    host.game_over[i],
                )
            )
        return outs

    def member_keys(self, make, seed: int):
        """`[P, ...]`: member i's `make(seed + i)`."""
        return jnp.stack([make(seed + i) for i in range(self.size)])

    def split_chunk(self, host: ChunkOutput) -> list[ChunkOutput]:
        """Member i's `ChunkOutput` (host arrays; the member axis is the second)."""
        return [jax.tree.map(lambda x, i=i: x[:, i], host) for i in range(self.size)]

    def member_learner(self, learner: PopulationLearner, i: int):
        """Member i's learner state (on the first device)."""
        return self._on_first_device(_member(learner.member, i))

    def member_hparams(self, learner: PopulationLearner) -> dict[str, np.ndarray]:
        """The hyper-parameters that vary, `field -> [P]` (host arrays)."""
        return {k: np.asarray(v) for k, v in jax.device_get(learner.hparams).items()}

    @property
    def bytes_per_transition(self) -> float:
        return self.members[0].bytes_per_transition

    @property
    def programs(self) -> dict[str, Any]:
        progs = {"absorb": self._absorb}
        if self._chunk is not None:
            progs["chunk"] = self._chunk
        if self._updates is not None:
            progs["replay_updates"] = self._all_updates if self.lock_step else self._updates
        return progs

    def close(self) -> None:
        for m in self.members:
            m.close()
