"""Train an agent: `python -m experiments.train [--agent NAME] [--preset NAME] [flags]`.

With no arguments it trains ACER on CartPole-v1 and evaluates it at the end. The flags are
the run options (engine/args.py) and the chosen agent's config fields; see
`--help` and `--agent reactor --help`. The loop itself is engine/runner.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.args import flag_value, parse_train_args, resume_args
from engine.checkpoint import CheckpointError, holds_intact_step
from engine.common import load_run, trained_hooks, use_compile_cache
from engine.evaluation import EvaluationError
from engine.runfolder import (
    RunFolderLocked,
    check_run_dir_writable,
    read_json,
    summary_member_steps,
)
from engine.runner import Runner, init_distributed, resolve_run_dir


def parse(argv: list[str]):
    """(args, resuming) of a command line; every bad input is a one-line SystemExit."""
    resume = flag_value(argv, "--resume")
    if resume is None:
        return parse_train_args(argv), False
    try:
        if not resume.strip():
            raise ValueError("--resume must be a run folder, got ''")
        try:
            saved, hooks = load_run(Path(resume)), trained_hooks(Path(resume))
            member = read_json(Path(resume) / "config.json", "run config").get("population")
        except ValueError as err:
            raise ValueError(f"--resume: {err}") from None
        if member is not None:  # resuming it would overwrite the member's config as a run's
            raise ValueError(
                f"--resume: {resume} is a member of a population (its config.json has a "
                f"'population' block): resume the population's folder, {Path(resume).parent}"
            )
        return resume_args(argv, saved, hooks), True
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def finished_run(run_dir: Path, total_steps: int) -> tuple[dict, str] | None:
    """(its summary, a line saying so) when the run in `run_dir` has trained `total_steps`
    env steps per member already (its summary.json says so, however it stopped, as the
    sweep judges it, and a checkpoint that far matches its checksums): a resume then
    compiles, trains, evaluates and rewrites nothing. None without a readable summary (a run
    killed before it wrote one, a damaged file: the resume goes on and writes it anew) or
    without that checkpoint (the resume sets damaged ones aside and starts over)."""
    path = run_dir / "summary.json"
    try:
        summary = read_json(path, "summary") if path.is_file() else {}
        done = summary_member_steps(summary, path)
    except ValueError:
        return None
    if done is None or done < total_steps:
        return None
    if not holds_intact_step(run_dir / "checkpoints", total_steps):
        return None  # its checkpoint is damaged or gone: the resume sets it aside, starts over
    target = run_dir / "member-<i>" if "members" in summary else run_dir
    return summary, (
        f"{run_dir} already trained to env step {done:,} (--total-steps {total_steps:,}): "
        f"nothing to do; give a larger --total-steps to train on, or evaluate it with "
        f"python -m experiments.evaluate {target}"
    )


def check_run_folder(args, resuming: bool) -> None:
    """Whether the run folder can be made and written, before anything is built; the error
    names the flag that chose the folder."""
    run = args.run
    chosen_by = "--resume" if resuming else "--run-dir" if run.run_dir else "--exp-name"
    try:
        check_run_dir_writable(resolve_run_dir(args))
    except ValueError as err:
        raise ValueError(f"{chosen_by}: {err}") from None


def main(argv: list[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, resuming = parse(argv)
    try:
        if resuming and (done := finished_run(resolve_run_dir(args), args.run.total_steps)):
            summary, line = done
            print(line, file=sys.stderr)
            return summary
        if args.run.process_id == 0:  # the process that writes the run folder
            check_run_folder(args, resuming)
        init_distributed(args)
        use_compile_cache()
        return Runner(args, resuming).run()
    except (ValueError, RunFolderLocked, CheckpointError, EvaluationError, OSError) as err:
        raise SystemExit(f"error: {err}") from None


def command() -> None:
    """The `reactor-train` command (pyproject.toml): `main` without its return value."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()


if __name__ == "__main__":
    command()
