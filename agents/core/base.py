"""The agent protocol (agents/core/protocol.py) for agents that act in rollouts of T steps, written
once. An agent built on it writes its config, network, learner and a few hooks; the wiring
(device programs for one device or a mesh, ahead-of-time compilation, the actor, resets,
evaluation policy, and for replay agents the replay and its step spec) is here.

`RolloutAgent`: on-policy agents (A2C, PPO). One training iteration::

    actor, traj = collect(...)                                  # T steps of every env
    learner, replay, metrics = absorb(learner, replay, traj)   # learn from the fresh rollout

`AgentBase(RolloutAgent)`: agents with a trace replay (ACER, Reactor, DQN). `absorb` stores
the rollout (and may learn from it first), then::

    repeat updates_due(iteration, env_steps) times:
        learner, replay, m = replay_update(learner, replay)    # sample, learn, set priorities

An agent that runs many small updates per iteration (SAC/TD3 at an update-to-data ratio of
1 or more) sets `updates_per_program = K`: then K updates run as ONE device program, a
`lax.scan` of `replay_update` (one dispatch instead of K; its metrics come back stacked `[K]`,
which the runner unstacks), and only the remainder of `updates_due` modulo K runs one by one.
Keep K = 1 for convolutional networks on CPU: a convolution's weight gradient inside a
rolled scan is 13-100x slower on XLA:CPU (PERF-NOTES).

`absorb` and `replay_update` are pure and run as `Program`s (jit, or jit(shard_map) with
gradients averaged over the mesh), with the learner and replay states donated.

Many iterations per host sync (`train_chunk`): where nothing in an iteration needs the host
(`host_driven` is None: envpool's XLA step, one device, no convolution on XLA:CPU, no
host-side work of the agent's own), the whole iteration is one pure function
(`device_iteration`: the XLA rollout, `absorb`, then `updates_due` replay updates in a
`lax.fori_loop`) and a `ChunkProgram` runs up to `max_chunk` of them in one compiled
program; the host computes each iteration's `updates_due` ahead, so the schedule is exactly
the one-iteration path's. Elsewhere `train_chunk` runs its `count` `train_iteration`s one
after another from the host (`host_chunk`), stacked into one output as a chunk's. A second
agent of the same class, config, seed and env task in one process gets the first one's
compiled chunk program where the env's step is a pure function of those values
(`shared_chunk_key`; gymnax envs): a resume, an evaluation's rebuild or the next test does
not trace or compile it again.

The config must have `num_envs`, `trace_len` and `discount`; with a replay also
`batch_size`, `buffer_size` and `microbatch_traces`. The learner must have
`init(key, sample_obs) -> state` (a NamedTuple with `params` and `key`); a replay agent's
also `update(state, TraceBatch, axis_name) -> (state, metrics, priorities [B])`.
"""

from __future__ import annotations

import collections
import time
from typing import Any, ClassVar

import jax
import jax.numpy as jnp

from agents.core.actors import categorical_actor
from agents.core.learning import replay_step
from agents.core.parallel import DATA, check_divisible, local_replica
from agents.core.programs import (
    ChunkProgram,
    Program,
    RolloutProgram,
    chunk_length,
    convolves_on_cpu,
    data_checks_enabled,
    host_chunk,
    host_reason,
    initial_state,
    metric_sums,
    replay_program_specs,
    rollout_program_specs,
)
from agents.core.protocol import (
    Acting,
    ChunkOutput,
    IterationOutput,
    OneMember,
    TrainState,
)
from agents.core.rollout import initial_actor_state, make_xla_rollout, trace_step_spec
from envs import obs_zeros
from replay import make_trace_replay

# What a population may vary in the actor-critic agents' configs (ACER, Reactor): fields
# read only as numbers in their learners, and the discount the rollout writes.
ACTOR_CRITIC_TUNABLE: dict[str, tuple[float, float]] = {
    "lr": (1e-7, 1.0),
    "entropy_weight": (0.0, 1.0),
    "discount": (0.5, 1.0),
}


