"""Environments: the one place that knows about envpool/gymnasium, terminations, truncations,
auto-reset and frame stacks.

`make_env(env_id, num_envs, seed, train=...)` returns a `VecEnv` over B envs. Every backend
follows envpool's *next-step* auto-reset: the step that ends an episode returns the final
obs with `terminated` or `truncated` set; the next step ignores its action and returns the
reset obs with reward 0, both flags False and `first=True`. That transition is fake.

Trace convention (used everywhere in the project)
-------------------------------------------------
For step t with obs x_t and action a_t, the stepped `TimeStep` (call it ts_{t+1}) carries
x_{t+1}. The loss inputs for step t are

    r_t        = ts_{t+1}.reward
    discount_t = gamma * (1 - ts_{t+1}.terminated)
    mask_t     = 1 - ts_{t+1}.first

- `mask_t = 0` marks the fake auto-reset transition x_t -> x_{t+1} (x_t is a final obs,
  x_{t+1} the first obs of the next (life-)episode): no loss is taken on it and no trace
  runs through it.
- A termination (including a life loss when episodic life is on) sets `discount_t = 0`.
- A truncation keeps `discount_t = gamma`: targets bootstrap from V(x_{t+1}), the final obs,
  and the mask on the following fake step cuts the trace there.
- Returns for logging: sum `raw_reward` and close the sum at `game_over` (a full game, not
  a life). `frame_reset` tells when the frame stack was refilled (a game reset; a life-loss
  reset does not refill it, see `TimeStep`).

Two modes
---------
Host: `ts = env.reset()`, `ts = env.step(actions)` with numpy arrays. XLA (envpool,
`env.has_xla`): `state, ts = env.xla_reset()` on the host, then
`state, ts = env.xla_step(state, actions)` inside `jax.jit` / `lax.scan`. For the same seed
and actions both modes give bit-identical `TimeStep`s.

Observations
------------
`spec.obs_spec` describes one env's observation: an `ArraySpec` (shape, dtype; also
`spec.obs_shape`/`spec.obs_dtype`) or, for gymnasium `Dict`/`Tuple` spaces such as
MiniGrid's, a dict/tuple of them (`spec.pytree_obs`; `obs_shape` is then None). Every
observation, array or pytree, has the batch axis first on each leaf. Text (MiniGrid's
mission) becomes fixed-length int32 word ids with a fixed vocabulary (`envs.text`).
"""

from envs.core import (
    ArraySpec,
    EnvSpec,
    PoolSlice,
    TimeStep,
    VecEnv,
    XlaEnvState,
    as_obs_spec,
    obs_leaves_with_paths,
    obs_spec_json,
    obs_zeros,
)

# The factory imports the env backends (envpool, gymnasium, gymnax, ...); it loads on first use
# of one of its names, so that `envs.core` (and `networks`, which reads its specs) import with
# the light install (`pip install reactor-jax`, no env backend; docs/install.md).
_FACTORY = ("clips_rewards", "eval_env_seed", "make_env", "make_eval_env", "run_env_seed")


def __getattr__(name: str):
    if name in _FACTORY:
        from envs import factory

        return getattr(factory, name)
    raise AttributeError(f"module 'envs' has no attribute {name!r}")


__all__ = [
    "ArraySpec",
    "EnvSpec",
    "PoolSlice",
    "TimeStep",
    "VecEnv",
    "XlaEnvState",
    "as_obs_spec",
    "clips_rewards",
    "eval_env_seed",
    "make_env",
    "make_eval_env",
    "obs_leaves_with_paths",
    "obs_spec_json",
    "obs_zeros",
    "run_env_seed",
]
