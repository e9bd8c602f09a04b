"""The SAC agent on the shared off-policy seam (agents/offpolicy.py): networks, actor and
learner; continuous or discrete by the env's action space.

One iteration: collect `trace_len` steps of every env (uniformly random actions until
`start_train_at`, then a ~ π), store them, then run num_envs·trace_len·update_to_data
updates as one scanned program.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agents import losses
from agents.offpolicy import OffPolicyAgent, write_steps
from agents.rollout import ActorOutput
from agents.sac.config import SACConfig
from agents.sac.learner import METRICS, SACLearner
from networks.sac import PolicyMLP, QEnsemble


class SACAgent(OffPolicyAgent):
    name = "sac"
    metric_names = METRICS
    bench_compare = "update_to_data=1,4"  # experiments.bench_throughput's default

    def __init__(self, config: SACConfig, env, *, seed=0, mesh=None, replay_memory_limit=None):
        super().__init__(config, env, seed=seed, mesh=mesh, replay_memory_limit=replay_memory_limit)

    def make_network(self, spec):
        cfg = self.config
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

    def make_learner(self, network):
        actor, critic = network
        return SACLearner(self.config, actor, critic, self.env.spec)

    def make_actor(self):
        spec, learner, observe = self.env.spec, self.learner, self.observation
        if spec.discrete:
            return self._discrete_actor()
        low, high = learner.low, learner.high

        def select_action(params, obs, first, core, key):
            explore = params.explore
            k_pi, k_uniform = jax.random.split(key)
            mean, log_std = learner.actor.apply(params.actor, observe(obs, params.obs_stats))
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
            return ActorOutput(action, mu, core, losses.scale_action(action, low, high))

        def act(greedy: bool):
            def act_fn(params, obs, first, core, key):
                mean, log_std = learner.actor.apply(params.actor, observe(obs, params.obs_stats))
                if not greedy:
                    mean = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
                return losses.scale_action(jnp.tanh(mean), low, high), core

            return jax.jit(act_fn)

        return select_action, act

    def _discrete_actor(self):
        learner, observe = self.learner, self.observation

        def select_action(params, obs, first, core, key):
            logits = learner.actor.apply(params.actor, observe(obs, params.obs_stats))
            logits = jnp.where(params.explore, jnp.zeros_like(logits), logits)  # uniform at first
            action = jax.random.categorical(key, logits).astype(jnp.int32)
            return ActorOutput(action, jax.nn.softmax(logits), core)

        def act(greedy: bool):
            def act_fn(params, obs, first, core, key):
                logits = learner.actor.apply(params.actor, observe(obs, params.obs_stats))
                a = jnp.argmax(logits, -1) if greedy else jax.random.categorical(key, logits)
                return a.astype(jnp.int32), core

            return jax.jit(act_fn)

        return select_action, act

    def after_update(self, learner, replay, batch, info, offset):
        """--overwrite-mu: the stored behaviour log-probs (continuous) or probabilities
        (discrete) of the window's steps become the updated policy's."""
        if not self.config.overwrite_mu:
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
        return write_steps(
            self.replay, replay, "mu", info.env_index, start, jax.lax.stop_gradient(new_mu)
        )

    # ------------------------------------------------------------------ benchmarks
    def network_costs(self) -> dict:
        """The cost model of experiments.bench_throughput, per env step: one acting actor
        forward; per update (update_to_data per env step, batch B) the target pass (actor +
        N critics forward on B·n next observations), the critic step (N critics forward +
        backward + Adam on B) and the actor step (actor + N critics forward + backward on B).
        Each is timed as one jitted function of the real modules. Returns name -> (make(batch)
        -> (jitted fn, args), batches of that size per env step); the batch axis is
        transitions here, so the bench's best batch size stands for B."""
        cfg, spec, learner = self.config, self.env.spec, self.learner
        state = learner.init(jax.random.PRNGKey(0), self.sample_obs(1))
        actor, critic = state.params["actor"], state.params["critic"]
        members = jnp.arange(cfg.critic_subset)
        dim = spec.num_actions if spec.discrete else learner.action_dim

        def obs(b):
            return jax.random.normal(jax.random.PRNGKey(b), (b, *spec.obs_shape), jnp.float32)

        def actions(b):
            if spec.discrete:
                return jnp.zeros((b,), jnp.int32)
            return jnp.zeros((b, dim), jnp.float32)

        def act(p, o):
            return learner.sample(p, o, jax.random.PRNGKey(0))[0]

        def target(p, c, o):
            return learner.soft_value_parts(p, c, o, jax.random.PRNGKey(0), members, 1.0)

        opt = learner.optimizers["critic"]

        def critic_step(c, s, o, a):
            def loss(c):
                return jnp.mean(jnp.square(learner.q_taken(c, o, a)))

            u, s = opt.update(jax.grad(loss)(c), s, c)
            return optax.apply_updates(c, u), s

        aopt = learner.optimizers["actor"]

        def actor_step(p, s, c, o):
            def loss(p):
                if spec.discrete:
                    return jnp.mean(learner.sample(p, o, None)[0] * learner.critic.apply(c, o)[0])
                a, logp = learner.sample(p, o, jax.random.PRNGKey(0))
                return jnp.mean(logp - learner.critic.apply(c, o, a)[0])

            u, s = aopt.update(jax.grad(loss)(p), s, p)
            return optax.apply_updates(p, u), s

        per_step = cfg.update_to_data * cfg.batch_size  # transitions learnt per env step
        return {
            "act forward": (lambda b: (jax.jit(act), (actor, obs(b))), 1.0),
            "target forward": (
                lambda b: (jax.jit(target), (actor, critic, obs(b))),
                per_step * cfg.n_step,
            ),
            "critic step": (
                lambda b: (jax.jit(critic_step), (critic, opt.init(critic), obs(b), actions(b))),
                per_step,
            ),
            "actor step": (
                lambda b: (jax.jit(actor_step), (actor, aopt.init(actor), critic, obs(b))),
                per_step / cfg.policy_delay,
            ),
        }
