"""Every registered agent, at tiny sizes, through the command line's own entry points in this
process: train (with a checkpoint), resume to a larger budget, evaluate the checkpoint.

This is the fast tier's end-to-end check (docs/tests.md). The same chain as separate
processes, which also shows what only a fresh interpreter can (each process compiles and
imports for itself), is the slow tier's `test_train_resume_evaluate*` of each agent's own
test file.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from agents.core.registry import agent_names
from engine.checkpoint import Checkpointer
from engine.common import checkpoint_tree
from engine.driver import PartsAgent
from experiments import evaluate, train

# One tiny command line per registered agent (a case per action space where the agent has
# both), and the total steps of the first run and after the resume: whole iterations each.
CASES = {
    "acer": ("--num-envs 4 --trace-len 5 --batch-size 4 --buffer-size 400", 40, 80),
    "acer-continuous": (
        "--agent acer --env Pendulum-v1 --num-envs 2 --trace-len 5 --batch-size 2"
        " --buffer-size 60 --hidden 8 --sdn-samples 2 --replay-ratio 1",
        20,
        40,
    ),
    "reactor": (
        "--agent reactor --lstm-size 8 --start-train-at 0 --num-envs 4 --trace-len 5"
        " --batch-size 4 --buffer-size 400",
        40,
        80,
    ),
    "dqn": (
        "--agent dqn --num-envs 4 --trace-len 2 --batch-size 4 --buffer-size 400"
        " --start-train-at 16 --hidden 8 --prioritized --distributional",
        32,
        64,
    ),
    "r2d1": (
        "--agent r2d1 --env CartPole-P-v1 --num-envs 4 --trace-len 2 --seq-len 2 --burn-in 2"
        " --n-step 2 --batch-size 4 --buffer-size 400 --start-train-at 16 --hidden 8"
        " --lstm-size 8",
        32,
        64,
    ),
    "ppo": ("--agent ppo --num-envs 4 --trace-len 8 --normalize-obs", 32, 64),
    "pqn": ("--agent pqn --num-envs 4 --trace-len 8 --hidden 8 --num-minibatches 2", 32, 64),
    "a2c": ("--agent a2c --num-envs 4 --trace-len 8", 32, 64),
    "sac": (
        "--agent sac --env Pendulum-v1 --num-envs 2 --trace-len 4 --batch-size 8"
        " --buffer-size 400 --hidden 8 --start-train-at 8",
        16,
        32,
    ),
    "sac-discrete": (
        "--agent sac --env CartPole-v1 --num-envs 2 --trace-len 4 --batch-size 8"
        " --buffer-size 400 --hidden 8 --start-train-at 8",
        16,
        32,
    ),
    "td3": (
        "--agent td3 --env Pendulum-v1 --num-envs 2 --trace-len 4 --batch-size 8"
        " --buffer-size 400 --hidden 8 --start-train-at 8",
        16,
        32,
    ),
}


def _agent(case: str) -> str:
    argv = CASES[case][0].split()
    return argv[argv.index("--agent") + 1] if "--agent" in argv else "acer"


def test_every_registered_agent_has_a_case():
    """Registering an agent without adding it here fails: the fast tier covers every agent."""
    assert {_agent(case) for case in CASES} == set(agent_names())


def _env_steps(run_dir: Path) -> list[int]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return [int(row["env_steps"]) for row in csv.DictReader(f)]


# The second action space of ACER and SAC is the slow tier's: one case per agent is fast.
SLOW_CASES = {"acer-continuous", "sac-discrete"}


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=[pytest.mark.slow] * (c in SLOW_CASES)) for c in sorted(CASES)]
)
def test_train_resume_evaluate_in_process(tmp_path, case, monkeypatch):
    """Train to a checkpoint, resume to a larger budget, evaluate. The resumed learner is the
    saved one, every array of it (a resume that re-initialised the learner, or restored
    another step, fails here), and the run had learnt something before it was saved."""
    flags, first, total = CASES[case]
    run_dir = tmp_path / case
    common = f"--run-dir {run_dir} --no-progress --eval-episodes 0 --num-devices 1".split()
    steps = ["--total-steps", str(first), "--checkpoint-every", str(first)]
    saved_trees, compiled = [], []
    save = Checkpointer.save

    def spy_save(self, step, state, *args, **kwargs):
        saved_trees.append(jax.device_get(state))
        return save(self, step, state, *args, **kwargs)

    def spy(compile_):
        def spy_compile(self, state):
            compiled.append(jax.device_get(checkpoint_tree(state.learner)))
            return compile_(self, state)

        return spy_compile

    monkeypatch.setattr(Checkpointer, "save", spy_save)
    monkeypatch.setattr(PartsAgent, "compile", spy(PartsAgent.compile))
    summary = train.main([*flags.split(), *common, *steps])
    assert summary["agent"] == _agent(case) and summary["env_steps"] == first
    saved = json.loads((run_dir / "summary.json").read_text())
    assert saved["env_steps"] == first and saved["eval_episodes"] == 0
    assert [int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()] == [first]
    before = _env_steps(run_dir)
    assert before[-1] == first

    resumed = train.main(["--resume", str(run_dir), "--total-steps", str(total), "--no-progress"])
    assert resumed["env_steps"] == total
    initial, restored = compiled  # the first run's fresh learner, the resume's restored one
    same = jax.tree.map(np.array_equal, restored, saved_trees[0])
    assert all(jax.tree.leaves(same)), "the resumed learner is not the saved one"
    params = [tree["learner"]["params"] for tree in (initial, restored)]
    moved = jax.tree.map(np.array_equal, *params)
    assert not all(jax.tree.leaves(moved)), "the first run never changed its params"
    after = _env_steps(run_dir)
    assert after[: len(before)] == before and after[-1] == total  # continued, no duplicates
    assert after == sorted(set(after))

    # Evaluation builds the actor alone (`Agent.acting`): no agent, so no replay, rollout or
    # update program, whose sizes the 2 evaluation envs would not fit.
    def no_agent(*args, **kwargs):
        raise AssertionError("evaluate built a whole agent")

    monkeypatch.setattr(PartsAgent, "__init__", no_agent)
    out = tmp_path / "eval.json"
    result = evaluate.main([str(run_dir), "--episodes", "2", "--num-envs", "2", "--out", str(out)])
    assert result["episodes"] == 2 and result["checkpoint_step"] == total
    assert json.loads(out.read_text())["episodes"] == 2


@pytest.fixture(scope="module")
def r2d1_run(tmp_path_factory):
    """`r2d1_run(clip)`: the folder of one R2D1 run (the "r2d1" case's command line, its first
    budget) trained with `--reward-clip clip`, trained once for the module on first use. The
    tests only evaluate from it; one that writes into it (a video) copies it first."""
    runs = {}

    def run(clip: bool) -> Path:
        if clip not in runs:
            flags, first, _ = CASES["r2d1"]
            run_dir = tmp_path_factory.mktemp("r2d1") / f"reward-clip-{clip}"
            train.main(
                [*flags.split(), "--reward-clip", str(clip), "--run-dir", str(run_dir),
                 "--no-progress", "--eval-episodes", "0", "--num-devices", "1",
                 "--total-steps", str(first)]
            )  # fmt: skip
            runs[clip] = run_dir
        return runs[clip]

    return run


@pytest.mark.parametrize("clip", [True, False])
def test_evaluate_feeds_a_core_rewards_clipped_as_its_training_was(r2d1_run, clip, monkeypatch):
    """R2D1's core takes the previous reward as an input: `evaluate` feeds it back clipped
    to [-1, 1] exactly when the run's training env clipped it (--reward-clip here; Atari by
    default), though its own evaluation env never clips."""
    run_dir = r2d1_run(clip)
    seen = []
    real = evaluate.eval_feedback

    def spy(feedback, reward_clip):
        seen.append((feedback is not None, reward_clip))
        return real(feedback, reward_clip)

    monkeypatch.setattr(evaluate, "eval_feedback", spy)
    evaluate.main([str(run_dir), "--episodes", "1", "--num-envs", "1"])
    assert seen == [(True, clip)]


def test_a_video_feeds_a_recurrent_core_back_on_a_partially_observed_env(
    tmp_path, r2d1_run, monkeypatch
):
    """`evaluate --video` on a gymnasium-rendered env (CartPole-P-v1: rendered from its full
    env, observed through its subset) steps R2D1's core with the action and reward after
    every step, as the evaluation does. The run is the one trained with --reward-clip False,
    as CartPole's training is by default; copied, since the video is written into it."""
    run_dir = tmp_path / "r2d1"
    shutil.copytree(r2d1_run(False), run_dir)
    calls = []
    real = evaluate.eval_feedback

    def counted(feedback, reward_clip):
        inner = real(feedback, reward_clip)

        def fed(core, action, reward):
            calls.append(1)
            return inner(core, action, reward)

        return fed

    monkeypatch.setattr(evaluate, "eval_feedback", counted)
    out = evaluate.main([str(run_dir), "--episodes", "1", "--video", "--video-format", "gif"])
    assert out["video"].endswith("eval.gif") and (run_dir / "videos" / "eval.gif").is_file()
    # the evaluation's episode, then the video's (at least one step)
    assert len(calls) > out["length_mean"]
