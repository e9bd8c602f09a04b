"""experiments.sweep: spec parsing, resume logic, slot scheduling, failures, kill -9.

The runs are fake (tests/experiments/fake_train.py through SWEEP_TRAIN_CMD): they write a
run folder of train's layout in 0.05 s iterations, so the scheduling logic is tested in
seconds. docs/results/sweep-acceptance/ holds the same checks on real runs.
"""

import itertools
import json
import math
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
        ({"set": {"progress": True}}, "set.progress"),  # runs always get --no-progress
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
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.startswith("sweep sweep-acer-ppo: 12 runs (2 agents × 2 envs × 1 grid point")
    assert len(lines) == 12 and all(line.startswith("new") for line in lines)
    assert all("--total-steps 20000" in line for line in lines)
    with pytest.raises(SystemExit, match=r"set\.bogus"):
        sw.main(["--agents", "ppo", "--envs", "CartPole-v1", "--set", "bogus=1", "--dry-run"])


def test_dry_run_shows_the_resume_command_of_a_partial_run(tmp_path, capsys):
    argv = ["--agents", "ppo", "--envs", "CartPole-v1", "--seeds", "2", "--set",
            "total_steps=2000", "--name", "d", "--root", str(tmp_path), "--dry-run"]  # fmt: skip
    partial = tmp_path / "d" / "ppo-CartPole-v1-seed1"
    partial.mkdir(parents=True)
    (partial / "config.json").write_text(json.dumps({"run": {"total_steps": 2000}}))
    sw.main(argv)
    _, fresh, resumed = capsys.readouterr().out.splitlines()
    assert fresh.startswith("new") and "--agent ppo" in fresh and "--resume" not in fresh
    assert resumed.startswith("partial") and f"--resume {partial} " in resumed
    assert "--agent" not in resumed and "--total-steps 2000" in resumed


