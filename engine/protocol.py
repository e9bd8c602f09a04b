"""The agent protocol: everything the engine (`engine/`) knows about an agent.

An agent is a folder under `agents/` (config, actor, learner, agent) plus one line in
`agents/core/registry.py`. The training runner (`engine/runner.py`), `evaluate`, `plot` and
the benchmarks talk to it only through `Agent` below; none of them branches on an agent's
name. `PartsAgent` (engine/driver.py) implements it once over an agent's pure functions
(`AgentParts`), for every agent in `agents/`; an agent may also implement the protocol from
scratch (the toy agent in tests/experiments/test_agent_seam.py does).

Life cycle, as the runner drives it::

    agent = agent_class(spec)(config, env, seed=seed, mesh=mesh)  # validates, builds programs
    state = agent.init(key)                                      # learner, replay, actor
    agent.compile(state)                                         # ahead-of-time, timed
    while ...:                                                   # one host sync per chunk
        state, out = agent.train_chunk(state, iteration, env_steps, count)
        host = jax.device_get(out)                               # `count` iterations' output
    for member in agent.members:                                 # the final evaluation
        act = member.act(greedy)                                 # (the `Member` protocol)
    agent.close()
    acting = agent_class(spec).acting(config, eval_env)          # experiments.evaluate

`count` is chosen by the runner (`--iterations-per-sync`, or about one sync per second) and
never passes a checkpoint, a generation or the end of training.

Checkpoints hold `state.learner` (a NamedTuple of arrays with a `params` field: what `act`
takes). A resumed run rebuilds the agent, restores the learner into the structure of
`agent.init_learner(key)`, and starts new episodes with `agent.reset_actor`; replays are
refilled. With --exact-resume (envs whose state is arrays) checkpoints also hold
`state.replay` and `state.actor`, restored into the structure of a fresh `agent.init`, so
everything an agent keeps between iterations must live in `TrainState` (never on the agent
object) for a resumed run to be the same run.

`--num-seeds P` wraps P members of an agent in `engine.population.Population`, which
implements `Agent` over states with a leading population axis (its members are the agents,
each a `Member`, the acting half of the protocol); an agent opts in with
the class attribute `supports_population = True` (see that module for what it must satisfy).
The runner drives both through the members view below (`size`, `members`, `hparams`,
`member_keys`, `split_chunk`, `member_learner`, `member_hparams`): a single agent is a
population of one, and `OneMember` gives it that view.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax

Array = jax.Array

# act(params, obs, first, core, key) -> (action, core): one batched policy step for
# evaluation. obs `[B, *obs_shape]`, first `[B]` bool (episode starts: recurrent cores
# reset there), core: the recurrent state (`()` for feed-forward agents).
ActFn = Callable[[Any, Array, Array, Any, Array], tuple[Array, Any]]


class TrainState(NamedTuple):
    """Everything that changes while training. A checkpoint holds `learner`; with
    `--exact-resume` (engine/checkpoint.py) also `replay` and `actor`."""

    learner: Any  # NamedTuple with a `params` field (and whatever else the learner keeps)
    replay: Any  # the replay state (a pytree of device arrays)
    actor: Any  # the actor state (agents.core.rollout.ActorState for rollout-based agents)


class ChunkOutput(NamedTuple):
    """Device arrays of the iterations one `train_chunk` call ran, stacked on a leading
    iteration axis `[N]` of which the first `count` entries are filled: per iteration the sum
    of every metric over its learner updates (`metric_sums`: name -> `[N]`), how many updates
    it ran (`updates`, `[N]` int32) and its episode statistics (`[N, T, B]`, as in
    `IterationOutput`). A population's arrays have a member axis after the iteration axis."""

    metric_sums: dict
    updates: Array
    finished_return: Array
    finished_length: Array
    game_over: Array


class Acting(NamedTuple):
    """An agent's acting part alone (`Member.acting`): what evaluating saved params needs."""

    act: Callable[[bool], ActFn]  # greedy -> a jitted batched policy step (`Agent.act`)
    params: Callable[[Any], Any]  # a learner state -> what `act` takes (`acting_params`)
    initial_core: Callable[[int], Any]  # num_envs -> the cores of fresh episodes
    init_learner: Callable[[Array], Any]  # key -> a learner state: what a checkpoint restores into
    feedback: Callable | None = None  # `core_feedback` (None: none)


class IterationOutput(NamedTuple):
    """Device arrays of one training iteration; fetch them with one `jax.device_get`.

    `metrics` holds one dict per learner update run in the iteration, each with exactly the
    keys of the agent's `metric_names` (scalars), or one dict of `[K]` arrays for K updates
    run in one scanned program (the runner unstacks it). The episode statistics are time-major
    `[T, B]`: the return and length of a game that ended at that step (0 elsewhere), and
    whether one did."""

    metrics: list
    finished_return: Array
    finished_length: Array
    game_over: Array


