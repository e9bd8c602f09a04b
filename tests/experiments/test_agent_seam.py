"""The seam between agents and experiments: a toy agent defined here, registered through
the public registry and implementing the protocol from scratch (no AgentBase), runs through
experiments.train -> resume -> evaluate with no change to experiments/."""

from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.core.registry import AgentSpec, register, unregister
from engine.protocol import Acting, ChunkOutput, Member, OneMember, TrainState
from experiments import evaluate, train


@dataclass(frozen=True)
class ToyConfig:
    """A bandit-style learner over a random-action CartPole policy."""

    num_envs: int = 4
    """Parallel environments."""
    trace_len: int = 5
    """Steps per iteration and env."""
    lr: float = 0.1
    """Step size of the preference update."""


class ToyLearner(NamedTuple):
    params: Any  # {"w": [A] action preferences}
    step: jax.Array


class ToyAgent(OneMember):
    """Implements engine.protocol.Agent directly (`OneMember` is the protocol's own
    members view of a single agent): host-stepped envs, softmax over preferences, an update
    that moves the preferences towards rewarded actions."""

    metric_names = ("loss", "entropy")
    mesh = None
    num_devices = 1
    bytes_per_transition = 0.0
    max_chunk = 1  # one iteration per host sync
    host_driven = "the toy steps its envs on the host"
    supports_population = False  # --num-seeds > 1 is refused in one line
    tunable: ClassVar[dict] = {}

    def __init__(self, config: ToyConfig, env, *, seed: int = 0, mesh=None):
        self.config, self.env, self.seed = config, env, seed
        self.steps_per_iteration = config.trace_len * config.num_envs
        self._update = None

    core_feedback = None

    @classmethod
    def acting(cls, config, env, *, seed=0):
        agent = cls(dataclasses.replace(config, num_envs=env.spec.num_envs), env, seed=seed)
        return Acting(agent.act, agent.acting_params, agent.initial_core, agent.init_learner)

    def init_learner(self, key):
        return ToyLearner({"w": jnp.zeros(self.env.spec.num_actions)}, jnp.zeros((), jnp.int32))

    def reset_actor(self, state, key):
        ts, n = self.env.reset(), self.config.num_envs
        actor = {"obs": ts.obs, "ret": np.zeros(n), "len": np.zeros(n), "key": key}
        return state._replace(actor=actor)

    def init(self, key, *, jit=False):  # nothing to compile in this learner
        state = TrainState(self.init_learner(key), (), None)
        return self.reset_actor(state, key)

    def compile(self, state) -> float:
        def update(learner, counts):
            pi = jax.nn.softmax(learner.params["w"])
            target = counts / jnp.maximum(counts.sum(), 1.0)
            loss = jnp.sum((pi - target) ** 2)
            w = learner.params["w"] + self.config.lr * (target - pi)
            entropy = -jnp.sum(pi * jnp.log(pi))
            return ToyLearner({"w": w}, learner.step + 1), {"loss": loss, "entropy": entropy}

        self._update = jax.jit(update)
        return 0.0

    def train_chunk(self, state, iteration, env_steps, count):
        assert count == 1
        cfg, actor = self.config, dict(state.actor)
        key, sub = jax.random.split(actor["key"])
        T, B = cfg.trace_len, cfg.num_envs
        actions = np.asarray(
            jax.random.categorical(sub, state.learner.params["w"], shape=(T, B)), np.int32
        )
        fin_ret, fin_len, over = np.zeros((T, B)), np.zeros((T, B)), np.zeros((T, B), bool)
        counts = np.zeros(self.env.spec.num_actions)
        for t in range(T):
            ts = self.env.step(actions[t])
            actor["ret"] += ts.raw_reward
            actor["len"] += ~ts.first
            np.add.at(counts, actions[t], ts.reward)
            over[t] = ts.game_over
            fin_ret[t] = np.where(ts.game_over, actor["ret"], 0.0)
            fin_len[t] = np.where(ts.game_over, actor["len"], 0)
            actor["ret"][ts.game_over], actor["len"][ts.game_over] = 0.0, 0
        learner, metrics = self._update(state.learner, jnp.asarray(counts, jnp.float32))
        actor["key"] = key
        one = [np.asarray(x)[None] for x in (fin_ret, fin_len, over)]
        sums = {k: jnp.reshape(v, (1,)) for k, v in metrics.items()}
        out = ChunkOutput(sums, np.ones((1,), np.int32), *one)
        return TrainState(learner, (), actor), out

    def act(self, greedy):
        def act(params, obs, first, core, key):
            b = obs.shape[0]
            if greedy:
                return jnp.full((b,), jnp.argmax(params["w"]), jnp.int32), core
            return jax.random.categorical(key, params["w"], shape=(b,)).astype(jnp.int32), core

        return jax.jit(act)

    def initial_core(self, num_envs):
        return ()

    def acting_params(self, learner):
        return learner.params

    def close(self):
        pass


@pytest.fixture
def toy():
    spec = register(
        AgentSpec(
            name="toy",
            config_cls=ToyConfig,
            make=ToyAgent,  # a class that implements the protocol itself
            presets={"toy-quick": {"total_steps": 60, "lr": 0.2}},
            default_preset="toy-quick",
            description="a test agent",
        ),
        replace=True,
    )
    yield spec
    unregister("toy")


def _rows(run_dir):
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_toy_agent_trains_resumes_and_evaluates(toy, tmp_path):
    run_dir = tmp_path / "toy"
    common = ["--agent", "toy", "--run-dir", str(run_dir), "--no-progress"]
    summary = train.main([*common, "--checkpoint-every", "40", "--eval-episodes", "2"])
    assert summary["agent"] == "toy" and summary["env_steps"] == 60
    assert summary["eval_episodes"] == 2
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["agent"] == "toy" and saved["agent_config"] == {
        "num_envs": 4, "trace_len": 5, "lr": 0.2,
    }  # fmt: skip
    rows = _rows(run_dir)
    assert [int(r["env_steps"]) for r in rows] == [20, 40, 60]
    assert {"loss", "entropy"} <= set(rows[0])  # the agent's metric_names are columns
    assert all(float(r["loss"]) >= 0 for r in rows)

    summary = train.main(["--resume", str(run_dir), "--total-steps", "100", "--no-progress"])
    assert summary["env_steps"] == 100
    steps = [int(r["env_steps"]) for r in _rows(run_dir)]
    assert steps == [20, 40, 60, 80, 100]

    result = evaluate.main([str(run_dir), "--episodes", "2", "--greedy"])
    assert result["checkpoint_step"] == 100 and result["episodes"] == 2


def test_toy_agent_satisfies_the_protocol(toy):
    from envs import make_env

    agent = ToyAgent(ToyConfig(), make_env("CartPole-v1", 4, 0))
    assert isinstance(agent, Member) and agent.members == [agent]


def test_flags_of_another_agent_are_errors_naming_both(toy, tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        train.main(["--agent", "toy", "--replay-ratio", "2", "--run-dir", str(tmp_path)])
    assert "--replay-ratio does not apply to --agent toy" in str(err.value)
    assert "--agent acer" in str(err.value)
    with pytest.raises(SystemExit) as err:
        train.main(["--agent", "reactor", "--trust-region-delta", "2"])
    assert "does not apply to --agent reactor" in str(err.value)
    with pytest.raises(SystemExit) as err:
        train.main(["--agent", "dqnn"])
    assert "unknown agent 'dqnn'" in str(err.value) and "acer" in str(err.value)
