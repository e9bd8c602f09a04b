"""The SAC agent on the shared off-policy seam (agents/core/offpolicy.py): networks, actor and
learner; continuous or discrete by the env's action space.

One iteration: collect `trace_len` steps of every env (uniformly random actions until
`start_train_at`, then a ~ π), store them, then run num_envs·trace_len·update_to_data
updates as one scanned program.

Recurrent mode (--recurrent; R2D2, Kapturowski et al. 2019, ICLR): the networks have LSTM
cores (networks.sac.RecurrentPolicy / RecurrentQEnsemble) and acting carries their state
(`networks.sac.RecurrentSACState`), stepping the critics' core too so that its state can be
stored. Each core is fed the previous action (in [−1, 1] for continuous actions: the actor
writes the action it takes into the state itself, so that evaluation, whose loop sees the
env's scaled action, feeds the same) and the previous reward (`core_feedback`). The replay
stores the state at every trace's start and is sampled in windows of burn-in + sequence +
n − 1 steps starting at a trace (`sample_batch`), learnt by agents/sac/recurrent.py; after
each update the states it recomputed are written back (`after_update`, --refresh-stored-state).
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from agents import losses
from agents.core.learning import TraceBatch
from agents.core.offpolicy import OFF_POLICY_TUNABLE, ActingParams, OffPolicyAgent
from agents.core.rollout import ActorOutput, time_major
from agents.sac.config import SACConfig
from agents.sac.learner import METRICS, SACLearner
from agents.sac.recurrent import RecurrentSACLearner
from networks.sac import (
    PolicyMLP,
    QEnsemble,
    RecurrentPolicy,
    RecurrentQEnsemble,
    RecurrentSACState,
)


class SACAgent(OffPolicyAgent):
    name = "sac"
    metric_names = METRICS
    supports_population = True  # feed-forward and recurrent; tests/agents/test_population.py
    tunable: ClassVar[dict[str, tuple[float, float]]] = {
        **OFF_POLICY_TUNABLE,
        "alpha_lr": (1e-7, 1.0),
    }

    def __init__(self, config: SACConfig, env, *, seed=0, mesh=None, replay_memory_limit=None):
        super().__init__(config, env, seed=seed, mesh=mesh, replay_memory_limit=replay_memory_limit)

    def make_network(self, spec):
        cfg = self.config
        if cfg.recurrent:
            return self._recurrent_networks(spec)
        if spec.discrete:
            actor = PolicyMLP(spec.num_actions, cfg.hidden, head="categorical")
            critic = QEnsemble(cfg.num_critics, cfg.hidden, spec.num_actions)
        else:
            actor = PolicyMLP(
                int(np.prod(spec.action_shape)), cfg.hidden, "gaussian",
                cfg.log_std_min, cfg.log_std_max,
            )  # fmt: skip
            critic = QEnsemble(cfg.num_critics, cfg.hidden, 0)
        return actor, critic

    def _recurrent_networks(self, spec):
        cfg = self.config
        size = spec.num_actions if spec.discrete else int(np.prod(spec.action_shape))
        common = dict(action_dim=size, discrete=spec.discrete, hidden=cfg.hidden)
        if spec.discrete:
            actor = RecurrentPolicy(size, **common, lstm_size=cfg.lstm_size, head="categorical")
        else:
            actor = RecurrentPolicy(
                size, **common, lstm_size=cfg.lstm_size, log_std_min=cfg.log_std_min,
                log_std_max=cfg.log_std_max,
            )  # fmt: skip
        critic = RecurrentQEnsemble(cfg.num_critics, **common, lstm_size=cfg.lstm_size)
        return actor, critic

    def make_learner(self, network):
        actor, critic = network
        cls = RecurrentSACLearner if self.config.recurrent else SACLearner
        return cls(self.config, actor, critic, self.env.spec)

    # ------------------------------------------------------------------ acting
    def initial_core(self, num_envs):
        if not self.config.recurrent:
            return ()
        return self.learner.initial_state(num_envs)

    @property
    def core_feedback(self):
        """Recurrent: the reward received becomes the cores' previous-reward input (the actor
        wrote the action it took already, module docstring); None otherwise."""
        return _feed_reward if self.config.recurrent else None

    def policy_params(self, learner) -> ActingParams:
        """The base's, with the critics' params when recurrent (acting steps their core)."""
        params = super().policy_params(learner)
        if not self.config.recurrent:
            return params
        return params._replace(critic=learner.params["critic"])

    def _policy(self, params, obs, first, core):
        """The actor's outputs at one batched step `[B, ...]` and the next core state (the
        critics' core stepped too when recurrent; the previous action is set by the caller)."""
        x = self.observation(obs, params.obs_stats)
        if not self.config.recurrent:
            return self.learner.actor.apply(params.actor, x), core
        x, f = time_major(x), first[None]
        out, actor_core = self.learner.actor.apply(params.actor, x, f, core.actor)
        _, critic_core = self.learner.critic.apply(
            params.critic, x, f, core.critic, method="unroll"
        )
        return jax.tree.map(lambda y: y[0], out), RecurrentSACState(actor_core, critic_core)

    def _record_action(self, core, action):
        """The action taken becomes the cores' previous-action input (recurrent)."""
        if not self.config.recurrent:
            return core

        def record(c):
            return c._replace(prev_action=jnp.asarray(action, c.prev_action.dtype))

        return RecurrentSACState(record(core.actor), record(core.critic))

    def make_actor(self):
        spec, learner = self.env.spec, self.learner
        if spec.discrete:
            return self._discrete_actor()
        low, high = learner.low, learner.high

        def select_action(params, obs, first, core, key):
            explore = params.explore
            k_pi, k_uniform = jax.random.split(key)
            (mean, log_std), core = self._policy(params, obs, first, core)
            u = mean + jnp.exp(log_std) * jax.random.normal(k_pi, mean.shape, mean.dtype)
            logp = losses.tanh_gaussian_log_prob(u, mean, log_std, low=low, high=high)
            # Before start_train_at: uniform actions on the box (density 1/Π(high − low)).
            a_uniform = jax.random.uniform(k_uniform, mean.shape, mean.dtype, -1.0, 1.0)
            u_uniform = jnp.arctanh(jnp.clip(a_uniform, -1.0 + 1e-6, 1.0 - 1e-6))
            logp_uniform = jnp.full(logp.shape, -float(np.sum(np.log(high - low))))
            u = jnp.where(explore, u_uniform, u)
            action = jnp.where(explore, a_uniform, jnp.tanh(u))
            logp = jnp.where(explore, logp_uniform, logp)
            mu = {"logp": logp, "pre_tanh": u}
            core = self._record_action(core, action)
            return ActorOutput(action, mu, core, losses.scale_action(action, low, high))

        def act(greedy: bool):
            def act_fn(params, obs, first, core, key):
                (mean, log_std), core = self._policy(params, obs, first, core)
                if not greedy:
                    mean = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
                action = jnp.tanh(mean)
                return losses.scale_action(action, low, high), self._record_action(core, action)

            return jax.jit(act_fn)

        return select_action, act

    def _discrete_actor(self):
        def select_action(params, obs, first, core, key):
            logits, core = self._policy(params, obs, first, core)
            logits = jnp.where(params.explore, jnp.zeros_like(logits), logits)  # uniform at first
            action = jax.random.categorical(key, logits).astype(jnp.int32)
            core = self._record_action(core, action)
            return ActorOutput(action, jax.nn.softmax(logits), core)

        def act(greedy: bool):
            def act_fn(params, obs, first, core, key):
                logits, core = self._policy(params, obs, first, core)
                a = jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)
                a = a.astype(jnp.int32)
                return a, self._record_action(core, a)

            return jax.jit(act_fn)

        return select_action, act

    # ------------------------------------------------------------------ replay
    def sample_batch(self, learner, replay, key, axis_name=None):
        """Recurrent: B windows of burn-in + seq_len + n − 1 steps, each starting `burn_in`
        steps before a uniformly drawn trace, with the state stored there: (TraceBatch,
        info, zero offsets). Feed-forward: the base's transitions."""
        if not self.config.recurrent:
            return super().sample_batch(learner, replay, key, axis_name)
        b = self.config.batch_size // self.num_devices
        sample = self.replay.sample(replay, key, b, axis_name=axis_name)
        batch = TraceBatch.from_sample(sample, self.replay.window_len)
        return batch, sample.info, jnp.zeros((b,), jnp.int32)

    def after_update(self, learner, replay, batch, info, offset, computed=()):
        """--overwrite-mu: the stored behaviour log-probs (continuous) or probabilities
        (discrete) of the window's steps become the updated policy's. Recurrent with
        --refresh-stored-state: the states `computed` by the update's unroll (leaves
        `[M, B, ...]`, at window positions T, 2T, .., burn_in + seq_len) become the stored
        states of the traces starting there: slots k − burn_in/T + m, m = 1 .. M, of a window
        sampled at slot k (agents/sac/recurrent.py)."""
        cfg = self.config
        if cfg.recurrent:
            if not cfg.refresh_stored_state:
                return replay
            m = jax.tree.leaves(computed)[0].shape[0]
            later = jnp.arange(1, m + 1, dtype=jnp.int32)[:, None]
            slots = (info.slot[None, :] - cfg.burn_in // cfg.trace_len + later) % (
                self.replay.traces_per_env
            )
            values = jax.tree.map(jax.lax.stop_gradient, computed)
            return self.replay.overwrite_extras(replay, info.env_index, slots, values)
        if not cfg.overwrite_mu:
            return replay
        n = batch.reward.shape[0]
        actor = learner.params["actor"]
        obs = batch.obs[:n]
        if self.learner.discrete:
            new_mu = jax.nn.softmax(self.learner.actor.apply(actor, obs))
        else:
            logp = self.learner.log_prob(actor, obs, batch.action, batch.mu)
            new_mu = {"logp": logp, "pre_tanh": batch.mu["pre_tanh"]}
        start = self.step_position(info, offset)
        return self.replay.overwrite_steps(
            replay, "mu", info.env_index, start, jax.lax.stop_gradient(new_mu)
        )


def _feed_reward(core: RecurrentSACState, action, reward) -> RecurrentSACState:
    """`core_feedback` of recurrent SAC: the reward just received becomes both cores'
    previous-reward input; the action is already there (`SACAgent._record_action`)."""
    del action

    def feed(c):
        return c._replace(prev_reward=jnp.asarray(reward, c.prev_reward.dtype))

    return RecurrentSACState(feed(core.actor), feed(core.critic))