# Chunk programs shared by equal agents (`RolloutAgent._chunk_program`), by `shared_chunk_key`:
# the most recently used ones (each holds a compiled executable and its first agent).
_SHARED_CHUNKS: collections.OrderedDict = collections.OrderedDict()
SHARED_CHUNKS_KEPT = 16


def shared_chunk_key(agent, state: TrainState):
    """What makes two agents' chunk programs the same program: the agent's class, config,
    seed and chunk length, its env's `program_key`, and the shapes, dtypes and structure of
    the state, and the JAX settings that change a trace; None where it may not be shared:
    an env without a `program_key` (envpool's XLA step calls out to its own pool), a
    data-parallel agent, or programs that check their data (`--debug`). Like `jax.jit`'s own
    cache, it cannot see a module-level function patched after the first trace."""
    env_key = getattr(agent.env, "program_key", None)
    if env_key is None or agent.mesh is not None or data_checks_enabled():
        return None
    leaves, tree = jax.tree.flatten(state)
    types = tuple(jax.typeof(x) for x in leaves)  # shape, dtype, weak type
    # the settings that change what a trace gives (jax.jit keys its own cache on them too)
    flags = tuple(
        getattr(jax.config, name)
        for name in ("jax_enable_x64", "jax_debug_nans", "jax_debug_infs",
                     "jax_numpy_rank_promotion", "jax_default_matmul_precision")
    )  # fmt: skip
    return (
        type(agent), agent.config, agent.seed, agent.max_chunk, env_key, tree, types, flags,
        jax.default_backend(),
    )  # fmt: skip


