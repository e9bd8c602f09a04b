"""experiments.sweep: spec parsing, resume logic, slot scheduling, failures, kill -9.

The runs are fake (tests/experiments/fake_train.py through SWEEP_TRAIN_CMD): they write a
run folder of train's layout in 0.05 s iterations, so the scheduling logic is tested in
seconds. docs/results/sweep-acceptance/ holds the same checks on real runs.
"""

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments import sweep as sw

FAKE = Path(__file__).with_name("fake_train.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("SWEEP_TRAIN_CMD", f"{sys.executable} {FAKE}")
    monkeypatch.setenv("FAKE_STEP_S", "0.02")


def spec(tmp_path, **kw):
    data = {"name": "s", "agents": ["ppo"], "envs": ["CartPole-v1"], "seeds": 2,
            "set": {"total_steps": 2000}, "root": str(tmp_path)}  # fmt: skip
    return {**data, **kw}


def invocations(folder: Path) -> list[dict]:
    path = folder / "invocations.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ----------------------------------------------------------------------------- the spec


@pytest.mark.parametrize(
    "change, field",
    [
        ({"agents": ["ppo", "ppo2"]}, "agents[1].agent"),
        ({"agents": [{"agent": "ppo", "preset": "nope"}]}, "agents[0].preset"),
        ({"agents": [{"agent": "ppo", "lr": 1}]}, "agents[0].lr"),
        ({"set": {"learning_rat": 0.1}}, "set.learning_rat"),
        ({"set": {"seed": 3}}, "set.seed"),
        ({"seeds": 0}, "seeds"),
        ({"seeds": [1, 1]}, "seeds"),
        ({"slots": 0}, "slots"),
        ({"envs": []}, "envs"),
        ({"envs": ["CartPole-v1", 3]}, "envs[1]"),
        ({"grid": {"lr": 0.1}}, "grid.lr"),
        ({"cpus": [[99999]]}, "cpus[0]"),
        ({"retries": -1}, "retries"),
        ({"slotz": 2}, "slotz"),
        ({"name": "a/b"}, "name"),
    ],
)
def test_bad_spec_names_the_field(tmp_path, change, field):
    with pytest.raises(sw.SpecError) as err:
        sw.parse_spec(spec(tmp_path, **change), validate=False)
    assert str(err.value).startswith(field + ":"), str(err.value)
    assert "\n" not in str(err.value)


def test_bad_value_caught_by_trains_parser(tmp_path):
    with pytest.raises(sw.SpecError, match="--total-steps must be >= 1"):
        sw.parse_spec(spec(tmp_path, set={"total_steps": 0}))


def test_spec_files_yaml_and_python(tmp_path):
    (tmp_path / "g.yaml").write_text("agents: [ppo, {agent: a2c, set: {num_envs: 4}}]\n"
                                     "envs: [CartPole-v1]\nseeds: [3, 5]\n"
                                     "grid: {lr: [0.001, 0.0003]}\n")  # fmt: skip
    (tmp_path / "g.py").write_text(
        "SPEC = {'name': 'py', 'agents': ['ppo'], 'envs': ['Acrobot-v1']}"
    )
    sweep = sw.parse_spec(sw.load_spec(tmp_path / "g.yaml"))
    assert sweep.name == "g" and len(sweep.runs) == 2 * 2 * 2
    names = {r.name for r in sweep.runs}
    assert "a2c-CartPole-v1-seed5-lr=0.0003" in names
    minatar = sw.parse_spec({"name": "m", "agents": ["dqn"], "envs": ["MinAtar/Breakout-v1"]})
    assert [r.name for r in minatar.runs] == ["dqn-MinAtar-Breakout-v1-seed0"]
    assert minatar.runs[0].run_dir(Path("s")) == Path("s/dqn-MinAtar-Breakout-v1-seed0")
    a2c = next(r for r in sweep.runs if r.agent == "a2c")
    argv = sw.train_argv(a2c, Path("x"), resuming=False)
    assert argv[argv.index("--num-envs") + 1] == "4" and "--lr" in argv
    py = sw.parse_spec(sw.load_spec(tmp_path / "g.py"))
    assert py.name == "py" and [r.seed for r in py.runs] == [0]
    with pytest.raises(sw.SpecError, match="not valid YAML"):
        (tmp_path / "bad.yaml").write_text("agents: [ppo\n")
        sw.load_spec(tmp_path / "bad.yaml")


def test_resume_argv_keeps_only_what_resume_may_change(tmp_path):
    run = sw.Run("r", "ppo", "CartPole-v1", 0, None, (("total_steps", 9), ("lr", 0.1)))
    argv = sw.train_argv(run, tmp_path / "r", resuming=True)
    assert argv[argv.index("--resume") + 1] == str(tmp_path / "r")
    assert "--total-steps" in argv and "--learning-rate" not in argv and "--agent" not in argv


def test_cli_form(tmp_path, capsys):
    sw.main(["--agents", "acer,ppo", "--envs", "CartPole-v1,Acrobot-v1", "--seeds", "3",
             "--set", "total_steps=20000", "--root", str(tmp_path), "--dry-run"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 12 and all(line.startswith("new") for line in lines)
    assert all("--total-steps 20000" in line for line in lines)
    with pytest.raises(SystemExit, match=r"set\.bogus"):
        sw.main(["--agents", "ppo", "--envs", "CartPole-v1", "--set", "bogus=1", "--dry-run"])


# ----------------------------------------------------------------------------- resume logic


def test_run_state(tmp_path):
    d = tmp_path / "r"
    assert sw.run_state(d) == "new"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"run": {"total_steps": 100}}))
    assert sw.run_state(d) == "partial"
    (d / "summary.json").write_text(json.dumps({"env_steps": 60, "stopped_by": "signal"}))
    assert sw.run_state(d) == "partial"  # stopped early: resume it
    (d / "summary.json").write_text(json.dumps({"env_steps": 100, "stopped_by": "total_steps"}))
    assert sw.run_state(d) == "done"


