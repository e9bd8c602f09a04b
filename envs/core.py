"""Backend-independent types and the step post-processing shared by every backend.

Both backends (envpool, gymnasium) reduce one raw env step to the same handful of arrays and
hand them to `finalize_step`, which is written once against an array namespace (`numpy` for
the host loop, `jax.numpy` inside `jit`). That is what makes the host and XLA paths give
bit-identical `TimeStep`s, and the two backends identical semantics.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

import jax
import numpy as np

Array = jax.Array | np.ndarray


class TimeStep(NamedTuple):
    """One batched env transition result, rows ordered by env index (row i is env i).

    Fields (all with leading batch dim B):
      obs: [B, *obs_shape]; uint8 [B, 4, 84, 84] for Atari, float32 for vector envs. For a
        pytree observation space (`EnvSpec.obs_spec` a dict or tuple, e.g. MiniGrid's
        {"direction", "image", "mission"}) a pytree of that structure, every leaf [B, ...].
      reward: [B] float32 training reward, `clip(raw_reward, -1, 1)` when reward clipping is on.
      raw_reward: [B] float32 unclipped env reward (Atari: envpool's `info["reward"]`), for
        logging returns.
      terminated: [B] bool, MDP termination. Includes life loss when episodic life is on.
      truncated: [B] bool, time-limit truncation. Never True together with `terminated`.
      first: [B] bool, `obs` starts a (life-)episode: True after `reset()` and on the step
        after any `terminated | truncated`. That step is the fake auto-reset transition: its
        action was ignored, its reward is 0 and both flags are False.
      game_over: [B] bool, a full game ended at this step (a real termination, including the
        loss of the last life, or a truncation). Use it to end return tracking.
      frame_reset: [B] bool, the frame stack was refilled at this obs (a game reset). Measured
        on envpool 1.2.5 Atari: at a game reset all 4 frames are copies of the first frame;
        a life-loss "reset" (episodic life) does NOT refill the stack, it pushes a single new
        frame like an ordinary step (and keeps `elapsed_step` and `lives`). So
        `frame_reset` is True after `reset()` and on the step after `game_over`, but not on
        the step after a life loss; there `first` is True and `frame_reset` is False. For
        non-Atari envs (no frame stack) it equals `first`.
    """

    obs: Array
    reward: Array
    raw_reward: Array
    terminated: Array
    truncated: Array
    first: Array
    game_over: Array
    frame_reset: Array


class XlaEnvState(NamedTuple):
    """Carry of the envpool XLA step (a pytree of jnp arrays).

    `handle` is envpool's opaque handle. The env itself lives on the host, so this state is
    not a value that can be replayed: thread it linearly (each `xla_step` advances the envs).
    `prev_done` is the previous step's `terminated | truncated` (the next obs is `first`),
    `prev_game_over` the previous step's `game_over` (the next obs refills the frame stack).
    """

    handle: Array
    prev_done: Array
    prev_game_over: Array


@dataclass(frozen=True)
class ArraySpec:
    """One observation array of one env (no batch axis): shape and dtype, like
    `jax.ShapeDtypeStruct`, plus what an encoder needs to know about integer values.

    Attributes:
      shape, dtype: of one env's array.
      num_values: integer leaves only: the values are categories in `[0, num_values)`
        (a gymnasium `Discrete`, word ids); None for numbers (images, vectors).
      tokens: the array is a sequence of word ids padded with 0 (a mission text, see
        `envs.text`); `num_values` is then the vocabulary size.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    num_values: int | None = None
    tokens: bool = False

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if self.num_values is not None:
            if not np.issubdtype(self.dtype, np.integer) or self.num_values < 1:
                raise ValueError(
                    f"num_values={self.num_values} needs an integer dtype and a count >= 1; "
                    f"got dtype {self.dtype}"
                )
            object.__setattr__(self, "num_values", int(self.num_values))
        if self.tokens and (self.num_values is None or len(self.shape) != 1):
            raise ValueError(f"tokens=True needs a 1-D integer array with num_values; got {self}")


def is_array_spec(x: Any) -> bool:
    return isinstance(x, ArraySpec)


def as_obs_spec(tree: Any, what: str = "obs_spec") -> Any:
    """`tree` with every leaf an `ArraySpec` (leaves with `.shape` and `.dtype`, such as
    `jax.ShapeDtypeStruct`, are converted); a ValueError names a leaf that is neither."""

    def convert(path, leaf):
        if isinstance(leaf, ArraySpec):
            return leaf
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return ArraySpec(tuple(leaf.shape), leaf.dtype)
        raise ValueError(
            f"{what}: observation leaf {jax.tree_util.keystr(path) or '(root)'} is {leaf!r}, "
            "not an ArraySpec (shape, dtype)"
        )

    out = jax.tree_util.tree_map_with_path(convert, tree, is_leaf=is_array_spec)
    if not jax.tree.leaves(out, is_leaf=is_array_spec):
        raise ValueError(f"{what}: the observation spec {tree!r} has no arrays")
    return out


def obs_leaves_with_paths(obs_spec: Any) -> list[tuple[str, ArraySpec]]:
    """The `ArraySpec`s of an observation spec with their paths (`['image']`, `` for an
    array observation), in the order `jax.tree` flattens them."""
    flat, _ = jax.tree_util.tree_flatten_with_path(obs_spec, is_leaf=is_array_spec)
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in flat]


