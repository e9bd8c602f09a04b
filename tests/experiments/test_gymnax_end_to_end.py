"""Every registered agent on the gymnax backend (JAX-native envs stepped on the device), at
tiny sizes: train with a checkpoint, resume, evaluate, through the command line's entry
points in this process. The cases are `test_every_agent_end_to_end`'s command lines with the
env ids moved to gymnax, plus MinAtar (flattened for the MLP agents, the MinAtar CNN for
ACER). All are the slow tier's; the fast tier trains one tiny gymnax run (the video tests')."""

from __future__ import annotations

import shutil

import pytest
import test_every_agent_end_to_end as base  # its functions, not collected again here

from agents.core.registry import agent_names

GYMNAX = {"CartPole-v1": "gymnax/CartPole-v1", "CartPole-P-v1": "gymnax/CartPole-v1",
          "Pendulum-v1": "gymnax/Pendulum-v1"}  # fmt: skip


def _on_gymnax(flags: str) -> str:
    argv = flags.split()
    if "--env" not in argv:
        argv += ["--env", "CartPole-v1"]
    i = argv.index("--env") + 1
    argv[i] = GYMNAX[argv[i]]
    return " ".join(argv)


CASES_GYMNAX = {f"gymnax-{k}": (_on_gymnax(f), a, b) for k, (f, a, b) in base.CASES.items()}
CASES_GYMNAX.update({
    "minatar-dqn-flat": (
        "--agent dqn --env gymnax/Breakout-MinAtar --flatten-obs --num-envs 4 --trace-len 2"
        " --batch-size 4 --buffer-size 400 --start-train-at 16 --hidden 8", 32, 64),
    "minatar-ppo-flat": (
        "--agent ppo --env gymnax/Breakout-MinAtar --flatten-obs --num-envs 4 --trace-len 8",
        32, 64),
    "minatar-acer-cnn": (
        "--agent acer --env gymnax/Breakout-MinAtar --num-envs 2 --trace-len 5 --batch-size 2"
        " --buffer-size 100", 20, 40),
    "minatar-a2c-cnn": (
        "--agent a2c --env gymnax/Asterix-MinAtar --num-envs 4 --trace-len 4", 16, 32),
    "minatar-r2d1-cnn": (
        "--agent r2d1 --env gymnax/Freeway-MinAtar --num-envs 4 --trace-len 2 --seq-len 2"
        " --burn-in 2 --n-step 2 --batch-size 4 --buffer-size 400 --start-train-at 16"
        " --lstm-size 8", 32, 64),
    "minatar-reactor-cnn": (
        "--agent reactor --env gymnax/SpaceInvaders-MinAtar --lstm-size 8 --start-train-at 0"
        " --num-envs 4 --trace-len 5 --batch-size 4 --buffer-size 400 --no-decoupled", 40, 80),
    "minatar-pqn-cnn": (
        "--agent pqn --env gymnax/Breakout-MinAtar --num-envs 4 --trace-len 4"
        " --num-minibatches 2", 16, 32),
    "minatar-sac-flat": (
        "--agent sac --env gymnax/Seaquest-MinAtar --flatten-obs --num-envs 2 --trace-len 4"
        " --batch-size 8 --buffer-size 400 --hidden 8 --start-train-at 8", 16, 32),
})  # fmt: skip
# Agents with no MinAtar case, and why (MinAtar's actions are discrete).
NO_MINATAR = {"td3": "td3 needs continuous actions"}
FAST: set[str] = set()  # the fast tier trains on gymnax in the video tests below


def _agent(case: str) -> str:
    argv = CASES_GYMNAX[case][0].split()
    return argv[argv.index("--agent") + 1] if "--agent" in argv else "acer"


def test_every_agent_has_a_gymnax_case():
    assert {_agent(c) for c in CASES_GYMNAX} == set(agent_names())
    minatar = {_agent(c) for c in CASES_GYMNAX if "MinAtar" in CASES_GYMNAX[c][0]}
    assert minatar == set(agent_names()) - set(NO_MINATAR)


