"""The PPO agent on the shared seam (`agents.core.base.RolloutAgent`): no replay; each iteration
collects T steps from every env with the current policy (recording log π(a_t|x_t), V(x_t)
and the LSTM state) and `absorb` runs the whole update on that rollout as one device
program (agents/ppo/learner.py). A2C (agents/a2c/) is this agent with its own config and
optimizer."""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import optax

from agents.core.actors import logp_value_actor
from agents.core.base import ACTOR_CRITIC_TUNABLE, RolloutAgent
from agents.core.config import ConfigError, module_from_config
from agents.core.hooks import call_hook, config_hook
from agents.core.parallel import DATA, ROLLOUT_SPECS, P, check_divisible
from agents.core.programs import Program
from agents.core.protocol import IterationOutput, TrainState
from agents.ppo.learner import METRICS, OnPolicyLearner, buffer_specs
from networks import ActorCriticNetwork
from networks.cores import feed_back
from networks.torsos import _array_shape


class PPOAgent(RolloutAgent):
    """PPO (or, through its config, A2C) on a `VecEnv`, discrete or continuous actions."""

    name = "ppo"
    metric_names = METRICS
    discrete_only = False
    # A population (`--num-seeds`) vmaps the one-program update (update_loop scan/unroll):
    # rollout, then `absorb` (every epoch and minibatch); tests/agents/test_population.py.
    supports_population = True
    tunable: ClassVar[dict[str, tuple[float, float]]] = {
        **ACTOR_CRITIC_TUNABLE,
        "value_weight": (0.0, 10.0),
        "gae_lambda": (0.0, 1.0),
        "clip_eps": (1e-3, 1.0),
    }

    def population_conflict(self) -> str | None:
        if self.update_loop == "dispatch":
            return (
                "a population runs each member's update as one program, not one dispatch per "
                "minibatch; add --update-loop scan (or unroll)"
            )
        return None

    def __init__(self, config, env, *, seed: int = 0, mesh=None):
        super().__init__(config, env, seed=seed, mesh=mesh)
        per_device = config.num_envs // self.num_devices
        if config.num_minibatches > 1:
            if self.recurrent:
                check_divisible(
                    "--num-envs per device", per_device, config.num_minibatches,
                    "--num-minibatches",
                )  # fmt: skip
            else:
                check_divisible(
                    "--num-envs x --trace-len per device", per_device * config.trace_len,
                    config.num_minibatches, "--num-minibatches",
                )  # fmt: skip
        if config.normalize_obs and _array_shape(self.network.obs_spec) is None:
            raise ConfigError(
                "--normalize-obs needs array observations; "
                f"{env.spec.env_id} gives a dict (normalise inside --preprocess-obs instead)"
            )
        self._build_absorb()
        if self.update_loop == "dispatch":
            specs = {}
            if self.mesh is not None:
                buf = buffer_specs(DATA)
                specs = {
                    "prepare": dict(in_specs=(P(), ROLLOUT_SPECS), out_specs=(P(), buf)),
                    "minibatch": dict(in_specs=(P(), buf, P(), P()), out_specs=(P(), P())),
                    "refresh": dict(in_specs=(P(), buf), out_specs=buf),
                }
            L = self.learner
            self._prepare = Program(
                L.prepare, mesh=self.mesh, donate_argnums=(0,), **specs.get("prepare", {})
            )
            self._minibatch = Program(
                L.minibatch_update, mesh=self.mesh, donate_argnums=(0,),
                **specs.get("minibatch", {}),
            )  # fmt: skip
            self._refresh = Program(
                L.refresh, mesh=self.mesh, donate_argnums=(1,), **specs.get("refresh", {})
            )
            self._indices = [  # (epoch, minibatch) as host ints and as device arrays
                ((e, i), (jnp.int32(e), jnp.int32(i)))
                for e in range(config.epochs)
                for i in range(config.num_minibatches)
            ]

    @functools.cached_property
    def update_loop(self) -> str:
        """`config.update_loop`, with `auto` resolved (once: the host loop reads it every
        iteration): no rolled loop around a convolution's weight gradient on CPU."""
        mode = self.config.update_loop
        if mode == "auto":
            return "dispatch" if self.convolves_on_cpu else "scan"
        return mode

    @property
    def recurrent(self) -> bool:
        return bool(self.config.lstm_size)

    @property
    def core_feedback(self):
        """With --prev-action-reward the acting loops write the action taken and the reward
        received into the core state (the LSTM's next inputs); None otherwise."""
        return feed_back if self.config.prev_action_reward else None

    # ------------------------------------------------------------------ hooks
    def make_network(self, spec):
        cfg = self.config
        obs_spec = spec.obs_spec
        hook = config_hook(cfg, "preprocess_obs")
        if hook is not None:  # the network sees the preprocessed observation
            sample = jax.eval_shape(lambda: self.sample_obs(spec.num_envs))
            out = jax.eval_shape(lambda o: call_hook("preprocess_obs", hook, o), sample)
            if hasattr(out, "shape"):  # an array; a pytree hook keeps the env's leaves
                obs_spec = tuple(out.shape[1:])
        action_dim = spec.num_actions if spec.discrete else int(math.prod(spec.action_shape))
        return module_from_config(
            ActorCriticNetwork, cfg, obs_spec=obs_spec, action_dim=action_dim,
            discrete=spec.discrete,
        )  # fmt: skip

    def make_optimizer(self, learning_rate) -> optax.GradientTransformation:
        """PPO: Adam (the gradient clipping is chained in front by the learner)."""
        return optax.adam(learning_rate, eps=self.config.adam_eps)

    def make_learner(self, network):
        return OnPolicyLearner(
            self.config, network, self.make_optimizer, discrete=self.env.spec.discrete,
            unroll=self.update_loop == "unroll",
        )  # fmt: skip

    def make_actor(self):
        spec = self.env.spec
        return logp_value_actor(self.policy_value, spec.discrete, spec.action_low, spec.action_high)

    def policy_value(self, acting_params, obs, first, core):
        """(dist, value [B], core) at one batched step; `acting_params` = (params, obs
        statistics), see `policy_params`."""
        params, obs_stats = acting_params
        x = self.learner.prepare_obs(obs, obs_stats)
        if not self.recurrent:
            dist, value = self.network.apply(params, x)
            return dist, value, core
        x = jax.tree.map(lambda o: o[None], x)
        (dist, value), core = self.network.apply(params, x, first[None], core)
        dist = dist[0] if self.env.spec.discrete else (dist[0][0], dist[1])
        return dist, value[0], core

    def policy_params(self, learner):
        return (learner.params, learner.obs_stats)

    def initial_core(self, num_envs: int):
        return self.network.initial_state(num_envs) if self.recurrent else ()

    def absorb(self, learner, replay, traj, axis_name=None, hparams=None):
        """The whole update as one program (update_loop scan or unroll); no replay."""
        learner, metrics, _ = self.learner.update(learner, traj, axis_name, hparams)
        return learner, replay, [metrics]

    @property
    def host_driven(self) -> str | None:
        if self.update_loop == "dispatch":
            return "--update-loop dispatch runs each minibatch from the host"
        return super().host_driven

    # ------------------------------------------------------------------ dispatch mode
    def train_iteration(self, state: TrainState, iteration: int, env_steps: int):
        if self.update_loop != "dispatch":
            return super().train_iteration(state, iteration, env_steps)
        actor, traj, placed = self.collect(state)
        learner, buffer = self._prepare(state.learner, placed)
        metrics = []
        refresh = self.recurrent and self.config.refresh_memories
        for (e, i), args in self._indices:
            if refresh and i == 0 and e > 0:
                buffer = self._refresh(learner, buffer)
            learner, m = self._minibatch(learner, buffer, *args)
            metrics.append(m)
        out = IterationOutput(metrics, traj.finished_return, traj.finished_length, traj.game_over)
        return TrainState(learner, state.replay, actor), out

    def _compile_learning(self, state: TrainState, placed) -> None:
        if self.update_loop != "dispatch":
            return super()._compile_learning(state, placed)
        out = jax.eval_shape(self._prepare._jitted, state.learner, placed)
        learner, buffer = out[1] if self._prepare.checks else out  # --debug: (error, out)
        self._prepare.compile(state.learner, placed)
        self._minibatch.compile(learner, buffer, *self._indices[0][1])
        if self.recurrent and self.config.refresh_memories:
            self._refresh.compile(learner, buffer)

    @property
    def programs(self) -> dict:
        if self.update_loop != "dispatch":
            return super().programs
        return {
            "rollout": self.rollout, "prepare": self._prepare, "minibatch": self._minibatch,
            **({"refresh": self._refresh} if self.recurrent else {}),
        }  # fmt: skip