def test_seeds_flag_overrides_a_spec_files_seeds(tmp_path, capsys):
    """--seeds with a SPEC file replaces the spec's seeds (as --name and --slots do), rather
    than being read only by the CLI form and silently ignored."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("agents: [ppo]\nenvs: [CartPole-v1]\nseeds: 2\ngrid: {lr: [0.001, 0.0003]}\n")
    sw.main([str(spec), "--root", str(tmp_path), "--dry-run"])
    header, *lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and "2 seeds" in header, header
    sw.main([str(spec), "--seeds", "5,7,9", "--root", str(tmp_path), "--dry-run"])
    header, *lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and "3 seeds" in header, header
    assert sum("--seed 7 " in line + " " for line in lines) == 2, lines


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
    # A spec that raises total_steps resumes the finished run (train's --resume extends it).
    assert sw.run_state(d, total_steps=200) == "partial"
    assert sw.run_state(d, total_steps=100) == sw.run_state(d, total_steps=50) == "done"
    # A stop request in the last iteration still ends a whole run: nothing to resume.
    (d / "summary.json").write_text(json.dumps({"env_steps": 104, "stopped_by": "signal"}))
    assert sw.run_state(d) == "done"


def test_grid_flags_are_spelt_as_set_flags(tmp_path):
    """`total-steps` in a grid is `total_steps`: the run knows its budget (what the resume
    logic compares and passes on --resume); the two spellings at once are refused."""
    base = {"name": "g", "agents": ["ppo"], "envs": ["CartPole-v1"], "root": str(tmp_path)}
    sweep = sw.parse_spec({**base, "grid": {"total-steps": [100, 200]}}, validate=False)
    assert sorted(run.total_steps for run in sweep.runs) == [100, 200]
    with pytest.raises(sw.SpecError, match="names one flag twice"):
        sw.parse_spec({**base, "grid": {"total-steps": [1], "total_steps": [2]}}, validate=False)


def test_a_repeated_grid_value_is_refused_not_run_twice_in_one_folder(tmp_path, capsys):
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("agents: [ppo]\nenvs: [CartPole-v1]\ngrid: {num_envs: [4, 4]}\n")
    message = one_line_exit(sw.main, [str(spec_file), "--root", str(tmp_path), "--dry-run"], capsys)
    assert "grid.num_envs: values 4 and 4 make the same run name" in message, message


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


def test_a_run_that_stops_itself_is_not_retried(tmp_path, fake):
    """`retries` resumes failed runs only: a run that ended cleanly before its budget (its
    own --max-minutes, a stop request) is left stopped, not launched again."""
    data = spec(tmp_path, envs=["Stop-v0"], seeds=1, retries=2)
    result = sw.Scheduler(sw.parse_spec(data, validate=False), poll_s=0.02, live=False).run()
    assert result == {"ppo-Stop-v0-seed0": "stopped"}
    state = json.loads((tmp_path / "s" / sw.STATE_NAME).read_text())
    assert [launch["mode"] for launch in state["runs"]["ppo-Stop-v0-seed0"]["launches"]] == [
        "fresh"
    ]


def test_a_run_folder_linked_out_of_the_sweep_is_refused_and_the_others_go_on(
    tmp_path, fake, capsys
):
    """A downloaded sweep folder whose run folder is a symbolic link to elsewhere: that run
    is never started (nothing written there), marked invalid with one line, the others run."""
    data = spec(tmp_path, seeds=2)
    sweep = sw.parse_spec(data, validate=False)
    outside = tmp_path / "photos"
    outside.mkdir()
    (outside / "photo.jpg").write_bytes(b"photo")
    (outside / ".lock").write_bytes(b"not the sweep's lock\n")  # not even opened
    sweep.folder.mkdir(parents=True)
    (sweep.folder / "ppo-CartPole-v1-seed1").symlink_to(outside)
    result = sw.Scheduler(sweep, poll_s=0.02, live=False).run()
    assert result == {"ppo-CartPole-v1-seed0": "done", "ppo-CartPole-v1-seed1": "invalid"}
    assert sorted(p.name for p in outside.iterdir()) == [".lock", "photo.jpg"]
    assert (outside / "photo.jpg").read_bytes() == b"photo"
    assert (outside / ".lock").read_bytes() == b"not the sweep's lock\n"
    err = [line for line in capsys.readouterr().err.splitlines() if "seed1" in line]
    assert len(err) == 1 and "symbolic link" in err[0], err


# ----------------------------------------------------------------------------- slots


def test_slots_bound_concurrency_and_pin_cores_and_devices(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_STEP_S", "0.05")
    monkeypatch.setenv("FAKE_OVERLAP", "2")  # the first two launches wait for each other
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


def test_local_devices_must_lie_within_the_sweeps_own_device_mask(tmp_path, capsys, monkeypatch):
    sweep = sw.parse_spec({**spec(tmp_path), "devices": ["2", "3,5"]}, validate=False)
    sw.check_local_devices(sweep, {})  # no mask: any id
    sw.check_local_devices(sweep, {"CUDA_VISIBLE_DEVICES": "2,3,5"})
    with pytest.raises(sw.SpecError, match=r"devices\[1\]: 5 is not among .*=2,3 \("):
        sw.check_local_devices(sweep, {"CUDA_VISIBLE_DEVICES": "2,3"})
    spec_file = tmp_path / "d.yaml"
    spec_file.write_text("agents: [ppo]\nenvs: [CartPole-v1]\ndevices: [0, 1]\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    message = one_line_exit(sw.main, [str(spec_file), "--root", str(tmp_path)], capsys)
    assert "devices[0]: 0 is not among this process's CUDA_VISIBLE_DEVICES=1" in message


def test_slots_that_share_a_device_share_its_memory(tmp_path):
    frac = "XLA_PYTHON_CLIENT_MEM_FRACTION"
    one = sw.parse_spec({**spec(tmp_path), "slots": 1}, validate=False)
    assert one.slot_env(0, {}) == {}  # alone: JAX's default
    three = sw.parse_spec({**spec(tmp_path), "slots": 3}, validate=False)
    assert [three.slot_env(s, {}) for s in range(3)] == [{frac: "0.300"}] * 3  # all see all
    paired = sw.parse_spec(
        {**spec(tmp_path), "slots": 3, "devices": ["0", "1", "0"]}, validate=False
    )
    assert [paired.slot_env(s, {}) for s in range(3)] == [
        {"CUDA_VISIBLE_DEVICES": "0", frac: "0.450"},
        {"CUDA_VISIBLE_DEVICES": "1"},
        {"CUDA_VISIBLE_DEVICES": "0", frac: "0.450"},
    ]
    mine = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}  # the user's choice stands
    assert paired.slot_env(0, mine) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert three.slot_env(0, {}, one_machine=False) == {}  # SLURM: an allocation each


def test_auto_cpus_split_the_cores():
    cores = sorted(os.sched_getaffinity(0))
    groups = sw._cpus("auto", len(cores))
    assert sorted(c for g in groups for c in g) == cores and all(len(g) == 1 for g in groups)


@pytest.mark.parametrize(
    "slots, expected",
    [(1, [[3, 5, 8, 9, 12]]), (2, [[3, 5], [8, 9, 12]]), (3, [[3, 5], [8], [9, 12]]),
     (5, [[3], [5], [8], [9], [12]]), (7, [[3], [5], [8], [9], [12], [3], [5]])],
)  # fmt: skip
def test_auto_cpus_use_every_core_and_share_them_evenly(monkeypatch, slots, expected):
    """5 cores: slots get contiguous shares that differ by at most one core, none left
    idle; more slots than cores: one core each, in turn (no slot floats over all cores)."""
    monkeypatch.setattr(sw.os, "sched_getaffinity", lambda pid: {12, 3, 9, 5, 8})
    assert [list(g) for g in sw._cpus("auto", slots)] == expected


def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path, fake):
    sweep = sw.parse_spec(spec(tmp_path), validate=False)
    sweep.folder.mkdir(parents=True)
    from engine.runfolder import RunLock

    with RunLock(sweep.folder), pytest.raises(SystemExit, match="in use"):
        sw.Scheduler(sweep, live=False).run()


# ----------------------------------------------------------------------------- stop, abort


@pytest.mark.slow
def test_a_second_stop_aborts_the_runs_and_a_restart_resumes_them(tmp_path):
    """SIGTERM to the sweep asks its runs to checkpoint, evaluate and stop; while one takes
    its time over that (FAKE_FINISH_S), a second SIGTERM aborts it: the sweep exits at once,
    marks the run stopped, and the next sweep resumes it from its last checkpoint."""
    (tmp_path / "a.yaml").write_text(
        f"name: a\nroot: {tmp_path}\nagents: [ppo]\nenvs: [CartPole-v1]\nseeds: 1\n"
        "set: {total_steps: 6000}\n"
    )
    env = {**os.environ, "SWEEP_TRAIN_CMD": f"{sys.executable} {FAKE}", "FAKE_STEP_S": "0.2",
           "FAKE_FINISH_S": "120", "PYTHONPATH": str(REPO)}  # fmt: skip
    cmd = [sys.executable, "-m", "experiments.sweep", str(tmp_path / "a.yaml"), "--no-live"]
    folder, deadline = tmp_path / "a", time.time() + 60
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
    checkpoints = folder / "ppo-CartPole-v1-seed0" / "checkpoints"
    while not (checkpoints.exists() and any(checkpoints.iterdir())):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    while not any(r["event"] == "term" for r in invocations(folder)):  # passed on to the run
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 1  # not all done; and not after the run's 120 s
    state = json.loads((folder / sw.STATE_NAME).read_text())
    assert state["runs"]["ppo-CartPole-v1-seed0"]["status"] == "stopped"
    assert not (folder / "ppo-CartPole-v1-seed0" / "summary.json").exists()  # killed first
    env["FAKE_FINISH_S"] = "0"
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    starts = [r for r in invocations(folder) if r["event"] == "start"]
    assert [r["mode"] for r in starts] == ["fresh", "resume"] and starts[1]["from"] > 0
    ends = [r for r in invocations(folder) if r["event"] == "end"]
    assert [r["to"] for r in ends] == [6000]  # the aborted launch never logged an end


# ----------------------------------------------------------------------------- kill -9


@pytest.mark.slow
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


def test_submitit_never_reads_a_log_folder_the_sweep_folder_brought(tmp_path, fake, capsys):
    """submitit unpickles the results it finds in its folder: a downloaded sweep folder's
    `.submitit/` (planted pickles) is never that folder (each sweep process makes its own,
    afresh, when it submits), and a `.submitit/` linked elsewhere is refused. Nothing is
    made before the first submission (a --dry-run makes no folder)."""
    pytest.importorskip("submitit")
    sweep = sw.parse_spec(spec(tmp_path, seeds=1), validate=False)
    planted = sweep.folder / ".submitit"
    planted.mkdir(parents=True)
    (planted / "planted_result.pkl").write_bytes(b"not for unpickling")
    backend = sw.SubmititBackend(sweep, local=True)
    assert sorted(p.name for p in planted.iterdir()) == ["planted_result.pkl"]
    assert set(sw.Scheduler(sweep, backend, poll_s=0.1, live=False).run().values()) == {"done"}
    (own,) = [p for p in planted.iterdir() if p.is_dir()]
    assert own.name.startswith(f"{os.getpid()}-") and any(own.iterdir())
    # A .submitit/ linked out of the sweep folder: refused, nothing written there.
    other = sw.parse_spec(spec(tmp_path, name="t", seeds=1), validate=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other.folder.mkdir()
    (other.folder / ".submitit").symlink_to(elsewhere)
    with pytest.raises(SystemExit, match=r"^error: sweep t: refusing to write in .*\.submitit"):
        sw.Scheduler(other, sw.SubmititBackend(other, local=True), poll_s=0.1, live=False).run()
    assert not any(elsewhere.iterdir())
    with pytest.raises(sw.SpecError, match=r"^--slurm: Parameter 'bogus'"):
        sw.SubmititBackend(sweep, local=False, parameters={"bogus": 1})


# ----------------------------------------------------------------------------- damaged input


def one_line_exit(main, argv, capsys) -> str:
    """The one-line `error: ...` that `main(argv)` exits with (nothing else on stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    message = exit_info.value.code
    assert isinstance(message, str) and message.startswith("error: "), message
    assert "\n" not in message and not capsys.readouterr().err
    return message


@pytest.mark.parametrize(
    "seeds, needle",
    [("x", "--seeds: expected a count"), ("1,x", "--seeds: expected a count"),
     ("-1", "seeds: must be a count in [1, 10000]"), ("0", "seeds: must be a count"),
     ("1,1", "seeds: has duplicates"), ("3,-2", "seeds: must be in [0, 2**30)"),
     (str(2**30) + ",0", "seeds: must be in [0, 2**30)"), ("20000", "seeds: must be a count")],
)  # fmt: skip
def test_cli_seeds_are_checked(seeds, needle, tmp_path, capsys):
    argv = ["--agents", "ppo", "--envs", "CartPole-v1", "--seeds", seeds, "--dry-run"]
    assert needle in one_line_exit(sw.main, [*argv, "--root", str(tmp_path)], capsys)


@pytest.mark.parametrize(
    "argv, needle",
    [(["--set", "lr=[1,"], "--set lr: not a YAML value"), (["--set", "=1"], "--set: expected"),
     (["--set", "lr={a: 1}"], "set.lr: must be a number"),
     (["--slots", "0"], "slots: must be an integer >= 1"),
     (["--retries", "-1"], "retries: must be an integer >= 0"),
     (["--cpus", "3"], "cpus: must be 'auto'"), (["--name", "a/b"], "name: must be a folder"),
     (["--backend", "submitit", "--slurm", "x"], "--slurm: expected"),
     # submitit's options without submitit would do nothing
     (["--submitit-local"], "--submitit-local needs --backend submitit"),
     (["--slurm", "slurm_partition=gpu"], "--slurm needs --backend submitit")],
)  # fmt: skip
def test_cli_flags_are_checked(argv, needle, tmp_path, capsys):
    base = ["--agents", "ppo", "--envs", "CartPole-v1", "--root", str(tmp_path), "--dry-run"]
    assert needle in one_line_exit(sw.main, [*base, *argv], capsys)


def test_spec_files_that_cannot_be_read_or_run_are_one_line(tmp_path, capsys):
    (tmp_path / "bytes.yaml").write_bytes(b"\xff\xfe\x00")
    message = one_line_exit(sw.main, [str(tmp_path / "bytes.yaml"), "--dry-run"], capsys)
    assert "bytes.yaml: cannot be read: 'utf-8' codec" in message
    (tmp_path / "broken.py").write_text("SPEC = {'agents': [undefined]}\n")
    message = one_line_exit(sw.main, [str(tmp_path / "broken.py"), "--dry-run"], capsys)
    assert "broken.py: running it failed: NameError: name 'undefined' is not defined" in message
    (tmp_path / "bare.py").write_text("assert False\n")
    message = one_line_exit(sw.main, [str(tmp_path / "bare.py"), "--dry-run"], capsys)
    assert message.endswith("bare.py: running it failed: AssertionError"), message
    (tmp_path / "long.py").write_text("raise ValueError('first\\n' + 'x ' * 400)\n")
    message = one_line_exit(sw.main, [str(tmp_path / "long.py"), "--dry-run"], capsys)
    assert "long.py: running it failed: ValueError: first x x " in message
    assert message.endswith("...") and len(message) < 450, message


@pytest.mark.parametrize("root", ["FILE", "FILE/sub"])
def test_a_sweep_folder_that_cannot_be_made_is_one_line(root, tmp_path, fake, capsys):
    (tmp_path / "FILE").write_text("x")
    argv = ["--agents", "ppo", "--envs", "CartPole-v1", "--no-live"]
    argv += ["--root", str(tmp_path / root)]
    with pytest.raises(SystemExit) as info:
        sw.main(argv)
    message = info.value.code
    assert isinstance(message, str) and message.startswith("error: sweep sweep-ppo: cannot make")
    assert "\n" not in message and "Not a directory" in message
    assert (tmp_path / "FILE").read_text() == "x"


# Every field of the spec, damaged in each way: None is the default for an optional field
# (the spec reads as if it were left out); anything else wrong is one line naming the field.
SPEC_DAMAGE = {"missing": "MISSING", "null": None, "int": 7, "string": "NaN",
               "list": [["x"]], "dict": {"a": 1}, "nan": math.nan, "bool": True}  # fmt: skip
OPTIONAL = {"seeds", "set", "grid", "slots", "cpus", "devices", "device_env", "retries",
            "root"}  # fmt: skip
# (field, damage) pairs that are valid values: `seeds: 7` is 7 seeds, `cpus: true` is auto...
VALID = {("seeds", "int"), ("slots", "int"), ("retries", "int"), ("cpus", "bool"),
         ("name", "string"), ("root", "string"), ("device_env", "string"),
         ("cpus", "missing"), ("agents[0].preset", "missing"), ("agents[0].set", "missing"),
         ("agents[0].label", "missing"), ("agents[0].label", "string"),
         ("agents[0].preset", "null"), ("agents[0].set", "null"),
         ("agents[0].label", "null")}  # fmt: skip


def _damaged_spec(tmp_path, name, value):
    entry = {"agent": "ppo", "preset": "ppo-classic", "set": {"num_envs": 4}, "label": "p"}
    data = spec(tmp_path, seeds=1, agents=[entry], grid={"lr": [0.001]}, slots=1, cpus="none",
                devices=["0"], device_env="CUDA_VISIBLE_DEVICES", retries=0)  # fmt: skip
    target, key = (data["agents"][0], name.split(".")[1]) if "." in name else (data, name)
    if value == "MISSING":
        target.pop(key)
    else:
        target[key] = value
    return data


@pytest.mark.parametrize("damage", list(SPEC_DAMAGE))
@pytest.mark.parametrize(
    "name", [*sw.SPEC_FIELDS, "agents[0].agent", "agents[0].preset", "agents[0].set",
             "agents[0].label"],
)  # fmt: skip
def test_every_spec_field_damaged(name, damage, tmp_path):
    data = _damaged_spec(tmp_path, name, SPEC_DAMAGE[damage])
    defaulted = damage in ("missing", "null") and name in OPTIONAL
    try:
        sweep = sw.parse_spec(data, validate=False)
    except sw.SpecError as err:
        message = str(err)
        assert "\n" not in message
        assert (name, damage) not in VALID and not defaulted, message
        field = name if name != "agents[0].agent" else "agents[0]"
        assert message.startswith(field), message
        return
    assert (name, damage) in VALID or defaulted, f"{name}={SPEC_DAMAGE[damage]!r} accepted"
    assert len(sweep.runs) >= 1


def test_grid_values_are_each_checked(tmp_path):
    with pytest.raises(sw.SpecError, match=r"^grid\.lr\[1\]: must be a number"):
        sw.parse_spec(spec(tmp_path, grid={"lr": [0.1, {"a": 1}]}), validate=False)
    with pytest.raises(sw.SpecError, match=r"^grid\.lr: values 0\.1 and '0\.1' make the same"):
        sw.parse_spec(spec(tmp_path, grid={"lr": [0.1, "0.1"]}), validate=False)
    with pytest.raises(sw.SpecError, match=r"^envs: has duplicates"):
        sw.parse_spec(spec(tmp_path, envs=["ALE/Pong-v5", "ALE-Pong-v5"]), validate=False)
    with pytest.raises(sw.SpecError, match="give them a label"):
        sw.parse_spec(spec(tmp_path, agents=["ppo", {"agent": "ppo"}]), validate=False)
    # A word for a number is train's own parser's error, as one line (not tyro's box).
    with pytest.raises(sw.SpecError) as err:
        sw.parse_spec(spec(tmp_path, grid={"lr": [0.1, "x"]}))
    assert str(err.value) == (
        "run ppo-CartPole-v1-seed0-lr=x: Error parsing --lr: could not convert string to float: 'x'"
    )


def _finished_run(folder: Path, name: str, summary: dict, total=2000):
    d = folder / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"run": {"total_steps": total}}))
    (d / "summary.json").write_text(json.dumps(summary))
    return d