def test_sweep_runs_skips_done_and_resumes_partial(tmp_path, fake):
    sweep = sw.parse_spec(spec(tmp_path, seeds=3), validate=False)
    assert set(sw.Scheduler(sweep, poll_s=0.02, live=False).run().values()) == {"done"}
    folder = sweep.folder
    first = invocations(folder)
    assert sorted(r["run"] for r in first if r["event"] == "start") == sorted(
        r.name for r in sweep.runs
    )
    # Make one run look interrupted at its checkpoint 1000, as a killed run leaves it.
    d = folder / "ppo-CartPole-v1-seed1"
    (d / "summary.json").unlink()
    for step in (1500, 2000):
        (d / "checkpoints" / str(step)).rmdir()
    sw.Scheduler(sweep, poll_s=0.02, live=False).run()
    again = invocations(folder)[len(first) :]
    starts = [r for r in again if r["event"] == "start"]
    assert [(r["run"], r["mode"], r["from"]) for r in starts] == [(d.name, "resume", 1000)]
    state = json.loads((folder / sw.STATE_NAME).read_text())
    assert [launch["mode"] for launch in state["runs"][d.name]["launches"]] == ["fresh", "resume"]
    assert all(r["status"] == "done" for r in state["runs"].values())


def test_failures_are_reported_and_the_sweep_goes_on(tmp_path, fake, capsys):
    data = spec(tmp_path, envs=["CartPole-v1", "Fail-v0"], seeds=1, retries=1)
    result = sw.Scheduler(sw.parse_spec(data, validate=False), poll_s=0.02, live=False).run()
    assert result == {"ppo-CartPole-v1-seed0": "done", "ppo-Fail-v0-seed0": "failed"}
    state = json.loads((tmp_path / "s" / sw.STATE_NAME).read_text())
    failed = state["runs"]["ppo-Fail-v0-seed0"]
    assert "this env always fails" in failed["error"]
    assert [launch["mode"] for launch in failed["launches"]] == ["fresh", "resume"]  # 1 retry
    assert "failed" in capsys.readouterr().err


# ----------------------------------------------------------------------------- slots


