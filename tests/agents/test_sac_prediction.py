"""SAC's prediction model (--prediction, agents/sac/prediction.py) and privileged
observations (--privileged-obs): the gate combines the two gradients as its rule says and
the models step on their own gradient (against hand-computed gradients of linear losses);
no network but the prediction model reads a privileged dimension; an update trains the
models on the env's reward and the target critics' next representation; bad input is one
line."""

from __future__ import annotations

import dataclasses
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from agents.core.config import ConfigError
from agents.sac.agent import networks
from agents.sac.config import SACConfig
from agents.sac.prediction import METRICS, Prediction, PredictionState
from engine.protocol import TrainState
from envs import make_env
from tests.agent_classes import SACAgent

TINY = dict(num_envs=2, trace_len=2, batch_size=4, buffer_size=64, hidden=(8,),
            start_train_at=0)  # fmt: skip
RECURRENT = dict(TINY, batch_size=2, recurrent=True, seq_len=4, burn_in=2, lstm_size=8)


def _prediction():
    spec = types.SimpleNamespace(
        obs_shape=(3,), privileged_obs=(2,), discrete=False, num_actions=None, action_shape=(1,)
    )
    return Prediction(types.SimpleNamespace(hidden=(4,), transition_kl=0.8), spec)


@pytest.mark.parametrize("agree", [True, False])
def test_gated_step_adds_the_models_gradient_to_the_representation_only_if_it_agrees(agree):
    """Linear losses with known gradients: critics' loss a·w + c·v, models' b·w + d·m (w the
    representation, v the heads, m the models). The critics' gradient is a + gate·b on w and
    c on v, gate = [cos(a, b) > 0]; the models step along d."""
    rng = np.random.default_rng(int(agree))
    a, c, d = (jnp.asarray(rng.normal(size=n), jnp.float32) for n in (5, 3, 2))
    b = 0.5 * a + 0.1 if agree else -a + 0.1
    critic = {"params": {"torso": jnp.zeros(5), "members": jnp.zeros(3)}}
    model = {"m": jnp.ones(2)}

    def joint(critic, model):
        p = critic["params"]
        loss, pred = a @ p["torso"] + c @ p["members"], b @ p["torso"] + d @ model["m"]
        return (loss, pred), "aux"

    sgd = optax.sgd(1.0)
    aux, grads, norm, new, metrics = _prediction().gated_step(
        joint, critic, PredictionState(model, sgd.init(model)), sgd, None
    )
    cos = float(a @ b / (jnp.linalg.norm(a) * jnp.linalg.norm(b)))
    assert aux == "aux" and (cos > 0) == agree
    assert float(metrics["gate"]) == float(agree)
    np.testing.assert_allclose(float(metrics["grad_cosine"]), cos, rtol=1e-5)
    want_w = a + b if agree else a
    np.testing.assert_allclose(np.asarray(grads["params"]["torso"]), want_w, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(grads["params"]["members"]), np.asarray(c))
    np.testing.assert_allclose(float(norm), np.linalg.norm(np.r_[want_w, c]), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(new.params["m"]), 1.0 - np.asarray(d), rtol=1e-6)


@pytest.fixture(scope="module")
def pendulum():
    env = make_env("Pendulum-v1", 2, 0, privileged_obs=(2,))
    yield env
    env.close()