@pytest.mark.parametrize(
    "summary, total, field",
    [({"env_steps": 2000}, 2000, "stopped_by"),
     ({"env_steps": 2000, "stopped_by": None}, 2000, "stopped_by"),
     ({"env_steps": 2000, "stopped_by": ["total_steps"]}, 2000, "stopped_by"),
     ({"stopped_by": "total_steps"}, 2000, "env_steps"),
     ({"stopped_by": "total_steps", "env_steps": [2000]}, 2000, "env_steps"),
     ({"stopped_by": "total_steps", "env_steps": "NaN"}, 2000, "env_steps"),
     ({"stopped_by": "total_steps", "env_steps": {"a": 1}}, 2000, "env_steps"),
     # the runner writes an integer: as the report (read_summary), a float is damage too
     ({"stopped_by": "total_steps", "env_steps": 2000.0}, 2000, "env_steps"),
     ({"stopped_by": "total_steps", "env_steps": True}, 1, "env_steps"),
     ({"stopped_by": "total_steps", "env_steps": -1}, 2000, "env_steps"),
     ({"stopped_by": "total_steps", "env_steps": 2000}, "2000", "run.total_steps"),
     ({"stopped_by": "total_steps", "env_steps": 2000}, None, "run.total_steps"),
     ({"stopped_by": "total_steps", "env_steps": 2000}, [2000], "run.total_steps")],
)  # fmt: skip
def test_run_state_of_damaged_files_is_partial_with_the_field_named(
    tmp_path, summary, total, field
):
    d = _finished_run(tmp_path, "r", summary, total)
    problems = []
    assert sw.run_state(d, problems) == "partial"
    assert len(problems) == 1 and field in problems[0] and str(d) in problems[0], problems
    (d / "summary.json").write_text("{not json")
    problems = []
    assert sw.run_state(d, problems) == "partial" and "not valid JSON" in problems[0]