def obs_zeros(obs_spec: Any, lead: tuple[int, ...], xp: ModuleType = np) -> Any:
    """Zeros shaped like an observation spec with `lead` axes first (e.g. `(B,)`, `(T, B)`)."""
    return jax.tree.map(
        lambda s: xp.zeros((*lead, *s.shape), s.dtype), obs_spec, is_leaf=is_array_spec
    )


def obs_spec_json(obs_spec: Any) -> Any:
    """An observation spec as JSON-able data (for run configs)."""

    def leaf(s: ArraySpec) -> dict:
        out: dict[str, Any] = {"shape": list(s.shape), "dtype": s.dtype.name}
        if s.num_values is not None:
            out["num_values"] = s.num_values
        if s.tokens:
            out["tokens"] = True
        return out

    return jax.tree.map(leaf, obs_spec, is_leaf=is_array_spec)


def batch_size_of(obs: Any) -> int:
    """The leading (batch) size of an observation array or pytree."""
    return int(np.shape(jax.tree.leaves(obs)[0])[0])


@dataclass(frozen=True, eq=False)
class EnvSpec:
    """Static description of a vectorised env.

    Observations: `obs_spec` describes one env's observation: an `ArraySpec`, or a pytree
    (dict/tuple) of them for a structured observation space (MiniGrid's
    {"direction", "image", "mission"}). For an array observation `obs_shape`/`obs_dtype`
    repeat its shape and dtype (give either them or `obs_spec`); for a pytree they are None,
    and code that only handles arrays should check `pytree_obs` and say so.

    `eq=False`: specs compare and hash by identity (they hold numpy arrays), so one can be
    closed over or passed as a static argument to `jit` without hashing arrays.
    """

    env_id: str
    num_envs: int
    obs_shape: tuple[int, ...] | None
    obs_dtype: np.dtype | None
    discrete: bool
    num_actions: int | None
    action_shape: tuple[int, ...]  # () for discrete
    action_low: np.ndarray | None
    action_high: np.ndarray | None
    frame_stack: int  # 4 for Atari, 1 otherwise
    is_atari: bool
    backend: str  # "envpool" or "gymnasium"
    max_episode_steps: int | None
    reward_clip: bool = False
    episodic_life: bool = False
    obs_spec: Any = None
    privileged_obs: tuple[int, ...] = ()

    def __post_init__(self):
        setf = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        if self.obs_spec is None:
            if self.obs_shape is None or self.obs_dtype is None:
                raise ValueError(
                    f"{self.env_id}: EnvSpec needs obs_shape and obs_dtype, or obs_spec"
                )
            setf("obs_spec", ArraySpec(tuple(self.obs_shape), self.obs_dtype))
        setf("obs_spec", as_obs_spec(self.obs_spec, f"{self.env_id} obs_spec"))
        if isinstance(self.obs_spec, ArraySpec):
            # obs_shape/obs_dtype come back from dataclasses.replace: they must agree.
            given = (self.obs_shape, self.obs_dtype)
            if given != (None, None) and (
                given[0] is None
                or tuple(given[0]) != self.obs_spec.shape
                or np.dtype(given[1]) != np.dtype(self.obs_spec.dtype)
            ):
                raise ValueError(
                    f"{self.env_id}: obs_shape/obs_dtype {given} disagree with obs_spec "
                    f"{self.obs_spec}; give obs_spec alone (or obs_spec=None with a new shape)"
                )
            setf("obs_shape", self.obs_spec.shape)
            setf("obs_dtype", self.obs_spec.dtype)
        else:
            if self.frame_stack != 1:
                raise ValueError(
                    f"{self.env_id}: frame_stack={self.frame_stack} with a pytree observation; "
                    "frame stacks are for array observations"
                )
            setf("obs_shape", None)
            setf("obs_dtype", None)
        if self.privileged_obs:
            setf("privileged_obs", check_privileged_obs(self, self.privileged_obs))

    @property
    def visible_obs(self) -> tuple[int, ...] | None:
        """The observation dimensions the networks read: all but `privileged_obs` (None
        when there are none: the observation as it is)."""
        if not self.privileged_obs:
            return None
        return tuple(i for i in range(self.obs_shape[0]) if i not in self.privileged_obs)

    @property
    def pytree_obs(self) -> bool:
        """Whether observations are a pytree (dict/tuple) rather than one array."""
        return not isinstance(self.obs_spec, ArraySpec)

    def require_array_obs(self, who: str) -> tuple[tuple[int, ...], np.dtype]:
        """`(obs_shape, obs_dtype)`, or a one-line ValueError for a pytree observation."""
        if self.pytree_obs:
            keys = ", ".join(p for p, _ in obs_leaves_with_paths(self.obs_spec))
            raise ValueError(
                f"{who} supports array observations only; {self.env_id} has pytree "
                f"observations ({keys})"
            )
        assert self.obs_shape is not None and self.obs_dtype is not None
        return self.obs_shape, self.obs_dtype


