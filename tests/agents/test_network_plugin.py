"""`--network module:function` (issue 63: the user's network, torch-ac's `ACModel` and the
Advanced-SAC seed's `--nn`), for every agent: for SAC and TD3 the plug-in's module is the
torso the actor and the critics put their MLPs on, one instance each; for the others the
torso under their heads (or cores); a plug-in that is not a module, or whose output is not
features `[B, F]`, is refused with one line before anything compiles; a run folder records
its name and never imports it."""

import re

import jax
import numpy as np
import pytest

from agents.core.config import ConfigError
from agents.sac import SACConfig
from agents.td3.config import TD3Config
from engine.driver import agent_class
from envs import make_env
from tests.agent_classes import SACAgent, TD3Agent

TINY = dict(num_envs=2, trace_len=4, batch_size=8, buffer_size=2 * 4 * 6, hidden=(8,))
PLUGINS = "tests.agents.network_plugins"


@pytest.mark.parametrize("agent_cls, cfg_cls", [(SACAgent, SACConfig), (TD3Agent, TD3Config)])
def test_the_plugin_is_the_torso_of_the_actor_and_of_the_critics(agent_cls, cfg_cls):
    agent = agent_cls(cfg_cls(**TINY, network=f"{PLUGINS}:tiny"), make_env("Pendulum-v1", 2, 0))
    state = agent.init(jax.random.PRNGKey(0))
    actor, critic = state.learner.params["actor"], state.learner.params["critic"]
    for params in (actor, critic):
        torso = params["params"]["torso"]
        assert jax.tree.map(np.shape, torso) == {
            "Dense_0": {"bias": (16,), "kernel": (3, 16)},
            "Dense_1": {"bias": (16,), "kernel": (16, 16)},
        }
    # one instance each: the actor's and the critics' torsos start from their own weights
    assert not np.array_equal(actor["params"]["torso"]["Dense_0"]["kernel"],
                              critic["params"]["torso"]["Dense_0"]["kernel"])  # fmt: skip
    learner = state.learner
    out = agent.act(True)(agent.acting_params(learner), np.zeros((2, 3), np.float32), None, (),
                          jax.random.PRNGKey(1))[0]  # fmt: skip
    assert out.shape == (2, 1)


@pytest.mark.parametrize(
    "name, needle",
    [
        ("not_a_module", "returned a function, not a flax module"),
        ("wrong_shape", "maps a batch of 2 observations to (2,) float32; expected float features"),
        ("nosuch", "has no function 'nosuch'"),
    ],
)
def test_a_bad_plugin_is_refused_in_one_line(name, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)) as info:
        SACAgent(SACConfig(**TINY, network=f"{PLUGINS}:{name}"), make_env("Pendulum-v1", 2, 0))
    assert "\n" not in str(info.value) and str(info.value).startswith("--network ")


def test_not_with_the_recurrent_cores():
    with pytest.raises(ConfigError, match="--network: not with --recurrent"):
        SACAgent(
            SACConfig(
                **{**TINY, "buffer_size": 2 * 4 * 8},
                recurrent=True,
                seq_len=4,
                burn_in=4,
                network=f"{PLUGINS}:tiny",
            ),
            make_env("Pendulum-v1", 2, 0),
        )


def test_the_docs_minatar_cnn_example_builds_on_minatar():
    """docs/examples/minatar_cnn.py, as docs/agents/sac.md tells it: discrete SAC on gymnax
    Breakout-MinAtar with the example's CNN as its torso."""
    agent = SACAgent(SACConfig(**TINY, network="docs.examples.minatar_cnn:two_convs"),
                     make_env("gymnax/Breakout-MinAtar", 2, 0))  # fmt: skip
    params = agent.init_learner(jax.random.PRNGKey(0)).params["actor"]["params"]["torso"]
    assert set(params) == {"Conv_0", "Conv_1", "Dense_0"}
    assert params["Dense_0"]["kernel"].shape == (5 * 5 * 32, 256)


@pytest.mark.slow
def test_a_run_trained_with_a_plugin_needs_it_given_again(tmp_path, capsys):
    """train -> evaluate -> resume through the command lines: the run folder names the
    plug-in; evaluate and --resume refuse to guess it (one line), and act with it when given."""
    from experiments import evaluate, train

    run = tmp_path / "run"
    plug = f"{PLUGINS}:tiny"
    train.main(["--agent", "sac", "--network", plug, "--total-steps", "600",
                "--start-train-at", "300", "--run-dir", str(run), "--no-progress",
                "--eval-episodes", "1"])  # fmt: skip
    for main, argv in ((evaluate.main, [str(run), "--episodes", "1"]),
                       (train.main, ["--resume", str(run), "--total-steps", "800",
                                     "--no-progress"])):  # fmt: skip
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert f"was trained with --network '{plug}'; give it again" in str(info.value)
        assert "\n" not in str(info.value)
    evaluate.main([str(run), "--episodes", "1", "--network", plug])
    assert "return" in capsys.readouterr().out


@pytest.mark.parametrize("agent", ["ppo", "a2c", "dqn", "pqn", "acer", "r2d1", "reactor"])
def test_the_plugin_is_the_torso_of_the_other_agents(agent):
    """PPO and A2C (its policy and value heads; one instance each without --shared-torso),
    DQN and PQN (their Q head), ACER (its policy and Q heads), R2D1 and the Reactor (before
    their LSTMs) on CartPole with the plug-in as their torso: it builds, acts and its
    parameters are the plug-in's."""
    from agents.core.registry import get_agent

    spec = get_agent(agent)
    cfg = spec.config_cls(num_envs=2, network=f"{PLUGINS}:tiny")
    built = agent_class(spec)(cfg, make_env("CartPole-v1", 2, 0))
    params = built.init_learner(jax.random.PRNGKey(0)).params["params"]
    torsos = {k: v for k, v in params.items() if "torso" in k}
    assert torsos, params.keys()
    for torso in torsos.values():
        assert jax.tree.map(np.shape, torso)["Dense_1"]["kernel"] == (16, 16)
    learner = built.init_learner(jax.random.PRNGKey(0))
    obs, first = np.zeros((2, 4), np.float32), np.ones(2, bool)
    out = built.act(True)(built.acting_params(learner), obs, first, built.initial_core(2),
                          jax.random.PRNGKey(1))[0]  # fmt: skip
    assert out.shape == (2,)
