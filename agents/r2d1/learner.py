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

import jax
import jax.numpy as jnp

from agents.core.learning import TraceBatch, burn_in_state
from agents.dqn.learner import DQNLearner, Unrolled
from networks.cores import previous_inputs

sg = jax.lax.stop_gradient


class R2D1Learner(DQNLearner):
    def init_params(self, key, sample_obs):
        b = sample_obs.shape[0]
        first = jnp.ones((1, b), bool)
        return self.network.init(key, sample_obs[None], first, self.network.initial_state(b))

    def unroll(self, params, target_params, batch: TraceBatch, noise=(None, None)) -> Unrolled:
        del noise  # no NoisyNet layers in R2D1's network
        cfg = self.config
        back, L = cfg.lookback, cfg.learn_len
        state0 = batch.core_state
        # Inputs of window step i: the action and reward of step i − 1.
        prev_action, prev_reward = previous_inputs(state0, batch.action, batch.reward)

        def run(p, start, stop, state):
            sl = slice(start, stop)
            return self.network.apply(
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