class RolloutAgent(OneMember):
    """See the module docstring. Subclasses set `name` and `metric_names` and implement
    `make_network`, `make_learner`, `absorb` and either `policy_logits` (categorical
    policies) or `make_actor`; they may override `initial_core`, `policy_params`, `collect`
    and `after_learning`."""

    name: ClassVar[str] = "agent"
    metric_names: ClassVar[tuple[str, ...]] = ()
    discrete_only: ClassVar[bool] = True
    # `core_feedback(core, action, reward) -> core`: what a recurrent core learns of the step
    # just taken (agents/core/protocol.py); None: nothing.
    core_feedback = None
    # Whether `--num-seeds P` may vmap P members of this agent (agents/core/population.py): True
    # only for an agent whose iteration is the base one (collect, absorb, updates_due x
    # replay_update) and whose pure functions do not read `self.seed`, once a test shows its
    # members equal single runs.
    supports_population: ClassVar[bool] = False
    # The scalar config fields a population may vary per member (`--vary`, `--evolve`), with
    # the range each must stay in (agents/core/evolution.py). Only fields the learner and
    # `absorb` read as numbers inside their traced functions (never in Python control flow
    # or shapes), and `discount`, which the population's rollout writes into the traces.
    tunable: ClassVar[dict[str, tuple[float, float]]] = {}

    # benchmarks.bench_throughput reads `self.wait_s`: the seconds the learner waited on
    # other threads, by what it waited for (set in __init__). Its default `--compare` and the
    # cost model are the benchmark's (benchmarks.costs: `COMPARE`, `COST_MODELS`).

    def population_conflict(self) -> str | None:
        """Why this configured agent cannot be a population member (None: it can)."""
        return None

    @classmethod
    def acting(cls, config, env, *, seed: int = 0) -> Acting:
        """The acting part alone (`Member.acting`): the network, the actor and the learner's
        structure, built as `__init__` builds them (`_build_acting`), for `env` with any
        env count; no rollout, replay or update program, and no check of the training sizes
        (they were checked when the run trained)."""
        agent = cls.__new__(cls)
        agent._build_acting(config, env, seed, None)
        return Acting(
            agent.act, agent.acting_params, agent.initial_core, agent.init_learner,
            agent.core_feedback,
        )  # fmt: skip

    def __init__(self, config, env, *, seed: int = 0, mesh=None):
        """`mesh`: a 1-D mesh from `agents.core.parallel.make_mesh` for data parallelism; None or
        a single device keeps the plain jitted path."""
        procs = jax.process_count()
        self._build_acting(config, env, seed, mesh)
        if config.num_envs != env.spec.num_envs * procs:
            raise ValueError(
                f"config.num_envs={config.num_envs} but the env has {env.spec.num_envs} envs "
                f"x {procs} process(es)"
            )
        check_divisible("--num-envs", config.num_envs, self.num_devices)
        self.steps_per_iteration = config.trace_len * config.num_envs
        self.rollout = RolloutProgram(
            env, self.select_action, config.trace_len, config.discount, self.mesh,
            feedback=self.core_feedback,
        )  # fmt: skip
        self.replay = None
        self.compile_s = 0.0
        self.wait_s: dict[str, float] = {}
        self._chunk = None  # the ChunkProgram, built by `compile` where `host_driven` is None

    def _build_acting(self, config, env, seed: int, mesh) -> None:
        """What acting needs: the config, env and mesh, the network, the learner (its state's
        structure) and the actor. Subclasses that add to it extend it, calling this."""
        spec = env.spec
        if self.discrete_only and not spec.discrete:
            raise ValueError(
                f"{self.name} needs discrete actions; {spec.env_id} has a continuous action "
                f"space of shape {spec.action_shape}"
            )
        self.mesh = mesh if mesh is not None and mesh.size > 1 else None
        self.num_devices = self.mesh.size if self.mesh is not None else 1
        self.config, self.env, self.seed = config, env, seed
        self.network = self.make_network(spec)
        self.learner = self.make_learner(self.network)
        self.select_action, self.act = self.make_actor()

    def _build_absorb(self, replay_specs=()):
        self._absorb = Program(
            self.absorb, mesh=self.mesh, donate_argnums=(0, 1),
            **(rollout_program_specs(replay_specs) if self.mesh is not None else {}),
        )  # fmt: skip

    # ------------------------------------------------------------------ agent hooks
    def make_network(self, env_spec):
        raise NotImplementedError

    def make_learner(self, network):
        raise NotImplementedError

    def make_actor(self):
        """`(select_action, act)` (agents/core/actors.py); by default the categorical actor of
        `policy_logits`."""
        return categorical_actor(self.policy_logits)

    def policy_logits(self, params, obs, first, core):
        """`(logits [B, A], core)` of the policy at one batched step."""
        raise NotImplementedError

    def policy_params(self, learner):
        """What the actor takes as `params` from a learner state: `learner.params` by
        default; e.g. (params, observation statistics) for an agent that normalises."""
        return learner.params

    def initial_core(self, num_envs: int):
        return ()

    def absorb(self, learner, replay, traj, axis_name=None, hparams=None):
        """Take in a fresh rollout (learn from it, store it). Pure; returns (learner, replay,
        metrics list). `hparams`: a population member's hyper-parameters (`field ->` traced
        scalar, agents/core/population.py), passed to its learner; None: the config's."""
        raise NotImplementedError

    def collect(self, state: TrainState):
        """One rollout with the current policy: (actor, rollout, rollout placed on the mesh)."""
        return self.rollout(self.policy_params(state.learner), state.actor)

    def after_learning(self, learner, num_updates: int) -> None:
        """Called on the host after an iteration's updates were dispatched."""

    # ------------------------------------------------------------------ protocol
    def sample_obs(self, num_envs: int):
        """Zeros shaped like `num_envs` observations (an array, or a pytree for dict
        observations), from the env's `obs_spec`."""
        return obs_zeros(self.env.spec.obs_spec, (num_envs,), jnp)

    @property
    def convolves_on_cpu(self) -> bool:
        """`agents.core.programs.convolves_on_cpu` of this agent's env and config."""
        return convolves_on_cpu(self.env.spec, self.config)

    def init_learner(self, key):
        return self.learner.init(key, self.sample_obs(self.env.spec.num_envs))

    def reset_params(self, state, params, hparams: dict | None = None):
        """The learner `state` restarted from new weights `params` (a population's CEM)."""
        return self.learner.reset_params(state, params, hparams)

    def _init_actor(self, key):
        return initial_actor_state(self.env, self.initial_core(self.env.spec.num_envs), key)

    def _init_replay(self):
        return ()

    def init(self, key, *, jit: bool = False) -> TrainState:
        """`agents.core.programs.initial_state` of this agent's pieces."""
        return initial_state(
            key, self.init_learner, self._init_actor, self._init_replay, self.mesh, jit=jit
        )

    def reset_actor(self, state: TrainState, key) -> TrainState:
        self.close()
        return state._replace(actor=self._init_actor(key))

    def _compile_learning(self, state: TrainState, placed) -> None:
        self._absorb.compile(state.learner, state.replay, placed)

    @property
    def host_driven(self) -> str | None:
        """Why each iteration needs the host (None: many run in one device program)."""
        return host_reason(self.env, self.mesh, self.config)

    @property
    def max_chunk(self) -> int:
        """The most iterations one `train_chunk` call runs."""
        return chunk_length(self.steps_per_iteration)

    def _chunk_program(self, state: TrainState, compiled: bool) -> ChunkProgram:
        """The chunk program for `state`, compiled ahead of time if `compiled`. An agent of
        the same class, config, seed and env task as one built before in this process (a
        resume, an evaluation's rebuild, the next test) gets that agent's program, traced and
        compiled once: the iteration is a pure function of those values and of the state
        (`shared_chunk_key`). Not shared: an env with no `program_key` (envpool's XLA step
        calls out to its own pool) and a data-parallel agent."""
        key = shared_chunk_key(self, state)
        program = _SHARED_CHUNKS.get(key) if key is not None else None
        if program is None:
            program = ChunkProgram(self.device_iteration, self.max_chunk)
        if compiled and program._compiled is None:
            program.compile(state)
        if key is not None:
            _SHARED_CHUNKS[key] = program
            _SHARED_CHUNKS.move_to_end(key)
            while len(_SHARED_CHUNKS) > SHARED_CHUNKS_KEPT:
                _SHARED_CHUNKS.popitem(last=False)
        return program

    def compile(self, state: TrainState) -> float:
        """Compile the programs `train_chunk` runs (the chunk program, or the one-iteration
        programs where the host drives each iteration)."""
        t0 = time.perf_counter()
        if self.host_driven is None:
            self._chunk = self._chunk_program(state, compiled=True)
        else:
            params = self.policy_params(state.learner)
            self.rollout.compile(params, state.actor)
            self._compile_learning(state, self.rollout.abstract(params, state.actor))
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def updates_due(self, iteration: int, env_steps: int) -> int:
        """Learner updates after `absorb` in this iteration (none by default): a pure
        function of the counts before it, so that a resumed run and every process agree."""
        return 0

    def device_learn(self, learner, replay, todo):
        """The learning after `absorb`, traced: `todo` updates. (learner, replay, metric
        sums); none by default."""
        return learner, replay, dict.fromkeys(self.metric_names, jnp.float32(0.0))

    def device_iteration(self, state: TrainState, todo):
        """`train_iteration` as one pure function (XLA rollout, `absorb`, `todo` updates),
        for the chunk program; its output is a `ChunkOutput` of one iteration, unstacked."""
        rollout = make_xla_rollout(
            self.env, self.select_action, self.config.trace_len, self.config.discount,
            self.core_feedback,
        )  # fmt: skip
        actor, traj = rollout(self.policy_params(state.learner), state.actor)
        learner, replay, metrics = self.absorb(state.learner, state.replay, traj)
        sums, count = metric_sums(metrics, self.metric_names)
        learner, replay, more = self.device_learn(learner, replay, todo)
        sums = {k: sums[k] + more[k] for k in self.metric_names}
        out = ChunkOutput(
            sums, count + todo, traj.finished_return, traj.finished_length, traj.game_over
        )
        return TrainState(learner, replay, actor), out

    def train_chunk(self, state: TrainState, iteration: int, env_steps: int, count: int):
        if not 1 <= count <= self.max_chunk:
            raise ValueError(f"train_chunk runs 1 to {self.max_chunk} iterations, not {count}")
        steps = self.steps_per_iteration
        if self.host_driven is not None:
            return host_chunk(
                self.train_iteration, state, iteration, env_steps, steps, count,
                self.metric_names,
            )  # fmt: skip
        if self._chunk is None:
            self._chunk = self._chunk_program(state, compiled=False)
        todos = [self.updates_due(iteration + k, env_steps + k * steps) for k in range(count)]
        return self._chunk(state, todos)

    def learn(self, learner, replay, iteration: int, env_steps: int):
        """The learning after `absorb` in one iteration: (learner, replay, metrics list)."""
        return learner, replay, []

    def train_iteration(self, state: TrainState, iteration: int, env_steps: int):
        actor, traj, placed = self.collect(state)
        learner, replay, metrics = self._absorb(state.learner, state.replay, placed)
        learner, replay, more = self.learn(learner, replay, iteration, env_steps)
        out = IterationOutput(
            list(metrics) + more, traj.finished_return, traj.finished_length, traj.game_over
        )
        return TrainState(learner, replay, actor), out

    def acting_params(self, learner):
        """The actor's params (`policy_params`): this process's replica when data parallel."""
        params = self.policy_params(learner)
        return params if self.mesh is None else local_replica(params)

    @property
    def programs(self) -> dict[str, Any]:
        """The device programs, by name (their `traces` count compilations)."""
        if self._chunk is not None:
            return {"chunk": self._chunk}
        return {"rollout": self.rollout, "absorb": self._absorb}

    @property
    def bytes_per_transition(self) -> float:
        return 0.0

    def close(self) -> None:
        """Stop background work (none by default)."""


