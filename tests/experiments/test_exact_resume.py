"""--exact-resume: a run stopped at a checkpoint and resumed is the same experiment, bit for
bit, as one that never stopped (learner, replay, env states, episodes, RNG keys and the
logged metrics), on the gymnax backend; without the flag the resumed run differs (so the
comparison can fail). Refusals are one line, before anything is built.

Runs are module fixtures (`dqn_run`), trained once where two tests need the same one (the
48-step exact run: the exact resume's first part and the damaged-windows case). The straight
runs are not shared because no two fast tests need the same one: with and without the flag
are different experiments, each compared with its own resumed twin."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import numpy as np
import orbax.checkpoint as ocp
import pytest

from experiments import evaluate, train

DQN = (
    "--agent dqn --env gymnax/CartPole-v1 --num-envs 4 --trace-len 2 --batch-size 4"
    " --buffer-size 400 --start-train-at 16 --hidden 8 --prioritized"
)
PPO_PBT = (
    "--agent ppo --env gymnax/CartPole-v1 --num-envs 2 --trace-len 8 --num-seeds 2"
    " --evolve pbt --evolve-every 32 --evolve-fraction 0.5"
)
# Columns that time the run rather than describe what it learnt.
TIMING = {"sps", "wall_s"}


def _common(run_dir: Path) -> list[str]:
    return [
        "--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "0",
        "--iterations-per-sync", "1", "--checkpoint-every", "48", "--num-devices", "1",
    ]  # fmt: skip


def _arrays(run_dir: Path, step: int) -> dict:
    """Every array a checkpoint holds (its state/ and, with --exact-resume, exact/)."""
    folder = run_dir / "checkpoints" / str(step)
    out = {}
    for item in ("state", "exact"):
        if (folder / item).is_dir():
            tree = ocp.StandardCheckpointer().restore(folder / item)
            out.update({f"{item}/{k}": v for k, v in ocp.tree.to_flat_dict(tree, sep="/").items()})
    return out


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def _train(run_dir: Path, flags: str, exact: bool, steps: int) -> Path:
    extra = ["--exact-resume"] if exact else []
    train.main([*flags.split(), *extra, *_common(run_dir), "--total-steps", str(steps)])
    return run_dir


def _resume(run_dir: Path, total: int) -> Path:
    train.main(["--resume", str(run_dir), "--total-steps", str(total), "--no-progress"])
    return run_dir


def _train_both_ways(tmp_path: Path, flags: str, exact: bool, total: int = 96, stop: int = 48):
    """(straight run folder, stopped-and-resumed run folder)."""
    straight = _train(tmp_path / "straight", flags, exact, total)
    resumed = _resume(_train(tmp_path / "resumed", flags, exact, stop), total)
    return straight, resumed


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory):
    """`dqn_run(exact, kind)`: a run folder of the `DQN` command line, with --exact-resume or
    without, trained once for the module on first use: kind "straight" trains 96 steps,
    "stopped" 48 (its checkpoint at 48), "resumed" is a copy of "stopped" resumed to 96 (as
    `_train_both_ways`'s two). A test that writes into one copies it first."""
    runs = {}

    def run(exact: bool, kind: str) -> Path:
        if (exact, kind) not in runs:
            folder = tmp_path_factory.mktemp(f"dqn-exact-{exact}") / kind
            if kind == "resumed":
                shutil.copytree(run(exact, "stopped"), folder)
                _resume(folder, 96)
            else:
                _train(folder, DQN, exact, {"straight": 96, "stopped": 48}[kind])
            runs[exact, kind] = folder
        return runs[exact, kind]

    return run


def _assert_same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]), err_msg=k)


def test_a_resumed_run_is_the_run_that_never_stopped(dqn_run):
    straight, resumed = dqn_run(True, "straight"), dqn_run(True, "resumed")
    a, b = _arrays(straight, 96), _arrays(resumed, 96)
    assert any(k.startswith("exact/replay/") for k in a)
    assert any(k.startswith("exact/actor/env_state") for k in a)
    _assert_same(a, b)
    assert _rows(straight / "metrics.csv") == _rows(resumed / "metrics.csv")
    # an evaluation reads the learner alone from such a checkpoint
    result = evaluate.main([str(resumed), "--episodes", "2", "--num-envs", "2"])
    assert result["checkpoint_step"] == 96


def test_without_the_flag_a_resumed_run_differs(dqn_run):
    """The control: the resumed run refills its replay and starts new episodes."""
    straight, resumed = dqn_run(False, "straight"), dqn_run(False, "resumed")
    a, b = _arrays(straight, 96), _arrays(resumed, 96)
    assert not any(k.startswith("exact/") for k in a)
    params = [k for k in a if k.startswith("state/learner/params/")]
    assert params and any(not np.array_equal(a[k], b[k]) for k in params)


@pytest.mark.slow
def test_an_evolving_population_resumes_exactly(tmp_path):
    """PBT ranks members by their return windows: those come back from the checkpoint too,
    so the generation after the resume copies and perturbs the same members."""
    straight, resumed = _train_both_ways(tmp_path, PPO_PBT, exact=True, total=96, stop=48)
    _assert_same(_arrays(straight, 96), _arrays(resumed, 96))
    for i in range(2):
        member = f"member-{i}/metrics.csv"
        assert _rows(straight / member) == _rows(resumed / member)
    lineage = [(straight / "lineage.csv").read_text(), (resumed / "lineage.csv").read_text()]
    assert lineage[0] == lineage[1] and lineage[0].count("\n") > 1


