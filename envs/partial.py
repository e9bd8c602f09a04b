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

from envs.core import TimeStep, VecEnv, spec_key

# variant id -> (env id, observation dimensions kept)
PARTIAL_OBS: dict[str, tuple[str, tuple[int, ...]]] = {
    # CartPole without its velocities: cart position and pole angle only.
    "CartPole-P-v1": ("CartPole-v1", (0, 2)),
    # Pendulum without its angular velocity: cos θ and sin θ only (Meng et al. 2021, Ni et al.
    # 2022 "Pendulum-P").
    "Pendulum-P-v1": ("Pendulum-v1", (0, 1)),
}


class ObsMapVecEnv(VecEnv):
    """`inner` with every observation mapped by `self._map(obs, xp)` (host and XLA modes
    alike); subclasses set the spec and `_map`. The XLA state is the inner env's."""

    def __init__(self, inner: VecEnv, spec):
        super().__init__(spec)
        self.inner = inner
        self.has_xla, self.pure_xla = inner.has_xla, inner.pure_xla

    def _map(self, obs, xp):
        raise NotImplementedError

    @property
    def program_key(self):
        inner = self.inner.program_key
        if inner is None:
            return None
        return (type(self).__name__, inner, spec_key(self.spec), self._map_key())

    def _map_key(self) -> tuple:
        """What besides the spec tells this wrapper's maps apart (`program_key`)."""
        return ()

    def convert_obs(self, obs):
        return self._map(self.inner.convert_obs(obs), np)

    def _select(self, ts: TimeStep, xp) -> TimeStep:
        return ts._replace(obs=self._map(ts.obs, xp))

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

    def split_xla_state(self, state, size: int):
        return self.inner.split_xla_state(state, size)

    def join_xla_state(self, state):
        return self.inner.join_xla_state(state)

    def close(self) -> None:
        self.inner.close()


class ObsSubsetVecEnv(ObsMapVecEnv):
    """`inner` with observations `obs[:, keep]`."""

    def __init__(self, inner: VecEnv, env_id: str, keep: tuple[int, ...]):
        spec = inner.spec
        if len(spec.obs_shape) != 1 or not all(0 <= k < spec.obs_shape[0] for k in keep):
            raise ValueError(
                f"{env_id}: cannot keep dimensions {keep} of observations shaped {spec.obs_shape}"
            )
        super().__init__(
            inner, dataclasses.replace(spec, env_id=env_id, obs_shape=(len(keep),), obs_spec=None)
        )
        self.keep = np.asarray(keep, np.int32)

    def _map(self, obs, xp):
        return xp.take(obs, xp.asarray(self.keep), axis=1)

    def _map_key(self) -> tuple:
        return tuple(int(k) for k in self.keep)


class PrivilegedObsVecEnv(ObsMapVecEnv):
    """`inner` with some dimensions of its vector observations declared privileged
    (`EnvSpec.privileged_obs`): the observations are handed out whole, and the agents that
    take them keep those dimensions from their networks, giving them only to what may see
    them (SAC's prediction model, --prediction); the others refuse such an env."""

    def __init__(self, inner: VecEnv, dims):
        super().__init__(inner, dataclasses.replace(inner.spec, privileged_obs=tuple(dims)))

    def _map(self, obs, xp):
        return obs

    def _map_key(self) -> tuple:
        return self.spec.privileged_obs


class FlatObsVecEnv(ObsMapVecEnv):
    """`inner` with each observation array flattened to a vector `[prod(obs_shape)]` (its
    dtype kept): what `--flatten-obs` trains on, so that the agents' MLP torso reads an image
    (MinAtar's `[10, 10, C]`) as gymnax-blines' and PureJaxRL's MLP agents do."""

    def __init__(self, inner: VecEnv):
        spec = inner.spec
        if spec.pytree_obs:
            raise ValueError(f"--flatten-obs needs array observations; {spec.env_id} gives a dict")
        size = int(np.prod(spec.obs_shape))
        super().__init__(inner, dataclasses.replace(spec, obs_shape=(size,), obs_spec=None))

    def _map(self, obs, xp):
        return obs.reshape((obs.shape[0], -1))