def test_a_population_is_done_when_each_member_trained_its_total_steps(tmp_path):
    """A population's summary.json sums env_steps over its members; total_steps is per
    member: 2 members stopped at 1,000 steps each (2,000 summed) of 2,000 are not done."""
    pop = {"env_steps": 2000, "env_steps_per_member": 1000, "stopped_by": "SIGTERM"}
    assert sw.run_state(_finished_run(tmp_path, "short", pop), []) == "partial"
    pop = {"env_steps": 4000, "env_steps_per_member": 2000, "stopped_by": "total_steps"}
    assert sw.run_state(_finished_run(tmp_path, "done", pop), []) == "done"
    problems = []
    bad = {**pop, "env_steps_per_member": 2000.0}
    assert sw.run_state(_finished_run(tmp_path, "bad", bad), problems) == "partial"
    assert "env_steps_per_member must be an integer" in problems[0], problems


def test_a_done_run_with_a_damaged_summary_is_resumed_with_a_warning(tmp_path, fake, capsys):
    sweep = sw.parse_spec(spec(tmp_path, seeds=1), validate=False)
    assert sw.Scheduler(sweep, poll_s=0.02, live=False).run() == {"ppo-CartPole-v1-seed0": "done"}
    d = sweep.runs[0].run_dir(sweep.folder)
    summary = json.loads((d / "summary.json").read_text())
    (d / "summary.json").write_text(json.dumps(summary | {"stopped_by": ["total_steps"]}))
    capsys.readouterr()
    assert sw.Scheduler(sweep, poll_s=0.02, live=False).run() == {"ppo-CartPole-v1-seed0": "done"}
    warnings = [line for line in capsys.readouterr().err.splitlines() if line]
    assert warnings == [
        f"warning: summary {d / 'summary.json'}: stopped_by must be a string, got "
        "['total_steps']; so the run is not done"
    ]
    assert [r["mode"] for r in invocations(sweep.folder) if r["event"] == "start"] == [
        "fresh",
        "resume",
    ]