@pytest.mark.parametrize("agent", sorted(NO_MINATAR))
def test_an_agent_without_minatar_is_refused_in_one_line(tmp_path, agent):
    from experiments import train

    argv = ["--agent", agent, "--env", "gymnax/Breakout-MinAtar", "--run-dir", str(tmp_path)]
    with pytest.raises(SystemExit, match=NO_MINATAR[agent]) as err:
        train.main([*argv, "--no-progress"])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=[pytest.mark.slow] * (c not in FAST)) for c in sorted(CASES_GYMNAX)],
)
def test_train_resume_evaluate_on_gymnax(tmp_path, case, monkeypatch):
    monkeypatch.setitem(base.CASES, case, CASES_GYMNAX[case])
    base.test_train_resume_evaluate_in_process(tmp_path, case, monkeypatch)


def _video(run_dir, env_id):
    """Train PPO on `env_id` for 16 steps, record a gif; (evaluate's result, its frames)."""
    import imageio.v2 as imageio

    from experiments import evaluate, train

    flags = f"--agent ppo --env {env_id} --num-envs 2 --trace-len 8 --eval-episodes 0"
    flags += " --num-devices 1"
    train.main([*flags.split(), "--total-steps", "16", "--run-dir", str(run_dir), "--no-progress"])
    out = evaluate.main([str(run_dir), "--episodes", "1", "--video", "--video-format", "gif"])
    assert out["video"] == str(run_dir / "videos" / "eval.gif")
    return out, imageio.mimread(out["video"])


@pytest.fixture(scope="module")
def gymnax_video(tmp_path_factory):
    """`_video` of gymnax/CartPole-v1, once for the module: (run folder, evaluate's result,
    the gif's frames). A test that writes into the run folder copies it first."""
    run_dir = tmp_path_factory.mktemp("gymnax-video") / "run"
    return (run_dir, *_video(run_dir, "gymnax/CartPole-v1"))


def test_video_of_a_gymnax_run(tmp_path, gymnax_video):
    """evaluate --video on gymnax: frames drawn from the observations (envs/gymnax_render.py);
    an env without a renderer is refused in one line before anything is built."""
    from experiments import evaluate

    shared, _, frames = gymnax_video
    run_dir = tmp_path / "run"
    shutil.copytree(shared, run_dir)  # its config.json is rewritten below
    assert 2 <= len(frames) <= 500 and frames[0].shape[:2] == (400, 600)  # gymnasium's size
    assert any((f != frames[0]).any() for f in frames[1:])  # the pole moves
    config = run_dir / "config.json"
    config.write_text(config.read_text().replace("gymnax/CartPole-v1", "gymnax/Catch-bsuite"))
    with pytest.raises(SystemExit, match="--video: gymnax/Catch-bsuite has no renderer here"):
        evaluate.main([str(run_dir), "--episodes", "1", "--video"])


def test_a_video_writer_error_is_one_line(tmp_path, monkeypatch, gymnax_video):
    """imageio's errors (ffmpeg's) span lines; evaluate reports one, naming the file."""
    import imageio.v2 as imageio

    from experiments import evaluate

    run_dir = tmp_path / "run"
    shutil.copytree(gymnax_video[0], run_dir)  # the gymnax run, its video written once

    def fail(*args, **kwargs):  # the cause first, then a long command line, as imageio-ffmpeg
        raise ValueError("ffmpeg exited:\n  Unknown encoder\n\t'libx264'\n" + "-arg " * 200)

    monkeypatch.setattr(imageio, "mimsave", fail)
    with pytest.raises(SystemExit) as err:
        evaluate.main([str(run_dir), "--episodes", "1", "--video", "--video-format", "gif"])
    where = run_dir / "videos" / "eval.gif"
    head = f"error: cannot write {where}: ffmpeg exited: Unknown encoder 'libx264' -arg -arg"
    message = str(err.value)
    assert message.startswith(head) and message.endswith("...") and "\n" not in message
    assert len(message) <= len(f"error: cannot write {where}: ") + 300


def test_video_through_gymnasium_of_an_envpool_run(tmp_path):
    """The other path: a gymnasium render env whose raw observations reach the agent through
    its env's `convert_obs` (envs.VecEnv)."""
    _, frames = _video(tmp_path / "run", "CartPole-v1")
    assert 2 <= len(frames) <= 501 and frames[0].shape[:2] == (400, 600)
    assert any((f != frames[0]).any() for f in frames[1:])  # the pole moves