@runtime_checkable
class Agent(Protocol):
    """What an agent provides. Attributes are read by the runner; see the module docstring.

    Attributes:
      config: the agent's config dataclass (saved to config.json).
      env: the training `envs.VecEnv`.
      mesh: the 1-D device mesh it is data parallel over, or None on one device.
      num_devices: devices it is data parallel over (1 without a mesh).
      steps_per_iteration: env steps one iteration adds (over all processes).
      metric_names: the keys of every metrics dict, in the order logged (see docs/command-line.md,
        "Metrics", for their meanings: shared names mean the same in every agent).
      bytes_per_transition: replay storage per transition (0 for agents without replay).
      max_chunk: the most iterations one `train_chunk` call may run.
      host_driven: None, or why the host drives each iteration (then `train_chunk` runs its
        `count` iterations one by one from the host, as one output).
      tunable: {config field: (low, high)} that `--vary` and evolution may set per member
        (class attribute; {} for none).
    """

    config: Any
    env: Any
    mesh: Any
    num_devices: int
    steps_per_iteration: int
    metric_names: tuple[str, ...]
    bytes_per_transition: float
    max_chunk: int
    host_driven: str | None
    tunable: dict[str, tuple[float, float]]

    def init(self, key: Array, *, jit: bool = False) -> TrainState:
        """A fresh learner, an empty replay and reset envs (`jit`: the learner built by one
        compiled program rather than op by op, the faster way in a fresh process)."""
        ...

    def init_learner(self, key: Array) -> Any:
        """A fresh learner state alone (its structure is what a checkpoint restores into)."""
        ...

    def reset_actor(self, state: TrainState, key: Array) -> TrainState:
        """New episodes for every env (after a resume without `--exact-resume`, whose
        checkpoints hold no env states)."""
        ...

    def compile(self, state: TrainState) -> float:
        """Compile every program ahead of time for `state`; return the seconds it took."""
        ...

    def train_chunk(
        self, state: TrainState, iteration: int, env_steps: int, count: int
    ) -> tuple[TrainState, ChunkOutput]:
        """Act and learn for `count` (1 <= count <= max_chunk) iterations, one after another
        in one device program where the agent can (engine/driver.py): no host sync, the
        outputs stay on the device. Where the host drives each iteration (`host_driven`) they
        run one by one from the host, each synced, and the outputs are on the host.

        `iteration` and `env_steps` are the counts before the first of them; any schedule
        that depends on them must be a pure function of them, so that a resumed run repeats
        it whatever the counts per call were."""
        ...

    def close(self) -> None:
        """Stop background work (threads). Idempotent."""
        ...

    # The members view (a single agent: `OneMember`; a population: P members).
    size: int  # members
    members: list[Member]  # the member agents, each acting, evaluated and logged as a run
    hparams: dict  # field -> [size] values that vary between members ({} for none)

    def member_keys(self, make: Callable[[int], Array], seed: int) -> Array:
        """What `init` and `reset_actor` take: `make(seed)`, or `[size]` of
        `make(seed + i)`, member i's."""
        ...

    def split_chunk(self, host: ChunkOutput) -> list[ChunkOutput]:
        """A fetched `ChunkOutput`, one per member."""
        ...

    def member_learner(self, learner: Any, i: int) -> Any:
        """Member i's learner state (what its `acting_params` takes)."""
        ...

    def member_hparams(self, learner: Any) -> dict:
        """The values that vary, `field -> [size]` host arrays, as `learner` holds them."""
        ...


@runtime_checkable
class Member(Agent, Protocol):
    """An agent that acts: what `Agent.members` holds (a single agent is its own member; a
    population's members are its P agents). The runner evaluates each member with these;
    `engine.driver.agent_class(spec)` is one (its `acting` and `supports_population`).

    Attributes:
      supports_population: whether `--num-seeds P` may vmap P members of it (class attribute;
        engine/population.py says what a member must provide).
    """

    supports_population: bool

    @classmethod
    def acting(cls, config: Any, env: Any, *, seed: int = 0) -> Acting:
        """The acting part alone, built from a (saved) `config` for `env`, an evaluation env
        with any env count: what `experiments.evaluate` builds (no replay, no rollout or
        update program)."""
        ...

    def act(self, greedy: bool) -> ActFn:
        """A jitted batched policy step for evaluation (argmax when `greedy`)."""
        ...

    # `core_feedback(core, action, reward) -> core`, or None: after every env step, the
    # acting loops (rollouts, evaluation) pass the recurrent state the action taken and the
    # reward received, for cores that take them as inputs (R2D2).
    core_feedback: Callable | None

    def initial_core(self, num_envs: int) -> Any:
        """The recurrent state of `num_envs` fresh episodes (`()` for feed-forward)."""
        ...

    def acting_params(self, learner: Any) -> Any:
        """The parameters `act` takes, on this process's first device."""
        ...


class OneMember:
    """The members view (`Agent`) of a single agent: a population of one, itself."""

    size: int = 1
    hparams: dict = MappingProxyType({})  # read-only: nothing varies

    @property
    def members(self) -> list:
        return [self]

    def member_keys(self, make, seed: int):
        return make(seed)

    def split_chunk(self, host: ChunkOutput) -> list[ChunkOutput]:
        return [host]

    def member_learner(self, learner, i: int):
        return learner

    def member_hparams(self, learner) -> dict:
        return {}