def test_live_table_survives_damaged_metrics(tmp_path):
    sweep = sw.parse_spec(spec(tmp_path, seeds=1), validate=False)
    d = sweep.runs[0].run_dir(sweep.folder)
    d.mkdir(parents=True)
    (d / "metrics.csv").write_text("env_steps,return_mean,wall_s\ninf,[1],x\n")
    s = sw.Scheduler(sweep, live=False)
    s.state = {"runs": {}}
    sw._Display(s).table()  # no exception
    assert sw._steps("inf", 10) == "" and sw._steps("abc", 10) == ""
    assert sw._steps("500.0", 2000) == "500/2,000" and sw._steps("500", "2000") == "500"


STATE_DAMAGE = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "holds a JSON array"),
    ('{"runs": [1]}', "runs must be an object"),
    ('{"runs": {"ppo-CartPole-v1-seed0": 3}}', "runs.ppo-CartPole-v1-seed0 must be an object"),
    ('{"runs": {"x": {"launches": 3}}}', "runs.x.launches must be a list"),
    ('{"runs": {"x": {"launches": {"a": 1}}}}', "runs.x.launches must be a list"),
    ('{"runs": {"x": {"launches": [null]}}}', "runs.x.launches[0] must be an object"),
    ('{"runs": {"x": {"status": ["done"]}}}', "runs.x.status must be a string"),
    ('{"runs": {"x": {"status": null}}}', "runs.x.status must be a string"),
    ('{"sweeps": {"pid": 1}}', "sweeps must be a list"),
    ('{"sweeps": "NaN"}', "sweeps must be a list"),
]


