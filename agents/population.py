"""Many learners in one program: P members of an agent behind one agent protocol.

`Population(members, mesh)` runs P independent learners, actors and replays as one set of
device programs: every state is the single run's state with a leading population axis
`[P, ...]`, and each member's pure functions (`select_action`, `absorb`, `replay_update`) are
`vmap`ped over it (`Program(..., population=True)`). With a mesh of several devices the
members are split over them (`jax.shard_map` along the mesh axis `POP`).

Member i *is* the single run with seed `seed + i`: `members[i]` is the agent a single run
with that seed builds, on its own env object made with that seed (envpool seeds env k of a
pool `seed + k`, so one pool of P·N envs could not give member i the envs of seed `seed + i`
when N > 1; P pools of N envs can). Member i starts from `PRNGKey(seed + i)` split as the
single run splits it, and asks its own `updates_due` (ACER's Poisson draw depends on the
seed). Members due fewer updates than the most in an iteration run the same program with
their update masked out (learner and priorities kept, the learner's RNG key not advanced),
so each member's learner sees exactly the sequence of updates its single run would.
Metrics come back with an `active` mask and are split per member on the host
(`split_output`).

What an agent needs to take part: it is a `RolloutAgent` whose iteration is the base one
(collect, `absorb`, then `updates_due` × `replay_update`), and whose pure functions do not
read its seed (randomness comes from the keys in its states). It says so with
`supports_population = True`. The rollout needs envpool's XLA step: the P pools are
stepped one after another inside one jitted `lax.scan` (the env step cannot be vmapped).

Costs of the masking: a member with fewer due updates still computes the others'; with
ACER's Poisson(4) draws and P = 8 the population runs about E[max of 8] ≈ 7 updates per
iteration where a member averages 4. Under a mesh the rollout runs on the first device
(the env steps are host calls), so acting gathers every member's policy params there once
per iteration.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from agents.config import ConfigError
from agents.parallel import POP, P, check_divisible
from agents.programs import Program
from agents.protocol import IterationOutput, TrainState
from agents.rollout import _assemble, _env_action, _record, initial_actor_state


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _member(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def check_population_support(agent) -> None:
    """A one-line ConfigError unless `agent` (a member built for one seed) can be vmapped."""
    name = getattr(agent, "name", type(agent).__name__)
    if not getattr(agent, "supports_population", False):
        raise ConfigError(f"--num-seeds > 1 is not supported by --agent {name}")
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


class Population:
    """P members of one agent in one program (module docstring). Implements the agent
    protocol (agents/protocol.py) with every state stacked `[P, ...]`; `init` and
    `reset_actor` take one key per member `[P, 2]`."""

    def __init__(self, members: list, mesh=None):
        if not members:
            raise ValueError("a population needs at least one member")
        for m in members:
            check_population_support(m)
        first = members[0]
        self.members, self.size = list(members), len(members)
        self.mesh = mesh if mesh is not None and mesh.size > 1 else None
        self.num_devices = self.mesh.size if self.mesh is not None else 1
        check_divisible("--num-seeds", self.size, self.num_devices)
        self.name = first.name
        self.config, self.env = first.config, first.env
        self.metric_names = first.metric_names
        self.member_steps_per_iteration = first.steps_per_iteration
        self.steps_per_iteration = first.steps_per_iteration * self.size
        self.updates_per_program = getattr(first, "updates_per_program", 1)
        self.core_feedback = first.core_feedback
        self.compile_s = 0.0
        self._sharding = NamedSharding(self.mesh, P(POP)) if self.mesh is not None else None
        self._device = jax.devices()[0]

        self._rollout = jax.jit(self._rollout_fn)
        prog = dict(mesh=self.mesh, population=True, donate_argnums=(0, 1))
        self._absorb = Program(first.absorb, name="absorb", **prog)
        self._updates = (
            Program(self._masked_updates, name="replay_updates", **prog)
            if hasattr(first, "replay_update")
            else None
        )

    # ------------------------------------------------------------------ programs
    def _rollout_fn(self, params, actor):
        """T steps of every member's envs: the policy vmapped over members, each member's
        pool stepped with its own actions, the bookkeeping vmapped (agents.rollout)."""
        first, envs = self.members[0], [m.env for m in self.members]
        discount, feedback = first.config.discount, first.core_feedback

        def record(actor, out, ts):
            return _record(discount, actor, out, ts, feedback)

        def body(actor, _):
            keys = jax.vmap(jax.random.split)(actor.key)
            key, sub = keys[:, 0], keys[:, 1]
            out = jax.vmap(first.select_action)(
                params, actor.obs, actor.first, actor.core_state, sub
            )
            action = _env_action(out)
            stepped = [
                env.xla_step(_member(actor.env_state, i), action[i]) for i, env in enumerate(envs)
            ]
            env_state, ts = _stack([s for s, _ in stepped]), _stack([t for _, t in stepped])
            actor = actor._replace(env_state=env_state, key=key)
            return jax.vmap(record)(actor, out, ts)

        end, recorded = jax.lax.scan(body, actor, None, length=first.config.trace_len)
        recorded = jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), recorded)  # [P, T, ...]
        return end, _assemble(actor, end, recorded)

    def _masked_updates(self, learner, replay, todo, axis_name=None):
        """One member's `updates_per_program` replay updates, update k kept only where
        k < `todo` (else the learner and replay stay as they were). Unrolled on purpose (a
        conv weight gradient in a rolled scan is slow on XLA:CPU, PERF-NOTES). Returns
        (learner, replay, (metrics, active)) with `[K]` leaves when K > 1."""
        first, metrics, active = self.members[0], [], []
        for k in range(self.updates_per_program):
            on = k < todo
            new_learner, new_replay, m = first.replay_update(learner, replay, None)

            def keep(new, old, on=on):
                return old if new is old else jnp.where(on, new, old)  # untouched: no copy

            learner = jax.tree.map(keep, new_learner, learner)
            replay = jax.tree.map(keep, new_replay, replay)
            metrics.append(m)
            active.append(on)
        if self.updates_per_program == 1:
            return learner, replay, (metrics[0], active[0])
        return learner, replay, (_stack(metrics), jnp.stack(active))

    # ------------------------------------------------------------------ placement
    def _place(self, tree):
        """Split over the mesh by member (identity on one device)."""
        return tree if self.mesh is None else jax.device_put(tree, self._sharding)

    def _on_first_device(self, tree):
        return tree if self.mesh is None else jax.device_put(tree, self._device)

    # ------------------------------------------------------------------ protocol
    def init_learner(self, keys):
        return self._place(jax.vmap(self.members[0].init_learner)(keys))

    def _init_actor(self, keys):
        actors = [
            initial_actor_state(m.env, m.initial_core(m.env.spec.num_envs), k)
            for m, k in zip(self.members, keys, strict=True)
        ]
        return _stack(actors)

    def _init_replay(self):
        first = self.members[0]
        if not hasattr(first, "replay_update"):
            return first._init_replay()
        replay = first.replay.init()
        return self._place(jax.tree.map(lambda x: jnp.stack([x] * self.size), replay))

    def init(self, keys) -> TrainState:
        """`keys[i]`: member i's run key, `PRNGKey(seed + i)`, split as a single run splits
        its key (agents.base.RolloutAgent.init)."""
        split = jax.vmap(jax.random.split)(keys)
        learner_keys, actor_keys = split[:, 0], split[:, 1]
        return TrainState(
            self.init_learner(learner_keys), self._init_replay(), self._init_actor(actor_keys)
        )

    def reset_actor(self, state: TrainState, keys) -> TrainState:
        self.close()
        return state._replace(actor=self._init_actor(keys))

    def _policy_params(self, learner):
        return jax.vmap(self.members[0].policy_params)(learner)

    def compile(self, state: TrainState) -> float:
        t0 = time.perf_counter()
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
            self._updates.compile(state.learner, state.replay, todo)
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def updates_due(self, iteration: int, env_steps: int) -> np.ndarray:
        """Each member's own count (its `updates_due`), `[P]`."""
        return np.array([m.updates_due(iteration, env_steps) for m in self.members], np.int32)

    def train_iteration(self, state: TrainState, iteration: int, env_steps: int):
        params = self._on_first_device(self._policy_params(state.learner))
        actor, traj = self._rollout(params, state.actor)
        learner, replay, metrics = self._absorb(state.learner, state.replay, self._place(traj))
        out = [(m, jnp.ones((self.size,), bool)) for m in metrics]
        if self._updates is not None:
            todo = self.updates_due(iteration, env_steps)
            while todo.max(initial=0) > 0:
                learner, replay, m = self._updates(learner, replay, self._place(jnp.asarray(todo)))
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

    def member_learner(self, learner, i: int):
        """Member i's learner state (on the first device)."""
        return self._on_first_device(_member(learner, i))

    def act(self, greedy: bool):
        return self.members[0].act(greedy)

    def initial_core(self, num_envs: int) -> Any:
        return self.members[0].initial_core(num_envs)

    def acting_params(self, learner):
        """Member 0's acting params (use `member_learner` for another member's)."""
        return self.members[0].acting_params(self.member_learner(learner, 0))

    @property
    def bytes_per_transition(self) -> float:
        return self.members[0].bytes_per_transition

    @property
    def programs(self) -> dict[str, Any]:
        progs = {"absorb": self._absorb}
        if self._updates is not None:
            progs["replay_updates"] = self._updates
        return progs

    def close(self) -> None:
        for m in self.members:
            m.close()