@pytest.mark.parametrize("recurrent", [False, True])
def test_no_network_but_the_models_reads_a_privileged_dimension(pendulum, recurrent):
    spec = pendulum.spec
    assert spec.privileged_obs == (2,) and spec.visible_obs == (0, 1)
    cfg = SACConfig(**(RECURRENT if recurrent else TINY), prediction=True)
    actor, critic = networks(cfg, spec)
    obs = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)), jnp.float32)
    moved = obs.at[:, 2].add(5.0)  # only the privileged dimension changes
    action = jnp.zeros((3, 1))
    if recurrent:
        from networks.sac import RecurrentSACState

        core = RecurrentSACState.zeros(3, cfg.lstm_size, 1, False)
        first = jnp.ones((1, 3), bool)
        p_a = actor.init(jax.random.PRNGKey(0), obs[None], first, core.actor)
        p_c = critic.init(jax.random.PRNGKey(1), obs[None], first, core.critic, action[None])

        def outputs(x):
            out, s = actor.apply(p_a, x[None], first, core.actor)
            q, t = critic.apply(p_c, x[None], first, core.critic, action[None])
            return [*out, s, q, t]
    else:
        p_a = actor.init(jax.random.PRNGKey(0), obs)
        p_c = critic.init(jax.random.PRNGKey(1), obs, action)

        def outputs(x):
            return [*actor.apply(p_a, x), critic.apply(p_c, x, action)]

    for x, y in zip(jax.tree.leaves(outputs(obs)), jax.tree.leaves(outputs(moved)), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    shifted = obs.at[:, 0].add(5.0)  # a visible dimension does change them
    assert not np.array_equal(np.asarray(outputs(obs)[0]), np.asarray(outputs(shifted)[0]))
    model = Prediction(cfg, spec)
    states = jnp.ones((3, 5))
    pred = model.init(jax.random.PRNGKey(2), states, obs, optax.sgd(1.0))
    out = model.model.apply(pred.params, states, model.extra(obs), action)
    out_moved = model.model.apply(pred.params, states, model.extra(moved), action)
    assert not np.array_equal(np.asarray(out.mean), np.asarray(out_moved.mean))


@pytest.mark.slow
@pytest.mark.parametrize("recurrent", [False, True])
def test_an_update_trains_the_models_on_env_rewards_and_next_representations(
    recurrent, monkeypatch
):
    """One update, run eagerly: the models' reward target is the env's reward (not the
    reward with RND's bonus, which the critics' targets get), their next-state target the
    target critics' representation of the next observation (recomputed here independently:
    feed-forward, the target torso at step 1; recurrent, the target core unrolled over the
    whole window from its stored state), and every model parameter moves."""
    env = make_env("Pendulum-v1", 2, 0)
    cfg = SACConfig(**(RECURRENT if recurrent else TINY), prediction=True, rnd_coef=0.5)
    agent = SACAgent(cfg, env)
    assert agent.metric_names[-len(METRICS) - 2 : -2] == METRICS  # then RND's two
    state = agent.init(jax.random.PRNGKey(0))
    learner, replay, actor = state.learner, state.replay, state.actor
    for _ in range(6):
        actor, traj, _ = agent.collect(TrainState(learner, replay, actor))
        learner, replay, _ = jax.jit(agent.absorb)(learner, replay, traj)
    seen = {}
    loss = Prediction.loss

    def recording(self, params, states, obs, action, reward, next_states, mask):
        seen.update(reward=reward, next_states=next_states)
        return loss(self, params, states, obs, action, reward, next_states, mask)

    monkeypatch.setattr(Prediction, "loss", recording)
    sac, out = agent.modules.learner, {}
    update = sac.update

    def recorded(state, batch, *args):
        result = update(state, batch, *args)
        out.update(batch=batch, new=result[0], metrics=result[1])
        return result

    monkeypatch.setattr(sac, "update", recorded)
    # One update as the agent runs it (sample, RND's bonus, learn), eagerly: values, not tracers.
    agent.parts.replay.step(agent.replay, replay, learner, 2, types.SimpleNamespace(values=None))
    batch, new, metrics = out["batch"], out["new"], out["metrics"]
    b, L = (cfg.burn_in, cfg.seq_len) if recurrent else (0, 1)
    env_reward = np.asarray(batch.env_reward)[b : b + L]
    np.testing.assert_array_equal(np.asarray(seen["reward"]), env_reward)
    assert not np.allclose(np.asarray(batch.reward)[b : b + L], env_reward)  # a bonus there
    target = learner.target_critic
    if recurrent:
        from networks.cores import previous_inputs

        prev_a, prev_r = previous_inputs(batch.core_state.actor, batch.action, batch.env_reward)
        n = b + L + 1
        feats, _ = sac.critic.apply(
            target, batch.obs[:n], batch.first[:n], batch.core_state.critic, prev_a[:n],
            prev_r[:n], method="unroll",
        )  # fmt: skip
        want = feats[b + 1 : b + L + 1]
    else:
        want = sac.critic.apply(target, batch.obs[1], method="represent")[None]
    np.testing.assert_allclose(np.asarray(seen["next_states"]), np.asarray(want), atol=1e-5)
    for name in METRICS:
        assert np.isfinite(float(metrics[name])), name
    assert float(metrics["gate"]) in (0.0, 1.0)
    moved = jax.tree.map(
        lambda a, b: bool(np.any(a != b)), new.prediction.params, learner.prediction.params
    )
    assert all(jax.tree.leaves(moved))
    env.close()


def test_a_restart_from_new_weights_restarts_the_models_optimiser_not_their_weights(pendulum):
    """CEM's restart of a member (`reset_params`): the models' weights kept, their Adam
    state fresh (count 0, moments 0), as every other optimiser's."""
    cfg = SACConfig(**TINY, prediction=True)
    sac = SACAgent(cfg, pendulum).modules.learner
    state = sac.init(jax.random.PRNGKey(0), jnp.zeros((2, 3), jnp.float32))
    worn = jax.tree.map(lambda x: x + 1, state.prediction.opt_state)  # as after some steps
    state = state._replace(prediction=state.prediction._replace(opt_state=worn))
    new_params = jax.tree.map(lambda x: x + 0.5, state.params)
    reset = sac.reset_params(state, new_params)
    same = jax.tree.map(np.array_equal, reset.prediction.params, state.prediction.params)
    assert all(jax.tree.leaves(same))
    for leaf in jax.tree.leaves(reset.prediction.opt_state):
        np.testing.assert_array_equal(np.asarray(leaf), 0)
    assert jax.tree.structure(reset.prediction.opt_state) == jax.tree.structure(worn)


def test_flags_are_refused_where_they_do_not_apply(pendulum):
    with pytest.raises(ValueError, match=r"--transition-kl needs --prediction"):
        SACConfig(**TINY, transition_kl=0.5)
    with pytest.raises(ValueError, match=r"--transition-kl must be >= 0"):
        SACConfig(**TINY, prediction=True, transition_kl=-1.0)
    with pytest.raises(ConfigError, match=r"--rnd-coef: not with --privileged-obs"):
        SACAgent(SACConfig(**TINY, rnd_coef=0.1), pendulum)
    from agents.td3 import TD3Config
    from tests.agent_classes import TD3Agent

    with pytest.raises(ValueError, match=r"td3 does not keep privileged observation dimensions"):
        TD3Agent(TD3Config(num_envs=2), pendulum)  # in Python, not only at the command line
    minatar = make_env("gymnax/Breakout-MinAtar", 2, 0)
    with pytest.raises(ConfigError, match=r"--prediction reconstructs vector observations"):
        SACAgent(SACConfig(**TINY, prediction=True), minatar)
    spec = make_env("CartPole-v1", 1, 0).spec
    for dims, message in (((4,), r"dimensions 0 \.\. 3"), ((0, 1, 2, 3), "hides all 4")):
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(spec, privileged_obs=dims)
    with pytest.raises(ValueError, match="needs vector observations"):
        dataclasses.replace(minatar.spec, privileged_obs=(0,))