@pytest.mark.parametrize("text, needle", STATE_DAMAGE)
def test_damaged_state_file_is_set_aside(tmp_path, fake, capsys, text, needle):
    sweep = sw.parse_spec(spec(tmp_path, seeds=1), validate=False)
    sweep.folder.mkdir(parents=True)
    path = sweep.folder / sw.STATE_NAME
    path.write_text(text)
    assert sw.Scheduler(sweep, poll_s=0.02, live=False).run() == {"ppo-CartPole-v1-seed0": "done"}
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(warnings) == 1 and needle in warnings[0] and str(path) in warnings[0], warnings
    assert (sweep.folder / (sw.STATE_NAME + ".damaged")).read_text() == text  # kept, as it was
    state = json.loads(path.read_text())
    assert state["runs"]["ppo-CartPole-v1-seed0"]["status"] == "done"


@pytest.mark.parametrize(
    "state",
    [{}, {"runs": {}}, {"runs": {"ppo-CartPole-v1-seed0": {}}},
     {"runs": {"old-run": {"launches": []}}, "name": 3, "sweeps": []}],
)  # fmt: skip
def test_state_file_with_fields_left_out_is_used(tmp_path, fake, capsys, state):
    sweep = sw.parse_spec(spec(tmp_path, seeds=1), validate=False)
    sweep.folder.mkdir(parents=True)
    (sweep.folder / sw.STATE_NAME).write_text(json.dumps(state))
    result = sw.Scheduler(sweep, poll_s=0.02, live=False).run()
    assert result == {"ppo-CartPole-v1-seed0": "done"}  # a record of another run: not ours
    assert "warning" not in capsys.readouterr().err
    assert not (sweep.folder / (sw.STATE_NAME + ".damaged")).exists()


