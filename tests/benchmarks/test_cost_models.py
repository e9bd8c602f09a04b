"""The agents' cost models (benchmarks.costs.COST_MODELS, data only) and the
benchmark's timed passes built from them (benchmarks.bench_throughput.timed_pass): every
part runs at a small batch, a training part really changes the parameters it is given, and
the passes per env step are the formulas the agents' docstrings state, recomputed here from
the config."""

import jax
import numpy as np
import pytest

from benchmarks.bench_throughput import timed_pass
from benchmarks.costs import COST_MODELS, NetworkCost
from engine.common import make_agent

CASES = {
    "acer": ("CartPole-v1", {"num_envs": 2, "trace_len": 5, "replay_ratio": 3.0}),
    "dqn": ("CartPole-v1", {"num_envs": 2, "batch_size": 4}),
    "ppo": ("CartPole-v1", {"num_envs": 2, "trace_len": 8, "epochs": 3}),
    "sac": ("Pendulum-v1", {"num_envs": 2, "batch_size": 4, "hidden": (8,)}),
}


def _changed(before, after) -> bool:
    pairs = zip(jax.tree.leaves(before), jax.tree.leaves(after), strict=True)
    return any(not np.allclose(a, b) for a, b in pairs)


@pytest.fixture(scope="module", params=sorted(CASES))
def costs(request):
    env, overrides = CASES[request.param]
    agent = make_agent(request.param, env, **overrides)
    try:
        yield request.param, agent.config, COST_MODELS[request.param](agent)
    finally:
        agent.close()


def test_every_part_runs_and_training_parts_learn(costs):
    _, _, model = costs
    assert model and all(isinstance(c, NetworkCost) for c in model.values())
    for name, cost in model.items():
        fn, args = timed_pass(cost)(3)
        out = jax.block_until_ready(fn(*args))
        if cost.optimizer is None:
            # a forward pass: outputs with the batch axis first
            assert all(x.shape[0] == 3 for x in jax.tree.leaves(out) if x.ndim), name
        else:
            new_params, _ = out
            assert _changed(cost.params, new_params), f"{name}: the step did not move params"
        assert cost.passes > 0, name


def test_passes_per_env_step_follow_the_config(costs):
    agent, cfg, model = costs
    passes = {name: c.passes for name, c in model.items()}
    if agent == "acer":
        train = (1 + cfg.replay_ratio) * (cfg.trace_len + 1) / cfg.trace_len
        fwd = 1 + (train if cfg.trust_region else 0)
        assert passes == pytest.approx({"forward": fwd, "forward+backward+adam": train})
    elif agent == "dqn":
        per_update = cfg.replay_ratio / (cfg.batch_size * cfg.learn_len)
        b, L, n = cfg.batch_size, cfg.learn_len, cfg.n_step
        expected = {
            "forward": 1 + per_update * b * (n + L + n - 1),
            "forward+backward+adam": per_update * b * L,
        }
        assert passes == pytest.approx(expected)
    elif agent == "ppo":
        expected = {"forward": 1 + 1 / cfg.trace_len, "forward+backward+adam": cfg.epochs}
        assert passes == pytest.approx(expected)
    else:
        per_step = cfg.update_to_data * cfg.batch_size
        assert passes == pytest.approx(
            {
                "act forward": 1.0,
                "target forward": per_step * cfg.n_step,
                "critic step": per_step,
                "actor step": per_step / cfg.policy_delay,
            }
        )