def test_damaged_windows_in_the_metadata_are_one_line(tmp_path, dqn_run):
    """Checksums prove a checkpoint is as written, not that what was written is sane: meta
    windows rewritten (and checksummed again) fail the resume in one line naming them. The
    run is the exact resume's first part (48 steps with --exact-resume), copied."""
    from engine.checkpoint import write_checksums

    run_dir = tmp_path / "run"
    shutil.copytree(dqn_run(True, "stopped"), run_dir)
    ckpt = run_dir / "checkpoints" / "48"
    meta = json.loads((ckpt / "meta" / "metadata").read_text())
    assert len(meta["windows"]) == 1 and set(meta["windows"][0]) == {"returns", "lengths"}
    # the steady counters travel too (summary.json's sps covers every stretch of a run)
    (counters,) = meta["counters"]
    assert 0 < counters["steady_steps"] < 48 and 0 < counters["steady_s"] <= counters["wall_s"]
    meta["windows"][0]["returns"] = ["x"]
    (ckpt / "meta" / "metadata").write_text(json.dumps(meta))
    (ckpt / "checksums.json").unlink()
    write_checksums(ckpt, 48)
    with pytest.raises(SystemExit) as err:
        train.main(["--resume", str(run_dir), "--total-steps", "96", "--no-progress"])
    message = str(err.value)
    assert "\n" not in message and "meta windows[0].returns must be a list of numbers" in message


@pytest.mark.parametrize(
    "windows, size, needle",
    [
        (None, 1, "meta windows must be a list of 1 objects"),
        ([{"returns": [], "lengths": []}], 2, "meta windows must be a list of 2 objects"),
        (["x"], 1, "windows[0].returns must be a list of numbers"),
        ([{"returns": [1.0, float("nan")], "lengths": [1]}], 1, "windows[0].returns must be"),
        ([{"returns": [1.0], "lengths": [True]}], 1, "windows[0].lengths must be"),
    ],
)
def test_restored_windows_are_checked(windows, size, needle):
    from engine.runner import restored_windows

    with pytest.raises(ValueError, match=r"^checkpoint 8 in x: ") as err:
        restored_windows({"windows": windows}, size, "checkpoint 8 in x")
    assert needle in str(err.value)
    good = [{"returns": [1.5, 2], "lengths": [3, 4]}] * size
    assert restored_windows({"windows": good}, size, "x") == good


@pytest.mark.parametrize(
    "flags, message",
    [
        ("--env CartPole-v1", "--exact-resume needs a JAX-native env (gymnax/<id>)"),
        ("--env gymnax/CartPole-v1 --num-processes 2", "--num-processes must be 1 with"),
    ],
)
def test_refusals_are_one_line(tmp_path, flags, message):
    argv = ["--agent", "dqn", *flags.split(), "--exact-resume", "--run-dir", str(tmp_path / "r")]
    with pytest.raises(SystemExit, match=re.escape(message)) as err:
        train.main([*argv, "--no-progress"])
    assert "\n" not in str(err.value) and not (tmp_path / "r").exists()


def _gymnax_cases():
    """Every registered agent's gymnax case (tests/experiments/test_gymnax_end_to_end.py),
    the Reactor in lock-step: its decoupled actor thread is not deterministic even when
    nothing stops it."""
    from test_gymnax_end_to_end import CASES_GYMNAX

    cases = {}
    for name, (flags, first, total) in CASES_GYMNAX.items():
        if name.startswith("gymnax-"):
            extra = " --no-decoupled" if "--agent reactor" in flags else ""
            cases[name] = (flags + extra, first, total)
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(_gymnax_cases()))
def test_every_agent_resumes_exactly_on_gymnax(tmp_path, case):
    """Nothing an agent keeps between iterations lives outside its TrainState."""
    flags, first, total = _gymnax_cases()[case]
    extra = ["--exact-resume", "--checkpoint-every", str(first)]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    common = ["--no-progress", "--eval-episodes", "0", "--iterations-per-sync", "1",
              "--num-devices", "1"]  # fmt: skip
    train.main([*flags.split(), *extra, *common, "--run-dir", str(straight),
                "--total-steps", str(total)])  # fmt: skip
    train.main([*flags.split(), *extra, *common, "--run-dir", str(resumed),
                "--total-steps", str(first)])  # fmt: skip
    train.main(["--resume", str(resumed), "--total-steps", str(total), "--no-progress"])
    _assert_same(_arrays(straight, total), _arrays(resumed, total))
    assert _rows(straight / "metrics.csv") == _rows(resumed / "metrics.csv")


def test_a_checkpoint_without_the_exact_item_is_a_one_line_mismatch(tmp_path):
    """Asking a checkpoint saved without --exact-resume for its replay and env states is the
    caller's mistake (ValueError naming it), not damage: nothing is set aside."""
    import jax.numpy as jnp

    from engine.checkpoint import Checkpointer

    ckpt = Checkpointer(tmp_path / "checkpoints")
    try:
        ckpt.save(8, {"w": jnp.ones(3)}, {"counters": {}})
        with pytest.raises(ValueError, match="holds no replay or env states") as err:
            ckpt.restore({"w": jnp.ones(3)}, exact={"replay": jnp.zeros(2)})
        assert "\n" not in str(err.value) and ckpt.steps() == [8] and not ckpt.skipped
        restored, _, step = ckpt.restore({"w": jnp.ones(3)})  # the state alone still loads
        np.testing.assert_array_equal(restored["w"], np.ones(3))
        assert step == 8
    finally:
        ckpt.close()