class AgentBase(RolloutAgent):
    """A `RolloutAgent` with a trace replay (module docstring). Subclasses also implement
    `updates_due`; they may override `make_replay`, and `absorb` (by default it stores the
    rollout), and set `updates_per_program` (module docstring) before calling `__init__`."""

    updates_per_program: int = 1

    def __init__(self, config, env, *, seed: int = 0, mesh=None, replay_memory_limit=None):
        super().__init__(config, env, seed=seed, mesh=mesh)
        check_divisible("--batch-size", config.batch_size, self.num_devices)
        if config.microbatch_traces:
            check_divisible(
                "--batch-size per device", config.batch_size // self.num_devices,
                config.microbatch_traces, "--microbatch-traces",
            )  # fmt: skip
        spec, n = self.env.spec, self.env.spec.num_envs
        learner = jax.eval_shape(self.init_learner, jax.random.PRNGKey(0))
        first = jax.ShapeDtypeStruct((n,), jnp.bool_)
        core = self.initial_core(n)
        obs = jax.eval_shape(lambda: self.sample_obs(n))
        out = jax.eval_shape(
            self.select_action, jax.eval_shape(self.policy_params, learner), obs, first, core,
            jax.random.PRNGKey(0),
        )  # fmt: skip
        self.replay = self.make_replay(
            make_trace_replay(
                spec,
                trace_step_spec(out),
                trace_len=config.trace_len,
                buffer_size=config.buffer_size,
                shards=self.num_devices,
                extras_spec=jax.tree.map(
                    lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), core
                ),
                memory_limit=replay_memory_limit,
            )
        )
        specs = self.replay.partition_specs(DATA) if self.mesh is not None else None
        self._build_absorb(specs)
        self._replay_update = Program(
            self.replay_update, mesh=self.mesh, donate_argnums=(0, 1),
            **(replay_program_specs(specs) if self.mesh is not None else {}),
        )  # fmt: skip
        self._replay_updates = None
        if self.updates_per_program > 1:
            self._replay_updates = Program(
                self.replay_updates, mesh=self.mesh, donate_argnums=(0, 1),
                **(replay_program_specs(specs) if self.mesh is not None else {}),
            )  # fmt: skip
        if self.mesh is not None:
            self._replay_init = jax.jit(
                jax.shard_map(self.replay.init, mesh=self.mesh, in_specs=(), out_specs=specs)
            )

    # ------------------------------------------------------------------ agent hooks
    def updates_due(self, iteration: int, env_steps: int) -> int:
        """Replay updates to run in this iteration: a pure function of its arguments (the
        counts before it), so that a resumed run and every process agree."""
        raise NotImplementedError

    def device_learn(self, learner, replay, todo):
        """`todo` replay updates in a `lax.fori_loop`, summing their metrics."""

        def body(_, carry):
            learner, replay, sums = carry
            learner, replay, m = self.replay_update(learner, replay)
            return learner, replay, {k: sums[k] + m[k] for k in self.metric_names}

        sums = dict.fromkeys(self.metric_names, jnp.float32(0.0))
        return jax.lax.fori_loop(0, todo, body, (learner, replay, sums))

    def make_replay(self, trace_replay):
        """Wrap the uniform trace replay (e.g. in `replay.PrioritizedTraceReplay`)."""
        return trace_replay

    def absorb(self, learner, replay, traj, axis_name=None, hparams=None):
        """Take in a fresh rollout: store its traces. Pure; returns (learner, replay,
        metrics list)."""
        return learner, self.replay.add(replay, traj.obs, traj.steps, traj.core_state), []

    def replay_update(self, learner, replay, axis_name=None, hparams=None):
        """Sample a batch of traces, take one learner step (with a member's `hparams`, or
        the config's), store the new priorities."""
        b = self.config.batch_size // self.num_devices

        def update(learner, batch):
            return self.learner.update(learner, batch, axis_name, hparams)

        return replay_step(self.replay, replay, learner, b, update, axis_name)

    def replay_updates(self, learner, replay, axis_name=None):
        """`updates_per_program` replay updates in one `lax.scan`; metrics stacked `[K]`."""

        def body(carry, _):
            learner, replay, metrics = self.replay_update(*carry, axis_name)
            return (learner, replay), metrics

        (learner, replay), metrics = jax.lax.scan(
            body, (learner, replay), None, length=self.updates_per_program
        )
        return learner, replay, metrics

    # ------------------------------------------------------------------ protocol
    def _init_replay(self):
        return self.replay.init() if self.mesh is None else self._replay_init()

    def _compile_learning(self, state: TrainState, placed) -> None:
        super()._compile_learning(state, placed)
        self._replay_update.compile(state.learner, state.replay)
        if self._replay_updates is not None:
            self._replay_updates.compile(state.learner, state.replay)

    def learn(self, learner, replay, iteration: int, env_steps: int):
        """`updates_due` updates: whole scans of `updates_per_program`, then single ones.
        Scanned metrics stay stacked `[K]` (one entry of the list stands for K updates)."""
        metrics = []
        n = self.updates_due(iteration, env_steps)
        k = self.updates_per_program
        for _ in range(n // k if k > 1 else 0):
            learner, replay, m = self._replay_updates(learner, replay)
            metrics.append(m)
        for _ in range(n % k if k > 1 else n):
            learner, replay, m = self._replay_update(learner, replay)
            metrics.append(m)
        self.after_learning(learner, n)
        return learner, replay, metrics

    @property
    def programs(self) -> dict[str, Any]:
        progs = {**super().programs, "replay_update": self._replay_update}
        if self._chunk is not None:
            return {"chunk": self._chunk}
        if self._replay_updates is not None:
            progs["replay_updates"] = self._replay_updates
        return progs

    @property
    def bytes_per_transition(self) -> float:
        return self.replay.bytes_per_transition