# ----------------------------------------------------------------------------- big grids


def big_spec(tmp_path, points=10):
    """agents 2 x envs 5 x grid points**4 x seeds 10: 10**6 runs at points=10."""
    grid = {"lr": [round(0.001 * (i + 1), 4) for i in range(points)],
            "gae_lambda": [round(0.9 + 0.005 * i, 4) for i in range(points)],
            "clip_eps": [round(0.1 + 0.01 * i, 3) for i in range(points)],
            "value_weight": [round(0.1 * (i + 1), 2) for i in range(points)]}  # fmt: skip
    envs = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "Pong-v5"]
    agents = ["ppo", {"agent": "ppo", "label": "ppo2", "set": {"num_envs": 4}}]
    return spec(tmp_path, agents=agents, envs=envs, grid=grid, seeds=10)


def test_a_million_run_grid_is_not_expanded(tmp_path):
    start = time.monotonic()
    sweep = sw.parse_spec(big_spec(tmp_path), validate=False)
    runs = sweep.runs
    assert len(runs) == 10**6 and time.monotonic() - start < 5
    assert runs.shape() == "2 agents × 5 envs × 10,000 grid points × 10 seeds"
    # Indexing agrees with iteration (the order the sweep runs them in) at both ends.
    head = list(itertools.islice(iter(runs), 25))
    assert head == [runs[i] for i in range(25)] and runs[-1] == runs[10**6 - 1]
    assert (
        runs[-1].name
        == "ppo2-Pong-v5-seed9-lr=0.01-gae_lambda=0.945-clip_eps=0.19-value_weight=1.0"
    )
    assert dict(runs[-1].flags) == {"total_steps": 2000, "num_envs": 4, "lr": 0.01,
                                    "gae_lambda": 0.945, "clip_eps": 0.19,
                                    "value_weight": 1.0}  # fmt: skip
    assert (
        runs[12345].name
        == "ppo-CartPole-v1-seed5-lr=0.002-gae_lambda=0.91-clip_eps=0.13-value_weight=0.5"
    )
    # The up-front check: each agent x env with every grid value once, not 10**6 runs.
    assert len(runs.cover()) == 2 * 5 * (1 + 4 * 9)


