"""SAC's prediction model (--prediction): the Advanced-SAC seed's transition, reward and
observation models on the critics' representation, with the gradient gate
(agents.losses.prediction, networks.prediction).

The representation s_t is what the critics' heads read: the recurrent critics' core state
(feed-forward: their torso's features, a ReLU layer of width hidden[0] on vector
observations, added with --prediction, or the --network plug-in's). Each update, beside the
critics' loss:
1. the models predict from s_t (with gradient), the privileged dimensions e_t of x_t
   (--privileged-obs) and the action a_t: N(μ, σ) of the target critics' representation
   of x_{t+1}, the env's reward r_t (without a curiosity bonus) and the whole observation
   x_t; their loss is the sum of the transition loss (with --transition-kl) and the two
   squared errors, each averaged over the valid steps (not weighted by prioritized
   replay's importance weights, which correct the critics' targets' sampling, not an
   auxiliary task's);
2. one forward pass, two gradients (`jax.vjp`): g of the critics' loss, h of the models'
   loss, with respect to the critics' parameters and the models'; averaged over devices;
3. the critics step along g, plus h on the representation's parameters (all but the
   heads') where cos(g, h) > 0 over those parameters (`agents.losses.gated_gradients`); the
   models step along their own gradient, with the critics' optimiser settings (Adam,
   --critic-lr, --max-grad-norm).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from agents import losses
from agents.core.learning import apply
from networks.prediction import PredictionModel

sg = jax.lax.stop_gradient

METRICS = (
    "prediction_loss", "transition_loss", "reward_model_loss", "reconstruction_loss", "gate",
    "grad_cosine",
)  # fmt: skip

# The subtrees of the critics' parameters that are heads, not representation: the
# feed-forward ensemble's members (networks.sac.QEnsemble), the recurrent one's heads.
HEAD_KEYS = ("members", "heads")


class PredictionState(NamedTuple):
    params: Any  # the models' (networks.prediction.PredictionModel)
    opt_state: Any


class Prediction:
    """The prediction model's pure functions for SAC on an env of `spec` (vector
    observations)."""

    def __init__(self, config, spec):
        self.config = config
        self.model = PredictionModel(int(spec.obs_shape[0]), tuple(config.hidden))
        self.privileged = np.asarray(spec.privileged_obs, np.int32)
        self.num_actions = spec.num_actions if spec.discrete else None
        self.action_shape = () if spec.discrete else tuple(spec.action_shape)

    def init(self, key, states, obs, optimizer) -> PredictionState:
        """Fresh models for representations `states` `[B, K]` of observations `obs` `[B, D]`,
        and `optimizer`'s state."""
        b = states.shape[0]
        dtype = jnp.int32 if self.num_actions is not None else jnp.float32
        action = jnp.zeros((b, *self.action_shape), dtype)
        params = self.model.init(key, states, self.extra(obs), self.action_input(action))
        return PredictionState(params, optimizer.init(params))

    def extra(self, obs):
        """The privileged dimensions e_t of observations `[..., D]` -> `[..., E]`."""
        return jnp.take(obs, jnp.asarray(self.privileged), axis=-1)

    def action_input(self, action):
        """Actions as vectors: one-hot when discrete, as stored (in [−1, 1]) otherwise."""
        if self.num_actions is not None:
            return jax.nn.one_hot(action, self.num_actions, dtype=jnp.float32)
        return action.astype(jnp.float32)

    def loss(self, params, states, obs, action, reward, next_states, mask):
        """The models' loss (module docstring, 1.) at `[T, B]` steps: representations
        `states` and the target's of the next observations `next_states` `[T, B, K]`,
        observations `[T, B, D]`, actions, env rewards and the valid steps `mask` `[T, B]`.
        Returns (loss, its parts by metric name)."""
        out = self.model.apply(params, states, self.extra(obs), self.action_input(action))
        obs = obs.astype(jnp.float32)
        per_step = {
            "transition_loss": losses.transition_loss(
                out.mean, out.log_std, next_states, self.config.transition_kl, mask_t=mask
            ),
            "reward_model_loss": losses.reward_model_loss(out.reward, reward, mask_t=mask),
            "reconstruction_loss": losses.reconstruction_loss(out.observation, obs, mask_t=mask),
        }
        valid = jnp.maximum(jnp.sum(mask), 1.0)
        parts = {name: jnp.sum(v) / valid for name, v in per_step.items()}
        total = sum(parts.values())
        return total, {"prediction_loss": total, **parts}

    def gated_step(self, joint, critic_params, pred: PredictionState, optimizer, axis_name):
        """Steps 2-3 of the module docstring. `joint(critic_params, model_params) ->
        ((critic loss, models' loss), aux)`. Returns (aux, the critics' gradient, its norm,
        the models' new state, {"gate", "grad_cosine"})."""
        diff = (critic_params, pred.params)
        if axis_name is not None:
            diff = jax.tree.map(lambda x: jax.lax.pcast(x, (axis_name,), to="varying"), diff)
        (critic_loss, model_loss), pull, aux = jax.vjp(joint, *diff, has_aux=True)
        g_critic, _ = pull((jnp.ones_like(critic_loss), jnp.zeros_like(model_loss)))
        h_critic, h_model = pull((jnp.zeros_like(critic_loss), jnp.ones_like(model_loss)))
        if axis_name is not None:
            g_critic, h_critic, h_model = jax.lax.pmean((g_critic, h_critic, h_model), axis_name)
        rep = _representation(g_critic)
        combined, gate, cos = losses.gated_gradients(rep, _representation(h_critic))
        grads = {**g_critic, "params": {**g_critic["params"], **combined}}
        params, opt_state = apply(optimizer, h_model, pred.opt_state, pred.params)
        metrics = {"gate": gate, "grad_cosine": cos}
        return aux, grads, optax.tree.norm(grads), PredictionState(params, opt_state), metrics


def _representation(critic_tree):
    """The representation's part of a tree shaped as the critics' parameters."""
    return {k: v for k, v in critic_tree["params"].items() if k not in HEAD_KEYS}