def test_slots_bound_concurrency_and_pin_cores_and_devices(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_STEP_S", "0.05")
    cores = sorted(os.sched_getaffinity(0))
    data = spec(tmp_path, seeds=4, slots=2, cpus=[[cores[0]], [cores[-1]]], devices=["3", "7"])
    sweep = sw.parse_spec(data, validate=False)
    sw.Scheduler(sweep, poll_s=0.02, live=False).run()
    ends = {r["pid"]: r for r in invocations(sweep.folder) if r["event"] == "end"}
    assert len(ends) == 4
    events = sorted(
        [(r["start"], 1) for r in ends.values()] + [(r["end"], -1) for r in ends.values()]
    )
    running, peak = 0, 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert peak == 2
    state = json.loads((sweep.folder / sw.STATE_NAME).read_text())
    for rec in state["runs"].values():
        launch = rec["launches"][0]
        got = ends[launch["pid"]]
        assert got["cpus"] == [cores[0] if launch["slot"] == 0 else cores[-1]]
        assert got["device"] == ("3" if launch["slot"] == 0 else "7")


def test_auto_cpus_split_the_cores():
    cores = sorted(os.sched_getaffinity(0))
    groups = sw._cpus("auto", len(cores))
    assert sorted(c for g in groups for c in g) == cores and all(len(g) == 1 for g in groups)


def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path, fake):
    sweep = sw.parse_spec(spec(tmp_path), validate=False)
    sweep.folder.mkdir(parents=True)
    from experiments.runfolder import RunLock

    with RunLock(sweep.folder), pytest.raises(SystemExit, match="in use"):
        sw.Scheduler(sweep, live=False).run()


# ----------------------------------------------------------------------------- kill -9


def test_kill9_of_a_run_and_of_the_sweep_then_restart(tmp_path):
    (tmp_path / "k.yaml").write_text(
        f"name: k\nroot: {tmp_path}\nagents: [ppo, a2c]\nenvs: [CartPole-v1]\nseeds: 2\n"
        "slots: 2\nset: {total_steps: 6000}\n"
    )
    env = {**os.environ, "SWEEP_TRAIN_CMD": f"{sys.executable} {FAKE}", "FAKE_STEP_S": "0.2",
           "PYTHONPATH": str(REPO)}  # fmt: skip
    cmd = [sys.executable, "-m", "experiments.sweep", str(tmp_path / "k.yaml"), "--no-live"]
    folder = tmp_path / "k"
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    deadline = time.time() + 60
    while len([r for r in invocations(folder) if r["event"] == "start"]) < 2:
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.1)
    victim = next(r for r in invocations(folder) if r["event"] == "start")
    # Kill it once it has a checkpoint and before it ends (12 iterations of 0.2 s): waiting a
    # fixed time raced with its end on a loaded machine.
    checkpoints = folder / victim["run"] / "checkpoints"
    while not (checkpoints.exists() and any(checkpoints.iterdir())):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.02)
    assert not (folder / victim["run"] / "summary.json").exists()
    os.kill(victim["pid"], signal.SIGKILL)  # one run
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)  # the sweep; its runs get SIGTERM and stop cleanly
    proc.wait()
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    log = invocations(folder)
    state = json.loads((folder / sw.STATE_NAME).read_text())
    assert all(r["status"] == "done" for r in state["runs"].values())
    for name in state["runs"]:
        mine = [r for r in log if r["run"] == name]
        starts = [r for r in mine if r["event"] == "start"]
        assert [r["mode"] for r in starts][:1] == ["fresh"]
        assert all(r["mode"] == "resume" for r in starts[1:])  # never started over
        # No launch overlaps another, and each resumes from where the last one stopped.
        for a, b in itertools.pairwise(starts):
            assert b["start"] >= a["start"]
        ends = [r for r in mine if r["event"] == "end"]
        assert ends[-1]["to"] == 6000
    victim_starts = [r for r in log if r["run"] == victim["run"] and r["event"] == "start"]
    assert len(victim_starts) >= 2 and victim_starts[1]["from"] > 0


def test_submitit_backend_in_local_mode(tmp_path, fake):
    pytest.importorskip("submitit")
    sweep = sw.parse_spec(spec(tmp_path, seeds=2, slots=2), validate=False)
    backend = sw.SubmititBackend(sweep, local=True)
    result = sw.Scheduler(sweep, backend, poll_s=0.1, live=False).run()
    assert set(result.values()) == {"done"}
    starts = [r for r in invocations(sweep.folder) if r["event"] == "start"]
    assert sorted(r["mode"] for r in starts) == ["fresh", "fresh"]