def check_privileged_obs(spec: EnvSpec, dims) -> tuple[int, ...]:
    """`dims` as the sorted tuple of privileged dimensions of `spec`'s vector observations
    (`envs.factory.make_env`'s `privileged_obs`), or a one-line ValueError."""
    shape = None if spec.pytree_obs else spec.obs_shape
    if shape is None or len(shape) != 1:
        kind = "dict observations" if shape is None else f"observations of shape {list(shape)}"
        raise ValueError(f"--privileged-obs needs vector observations; {spec.env_id} has {kind}")
    try:
        dims = tuple(sorted({operator.index(d) for d in dims}))
    except TypeError:
        raise ValueError(f"--privileged-obs takes dimension indices, got {dims!r}") from None
    size = shape[0]
    bad = [d for d in dims if not 0 <= d < size]
    if bad:
        raise ValueError(
            f"--privileged-obs {' '.join(map(str, bad))}: {spec.env_id}'s observations have "
            f"dimensions 0 .. {size - 1}"
        )
    if len(dims) == size:
        raise ValueError(
            f"--privileged-obs hides all {size} dimensions of {spec.env_id}'s observations; "
            "the networks need at least one"
        )
    return dims


def obs_dtype_for(dtype: Any) -> np.dtype:
    """The dtype we hand out for a backend observation dtype (floats become float32)."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return np.dtype(np.float32)
    if np.issubdtype(dtype, np.signedinteger) and dtype.itemsize > 4:
        return np.dtype(np.int32)
    return dtype


def reorder_rows(xp: ModuleType, x: Array, env_id: Array) -> Array:
    """Scatter rows so that row `env_id[k]` of the result is row k of `x`.

    numpy: rows already in order (always the case with envpool in sync mode, so far) are
    returned without a copy; envpool hands out fresh arrays on every step, so this is safe.
    """
    if xp is np:
        env_id = np.asarray(env_id)
        if np.array_equal(env_id, np.arange(env_id.shape[0])):
            return x
        out = np.empty_like(x)
        out[env_id] = x
        return out
    return xp.zeros_like(x).at[env_id].set(x)


def reset_timestep(xp: ModuleType, obs: Array) -> TimeStep:
    """The TimeStep of a full reset: every row is `first` and refills its frame stack."""
    b = batch_size_of(obs)
    zeros = xp.zeros((b,), dtype=xp.float32)
    false = xp.zeros((b,), dtype=bool)
    true = xp.ones((b,), dtype=bool)
    return TimeStep(
        obs=obs,
        reward=zeros,
        raw_reward=zeros,
        terminated=false,
        truncated=false,
        first=true,
        game_over=false,
        frame_reset=true,
    )


def finalize_step(
    xp: ModuleType,
    *,
    obs: Array,
    raw_reward: Array,
    terminated: Array,
    truncated: Array,
    real_termination: Array | None,
    prev_done: Array,
    prev_game_over: Array,
    reward_clip: bool,
) -> TimeStep:
    """Build a TimeStep from one raw step whose rows are already in env order.

    Args:
      xp: `numpy` or `jax.numpy`.
      obs: observations, already cast to the spec dtype (an array or a pytree, passed through
        unchanged: no arithmetic touches them, so host and XLA agree bit for bit).
      raw_reward: unclipped reward.
      terminated, truncated: the backend's flags.
      real_termination: for episodic-life Atari, whether a termination is a real game over
        (envpool's `info["terminated"]`); None when every termination ends the game.
      prev_done, prev_game_over: the previous step's `terminated | truncated` and `game_over`.
      reward_clip: clip the training reward to [-1, 1].
    """
    terminated = xp.asarray(terminated).astype(bool)
    truncated = xp.asarray(truncated).astype(bool)
    # A real termination wins over a simultaneous time limit (gymnasium can report both).
    truncated = truncated & ~terminated
    first = xp.asarray(prev_done).astype(bool)
    raw = xp.asarray(raw_reward).astype(xp.float32)
    # The auto-reset step is fake: its reward is 0 by construction (envpool already does so).
    raw = xp.where(first, xp.float32(0.0), raw)
    # XLA:CPU runs with subnormals flushed to zero (a reward of 1e-45 compares and clips as 0
    # inside `jit`, but not in NumPy). Flush them here, explicitly, so both paths agree bit for
    # bit; no env reward is that small on purpose.
    raw = xp.where(xp.abs(raw) < xp.float32(np.finfo(np.float32).tiny), xp.float32(0.0), raw)
    reward = xp.clip(raw, xp.float32(-1.0), xp.float32(1.0)) if reward_clip else raw
    if real_termination is None:
        game_over = terminated | truncated
    else:
        game_over = truncated | (terminated & (xp.asarray(real_termination) != 0))
    return TimeStep(
        obs=obs,
        reward=reward,
        raw_reward=raw,
        terminated=terminated,
        truncated=truncated,
        first=first,
        game_over=game_over,
        frame_reset=xp.asarray(prev_game_over).astype(bool),
    )


class VecEnv:
    """A batch of `spec.num_envs` envs with next-step auto-reset, behind one interface.

    Host mode: `reset()` then `step(actions)`, numpy in and out. XLA mode (envpool only,
    `has_xla`): `xla_reset()` on the host, then the pure `xla_step(state, actions)` inside
    `jit` / `lax.scan`. Use one mode per instance: both drive the same underlying envs.
    """

    spec: EnvSpec
    has_xla: bool = False
    # Whether `xla_step` is plain JAX (no call out to a host-side pool), steps each env on its
    # own and takes any number of envs (any leading size of the state): a population split
    # over a mesh then steps each device's share of the pool's envs there.
    pure_xla: bool = False
    # A hashable value equal for two envs whose `xla_step`s are the same pure function (same
    # task, options and env count), so that programs built around one serve the other
    # (`shared_jit`; agents.core.base shares chunk programs by it); None (the default, and
    # envpool's, whose XLA step calls out to its own pool): never shared.
    program_key: Any = None

    def __init__(self, spec: EnvSpec):
        self.spec = spec
        self._prev_done: np.ndarray | None = None
        self._prev_game_over: np.ndarray | None = None

    # ----- backend hooks -------------------------------------------------------------------
    def _raw_reset(self) -> np.ndarray:
        """Reset every env; return obs in env order, cast to the spec dtype."""
        raise NotImplementedError

    def _raw_step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Step every env; return (obs, raw_reward, terminated, truncated, real_termination)
        with rows in env order."""
        raise NotImplementedError

    def convert_obs(self, obs: Any) -> Any:
        """A batch of raw gymnasium observations of this env's task (leaves with a leading
        batch axis; e.g. from a separate render env) as this env's observations: here arrays
        cast to the spec's dtype; adapters and wrappers that change observations override it."""
        return np.asarray(obs, self.spec.obs_dtype)

    def close(self) -> None:
        """Release the backend's resources."""

    def split_xla_state(self, state: Any, size: int) -> Any:
        """The XLA carry of `size`·N envs as `size` carries of N envs stacked `[size, ...]`
        (a population's members, engine.population); `join_xla_state` undoes it."""
        raise NotImplementedError(f"{type(self).__name__} has no XLA step")

    def join_xla_state(self, state: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no XLA step")

    # ----- host mode -----------------------------------------------------------------------
    def reset(self) -> TimeStep:
        """Reset every env; the returned TimeStep has `first = frame_reset = True`."""
        obs = self._raw_reset()
        b = self.spec.num_envs
        self._prev_done = np.zeros((b,), dtype=bool)
        self._prev_game_over = np.zeros((b,), dtype=bool)
        return reset_timestep(np, obs)

    def step(self, actions: np.ndarray) -> TimeStep:
        """Step every env with `actions` ([B] ints for discrete, [B, *action_shape])."""
        if self._prev_done is None or self._prev_game_over is None:
            raise RuntimeError("VecEnv.step() called before reset()")
        actions = self.check_actions(actions)
        obs, raw, term, trunc, real_term = self._raw_step(actions)
        ts = finalize_step(
            np,
            obs=obs,
            raw_reward=raw,
            terminated=term,
            truncated=trunc,
            real_termination=real_term,
            prev_done=self._prev_done,
            prev_game_over=self._prev_game_over,
            reward_clip=self.spec.reward_clip,
        )
        self._prev_done = ts.terminated | ts.truncated
        self._prev_game_over = ts.game_over
        return ts

    def check_actions(self, actions: Any) -> np.ndarray:
        """Validate a host action batch; return it as a numpy array (dtype not yet cast)."""
        spec = self.spec
        actions = np.asarray(actions)
        expected = (spec.num_envs, *spec.action_shape)
        if actions.shape != expected:
            raise ValueError(
                f"{spec.env_id}: actions must have shape {expected} "
                f"(num_envs, *action_shape), got {actions.shape}"
            )
        if spec.discrete:
            if not np.issubdtype(actions.dtype, np.integer):
                raise ValueError(
                    f"{spec.env_id}: discrete actions must be integers, got dtype {actions.dtype}"
                )
            assert spec.num_actions is not None
            if actions.size and (actions.min() < 0 or actions.max() >= spec.num_actions):
                raise ValueError(
                    f"{spec.env_id}: actions must lie in [0, {spec.num_actions}), "
                    f"got range [{actions.min()}, {actions.max()}]"
                )
        elif not (
            np.issubdtype(actions.dtype, np.floating) or np.issubdtype(actions.dtype, np.integer)
        ):
            raise ValueError(
                f"{spec.env_id}: continuous actions must be numeric, got dtype {actions.dtype}"
            )
        return actions

    # ----- XLA mode ------------------------------------------------------------------------
    def xla_reset(self) -> tuple[XlaEnvState, TimeStep]:
        """Reset on the host and return the XLA carry and the reset TimeStep (jnp arrays)."""
        raise RuntimeError(
            f"{self.spec.env_id}: the {self.spec.backend} backend has no XLA step "
            "(has_xla is False); use reset()/step() on the host"
        )

    def xla_step(self, state: XlaEnvState, actions: Array) -> tuple[XlaEnvState, TimeStep]:
        """Pure, jittable env step (usable inside `lax.scan`)."""
        raise RuntimeError(
            f"{self.spec.env_id}: the {self.spec.backend} backend has no XLA step "
            "(has_xla is False); use reset()/step() on the host"
        )

    def __enter__(self) -> VecEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        s = self.spec
        return (
            f"{type(self).__name__}({s.env_id!r}, num_envs={s.num_envs}, backend={s.backend!r}, "
            f"reward_clip={s.reward_clip}, episodic_life={s.episodic_life})"
        )


class PoolSlice(VecEnv):
    """Envs `[index·N, (index + 1)·N)` of `pool`, a vector env of `size`·N envs: what member
    `index` of a population sees (engine.population). It has the spec of an N-env vector
    env (so a member agent is built exactly as its single run) but is never stepped itself:
    the population steps the whole pool at once, one XLA call for every member."""

    def __init__(self, pool: VecEnv, index: int, size: int):
        total = pool.spec.num_envs
        if size < 1 or total % size or not 0 <= index < size:
            raise ValueError(f"cannot take slice {index} of {size} from a pool of {total} envs")
        super().__init__(dataclasses.replace(pool.spec, num_envs=total // size))
        self.pool, self.index, self.size = pool, index, size
        self.has_xla, self.pure_xla = pool.has_xla, pool.pure_xla

    def _stepped_by_pool(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError(
            f"{self.spec.env_id}: slice {self.index} of a pool of {self.pool.spec.num_envs} "
            "envs is stepped through its pool (engine.population), not on its own"
        )

    reset = step = xla_reset = xla_step = _stepped_by_pool


def spec_key(spec: EnvSpec) -> tuple:
    """The values of an `EnvSpec` (which hashes by identity), hashable: two specs with equal
    keys describe the same observations, actions and env count."""
    fields = []
    for name, value in sorted(vars(spec).items()):
        if isinstance(value, np.ndarray):
            value = (value.dtype.str, value.shape, value.tobytes())
        elif isinstance(value, np.dtype):
            value = value.str
        fields.append((name, value if _hashable(value) else repr(value)))
    return tuple(fields)


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


_SHARED_JITS: dict = {}


def shared_jit(env: VecEnv, name: str, fn):
    """`jax.jit(fn)` for `env`'s pure function `name`, the same jitted object for every env
    with an equal `program_key` (its first env's `fn`): a second env of the same task does not
    trace or compile it again. Without a key, a fresh `jax.jit(fn)`."""
    key = env.program_key
    if key is None:
        return jax.jit(fn)
    return _SHARED_JITS.setdefault((key, name), jax.jit(fn))
