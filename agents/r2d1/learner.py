"""R2D1's learner: `agents.dqn.learner.DQNLearner` with a recurrent unroll (R2D2, §2.3).

A sampled window holds `burn_in` steps, the `seq_len` learnt steps and `n_step − 1`
look-ahead steps, with the recurrent state stored at the window's start (`batch.core_state`,
`networks.RecurrentQState`: LSTM state and the previous action and reward). Both networks
start from that stored state and unroll over the burn-in first; the burnt-in state is
stop_gradient'ed, so the burn-in steps get no gradient and only refresh the state (R2D2's
"stored state + burn-in"). The online network then unrolls the learnt steps with gradient and
the look-ahead without; the target network unrolls everything after the burn-in. The
previous-action and -reward inputs of step i are the window's action and reward of step
i − 1 (the stored ones for i = 0), zeroed at episode starts by the network.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from agents.core.learning import TraceBatch, burn_in_state
from agents.dqn.learner import DQNLearner, Unrolled
from networks.cores import previous_inputs

sg = jax.lax.stop_gradient


def r2d1_learner(config, network, make_optimizer) -> DQNLearner:
    """The DQN learner of R2D1's config with the recurrent `network`'s init and unroll."""
    return DQNLearner(
        config, network, make_optimizer, init_params=partial(init_params, network),
        unroll=partial(unroll, config, network),
    )  # fmt: skip


def init_params(network, key, sample_obs):
    """The recurrent network's parameters, for one observation batch `[B, ...]`."""
    b = sample_obs.shape[0]
    first = jnp.ones((1, b), bool)
    return network.init(key, sample_obs[None], first, network.initial_state(b))


def unroll(config, network, params, target_params, batch: TraceBatch, noise=(None, None)):
    """`DQNLearner.unroll` from the stored state with burn-in (module docstring): `Unrolled`."""
    del noise  # no NoisyNet layers in R2D1's network
    back, L = config.lookback, config.learn_len
    state0 = batch.core_state
    # Inputs of window step i: the action and reward of step i − 1.
    prev_action, prev_reward = previous_inputs(state0, batch.action, batch.reward)

    def run(p, start, stop, state):
        sl = slice(start, stop)
        return network.apply(
            p, batch.obs[sl], batch.first[sl], state, prev_action[sl], prev_reward[sl]
        )

    def burnt_in(p):
        return burn_in_state(run, p, state0, back)

    window = batch.obs.shape[0]
    online_state = burnt_in(params)
    learn, state = run(params, back, back + L, online_state)
    ahead, _ = run(params, back + L, window, jax.tree.map(sg, state))
    target, _ = run(target_params, back, window, burnt_in(target_params))
    target = jax.tree.map(lambda x: None if x is None else x[1:], target)
    return Unrolled(learn, jax.tree.map(sg, ahead), jax.tree.map(sg, target))
