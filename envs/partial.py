"""Partially observed variants of vector envs: the same env, with only some observation
dimensions kept (for memory tasks: a feed-forward policy cannot infer what was dropped, a
recurrent one can, e.g. velocities from successive positions).

`PARTIAL_OBS` names the variants `make_env` knows; add a row for another one. Naming follows
the POMDP benchmarks of Meng et al. 2021 / Ni et al. 2022 ("-P": positions only).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from envs.core import TimeStep, VecEnv

# variant id -> (env id, observation dimensions kept)
PARTIAL_OBS: dict[str, tuple[str, tuple[int, ...]]] = {
    # CartPole without its velocities: cart position and pole angle only.
    "CartPole-P-v1": ("CartPole-v1", (0, 2)),
    # Pendulum without its angular velocity: cos θ and sin θ only (Meng et al. 2021, Ni et al.
    # 2022 "Pendulum-P").
    "Pendulum-P-v1": ("Pendulum-v1", (0, 1)),
}


class ObsSubsetVecEnv(VecEnv):
    """`inner` with observations `obs[:, keep]` (host and XLA modes alike)."""

    def __init__(self, inner: VecEnv, env_id: str, keep: tuple[int, ...]):
        spec = inner.spec
        if len(spec.obs_shape) != 1 or not all(0 <= k < spec.obs_shape[0] for k in keep):
            raise ValueError(
                f"{env_id}: cannot keep dimensions {keep} of observations shaped {spec.obs_shape}"
            )
        super().__init__(
            dataclasses.replace(spec, env_id=env_id, obs_shape=(len(keep),), obs_spec=None)
        )
        self.inner, self.keep = inner, np.asarray(keep, np.int32)
        self.has_xla = inner.has_xla

    def _select(self, ts: TimeStep, xp) -> TimeStep:
        return ts._replace(obs=xp.take(ts.obs, xp.asarray(self.keep), axis=1))

    def reset(self) -> TimeStep:
        return self._select(self.inner.reset(), np)

    def step(self, actions) -> TimeStep:
        return self._select(self.inner.step(actions), np)

    def xla_reset(self):
        state, ts = self.inner.xla_reset()
        return state, self._select(ts, jnp)

    def xla_step(self, state, actions):
        state, ts = self.inner.xla_step(state, actions)
        return state, self._select(ts, jnp)

    def close(self) -> None:
        self.inner.close()
