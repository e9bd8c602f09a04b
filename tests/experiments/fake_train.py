"""A stand-in for `python -m experiments.train` in the sweep tests (SWEEP_TRAIN_CMD): it
writes a run folder of the same layout (config.json, metrics.csv, checkpoints/<step>/,
summary.json) in 500-step iterations of FAKE_STEP_S seconds, holds the run folder's lock,
resumes from its last checkpoint, stops cleanly on SIGTERM (in FAKE_FINISH_S; a second
SIGTERM kills it), and appends one line per
launch to <sweep>/invocations.jsonl: what the tests audit. With FAKE_OVERLAP=N a launch
waits (up to 30 s) until N launches have started before it steps, so a test of concurrency
does not depend on how fast a loaded machine starts processes."""

import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from engine.runfolder import RunLock, write_json_atomic


def value(argv, name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


def main(argv):
    resume = value(argv, "--resume")
    run_dir = Path(resume or value(argv, "--run-dir"))
    lock = RunLock(run_dir).acquire()
    if resume:
        config = json.loads((run_dir / "config.json").read_text())
    else:
        config = {"agent": value(argv, "--agent"), "run": {
            "agent": value(argv, "--agent"), "env": value(argv, "--env"),
            "seed": int(value(argv, "--seed")), "total_steps": 2000}}  # fmt: skip
    run = config["run"]
    run["total_steps"] = int(value(argv, "--total-steps", run["total_steps"]))
    write_json_atomic(run_dir / "config.json", config)
    ckpts = sorted(int(p.name) for p in (run_dir / "checkpoints").glob("*") if p.is_dir())
    step = ckpts[-1] if resume and ckpts else 0
    record = {"run": run_dir.name, "mode": "resume" if resume else "fresh", "from": step,
              "pid": os.getpid(), "start": time.time(), "cpus": sorted(os.sched_getaffinity(0)),
              "device": os.environ.get("CUDA_VISIBLE_DEVICES")}  # fmt: skip
    log(run_dir, {"event": "start", **record})
    overlap, deadline = int(os.environ.get("FAKE_OVERLAP", "0")), time.time() + 30
    while started(run_dir) < overlap and time.time() < deadline:
        time.sleep(0.02)
    stop = []

    def on_term(*_):  # as train: the first SIGTERM stops cleanly, a second one kills
        stop.append(1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        log(run_dir, {"event": "term", "run": run_dir.name, "pid": os.getpid()})

    signal.signal(signal.SIGTERM, on_term)
    if run["env"] == "Fail-v0":
        raise SystemExit("error: this env always fails")
    metrics = run_dir / "metrics.csv"
    if not metrics.exists():
        metrics.write_text("env_steps,return_mean,wall_s\n")
    while step < run["total_steps"] and not stop:
        time.sleep(float(os.environ.get("FAKE_STEP_S", "0.05")))
        step += 500
        with open(metrics, "a") as f:
            f.write(f"{step},{step / 100 + run['seed']},{step / 1000}\n")
        (run_dir / "checkpoints" / str(step)).mkdir(parents=True, exist_ok=True)
        if run["env"] == "Stop-v0":  # stops itself cleanly, as --max-minutes does
            stop.append("max_minutes=1")
    if stop:  # the last checkpoint and evaluation take FAKE_FINISH_S
        time.sleep(float(os.environ.get("FAKE_FINISH_S", "0")))
    record["end"], record["to"] = time.time(), step
    stopped_by = ("signal" if stop[0] == 1 else stop[0]) if stop else "total_steps"
    summary = {"env_steps": step, "eval_return_mean": step / 100, "wall_s": step / 1000,
               "sps": 1000.0, "stopped_by": stopped_by}  # fmt: skip
    write_json_atomic(run_dir / "summary.json", summary)
    log(run_dir, {"event": "end", **record})
    lock.close()


def started(run_dir) -> int:
    lines = (run_dir.parent / "invocations.jsonl").read_text().splitlines()
    return sum(json.loads(line)["event"] == "start" for line in lines)


def log(run_dir, record):
    with open(run_dir.parent / "invocations.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