def test_small_grid_order_and_names_are_unchanged(tmp_path):
    data = spec(tmp_path, agents=["ppo", "a2c"], envs=["CartPole-v1", "MinAtar/Breakout-v1"],
                seeds=[3, 5], grid={"lr": [0.1, 0.2], "gae_lambda": [0.9, 0.95]})  # fmt: skip
    runs = sw.parse_spec(data, validate=False).runs
    expected = [
        f"{a}-{e.replace('/', '-')}-seed{s}-lr={lr}-gae_lambda={g}"
        for a, e, lr, g, s in itertools.product(
            ["ppo", "a2c"], data["envs"], [0.1, 0.2], [0.9, 0.95], [3, 5]
        )
    ]
    assert [r.name for r in runs] == expected == [runs[i].name for i in range(len(runs))]
    assert runs[1:3] == list(runs)[1:3]


@pytest.mark.slow
def test_a_sweep_over_the_limit_is_refused_and_dry_run_streams(tmp_path):
    (tmp_path / "big.yaml").write_text(json.dumps(big_spec(tmp_path)))  # JSON is YAML
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "experiments.sweep", str(tmp_path / "big.yaml")]
    refused = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        "error: sweep s has 1,000,000 runs (2 agents × 5 envs × 10,000 grid points × 10 "
        "seeds); a sweep runs at most 10,000 (its state file and table hold every run): "
        "split the grid into several sweeps"
    ]
    assert not (tmp_path / "s").exists()
    # --dry-run: the size at once, then the runs as they are made; a reader that stops
    # (`| head`) ends it without a traceback.
    one = big_spec(tmp_path) | {"agents": ["ppo"], "envs": ["CartPole-v1"]}  # a short cover
    (tmp_path / "big.yaml").write_text(json.dumps(one))
    proc = subprocess.Popen([*cmd, "--dry-run"], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    lines = [proc.stdout.readline() for _ in range(3)]
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert lines[0].startswith("sweep s: 100,000 runs (1 agent × 1 env × 10,000 grid points")
    assert lines[1].startswith("new      --agent ppo --env CartPole-v1 --seed 0 ")
    assert "Traceback" not in err and "running it is refused" in err, err


def test_runs_past_the_upfront_check_are_checked_as_they_come(tmp_path, fake, capsys, monkeypatch):
    # The up-front check covers each grid value once; a bad combination of two values it
    # did not try is refused when its run comes up: marked invalid, and the others run.
    monkeypatch.setattr(sw, "CHECK_ALL", 2)
    data = spec(tmp_path, seeds=1, grid={"num_seeds": [1, 2], "num_processes": [1, 2]})
    sweep = sw.parse_spec(data)
    assert sweep.check_each and len(sweep.runs) == 4
    bad = "ppo-CartPole-v1-seed0-num_seeds=2-num_processes=2"
    assert sw.dry_run(sweep) == {bad: "invalid"}
    out, err = capsys.readouterr()
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["new", "new", "new", "invalid"]
    assert len(err.splitlines()) == 1 and err.startswith(f"error: run {bad}: --num-seeds")
    result = sw.Scheduler(sweep, poll_s=0.02, live=False).run()
    assert result == {r.name: "invalid" if r.name == bad else "done" for r in sweep.runs}
    state = json.loads((sweep.folder / sw.STATE_NAME).read_text())
    assert state["runs"][bad]["error"].startswith(f"run {bad}: --num-seeds")
    assert not (sweep.folder / bad).exists()


def test_latest_metrics_reads_a_header_that_is_not_utf8_and_skips_what_is_not_a_file(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_bytes(b"env_steps,ret\xff\n10,1.5\n20,2.5\n")
    assert sw.latest_metrics(run) == {"env_steps": "20", "ret\ufffd": "2.5"}
    (run / "metrics.csv").unlink()
    os.mkfifo(run / "metrics.csv")  # opening it would wait for a writer
    assert sw.latest_metrics(run) == {}
