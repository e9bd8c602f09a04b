"""Train an agent: `python -m experiments.train [--agent NAME] [--preset NAME] [flags]`.

With no arguments it trains ACER on CartPole-v1 and evaluates it at the end. The flags are
the run options (experiments/args.py) and the chosen agent's config fields; see
`--help` and `--agent reactor --help`. The loop itself is experiments/runner.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from experiments.args import flag_value, parse_train_args, resume_args
from experiments.checkpoint import CheckpointError
from experiments.common import load_run
from experiments.runfolder import RunFolderLocked
from experiments.runner import Runner, init_distributed


def parse(argv: list[str]):
    """(args, resuming) of a command line; every bad input is a one-line SystemExit."""
    resume = flag_value(argv, "--resume")
    if resume is None:
        return parse_train_args(argv), False
    try:
        saved = load_run(Path(resume))
        return resume_args(argv, saved), True
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def main(argv: list[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, resuming = parse(argv)
    try:
        init_distributed(args)
        return Runner(args, resuming).run()
    except (ValueError, RunFolderLocked, CheckpointError, OSError) as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
