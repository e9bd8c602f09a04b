"""Train an agent: `python -m experiments.train [--preset NAME] [--env ID] [...]`.

With no arguments it trains ACER on CartPole-v1 and evaluates it at the end. See --help.
The script only wires components together: env (envs/), agent (agents/), logging and
checkpoints (experiments/).
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import signal
import sys
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from agents.evaluation import evaluate
from agents.parallel import check_divisible, local_replica, make_mesh
from envs import make_env
from experiments.args import TrainArgs, parse_train_args
from experiments.checkpoint import Checkpointer
from experiments.common import (
    build_agent,
    checkpoint_meta,
    checkpoint_tree,
    load_args,
    restore_checkpoint,
)
from experiments.runlog import RunLogger, write_json_atomic

METRIC_ORDER = ("policy_loss", "value_loss", "loss", "grad_norm", "entropy", "q_ret_mean")
CSV_COLUMNS = [
    "env_steps",
    "frames",
    "iteration",
    "updates",
    "episodes",
    "return_mean",
    "length_mean",
    "loss",
    "policy_loss",
    "value_loss",
    "entropy",
    "grad_norm",
    "q_ret_mean",
    "rho_mean",
    "tr_active",
    "tr_scale",
    "td_abs",
    "replay_updates",
    "sps",
    "wall_s",
]


class NonFiniteError(RuntimeError):
    pass


def resolve_run_dir(args: TrainArgs) -> Path:
    if args.run_dir:
        return Path(args.run_dir)
    name = args.exp_name or f"{args.agent}-{args.env}-seed{args.seed}"
    return Path("runs") / name


def load_resume_args(run_dir: Path, argv: list[str], cli: TrainArgs) -> TrainArgs:
    """The resumed run's saved args; only --total-steps, --max-minutes and --progress may
    change."""
    saved = load_args(run_dir)
    explicit = {a.split("=")[0] for a in argv if a.startswith("--")}
    changes = {"resume": str(run_dir), "run_dir": str(run_dir), "max_minutes": cli.max_minutes}
    if "--total-steps" in explicit:
        changes["total_steps"] = cli.total_steps
    if explicit & {"--progress", "--no-progress"}:
        changes["progress"] = cli.progress
    return dataclasses.replace(saved, **changes)


class StopRequest:
    """Ends training early but cleanly: after `max_minutes`, or on SIGTERM / SIGINT, the
    loop finishes its iteration, checkpoints, evaluates and writes summary.json. A second
    signal aborts at once (the default handler)."""

    def __init__(self, max_minutes: float | None):
        self.max_minutes = max_minutes
        self.deadline = math.inf if max_minutes is None else time.monotonic() + 60 * max_minutes
        self.reason: str | None = None
        self._previous: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous = signal.signal(sig, self._on_signal)
                # None: a handler not installed from Python; restore the default then.
                self._previous[sig] = signal.SIG_DFL if previous is None else previous
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _on_signal(self, signum, frame):
        name = signal.Signals(signum).name
        signal.signal(signum, self._previous.pop(signum))  # the next one aborts
        self.reason = self.reason or name
        print(f"{name}: stopping after this iteration (send it again to abort)", file=sys.stderr)

    def requested(self) -> bool:
        """Whether to stop now; every process of a multi-process run gets process 0's answer."""
        if self.reason is None and time.monotonic() >= self.deadline:
            self.reason = f"max_minutes={self.max_minutes:g}"
        stop = self.reason is not None
        if jax.process_count() > 1:  # one decision, or the collectives would hang
            from jax.experimental import multihost_utils

            stop = bool(multihost_utils.broadcast_one_to_all(np.int32(stop)))
            self.reason = self.reason or ("process 0" if stop else None)
        return stop


def frames_per_step(env) -> int:
    return 4 if env.spec.is_atari else 1


def check_finite(metrics: list[dict], iteration: int, env_steps: int, last_ckpt: str):
    for k, m in enumerate(metrics):
        for name in (*METRIC_ORDER, *sorted(m)):
            value = float(m[name])
            if not math.isfinite(value):
                kind = "on-policy update" if k == 0 else f"replay update {k}"
                raise NonFiniteError(
                    f"non-finite {name} ({value}) in the {kind} of iteration {iteration} "
                    f"(env step {env_steps}); run stopped, last good checkpoint: {last_ckpt}"
                )


def init_distributed(args: TrainArgs):
    """Join the multi-controller runtime (must run before any other JAX call)."""
    if args.num_processes > 1 or args.coordinator_address:
        if not args.coordinator_address:
            raise SystemExit("error: --num-processes > 1 needs --coordinator-address HOST:PORT")
        if not 0 <= args.process_id < args.num_processes:
            raise SystemExit(
                f"error: --process-id {args.process_id} is not in [0, {args.num_processes})"
            )
        jax.distributed.initialize(
            coordinator_address=args.coordinator_address,
            num_processes=args.num_processes,
            process_id=args.process_id,
        )


def main(argv: list[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_train_args(argv)
    init_distributed(args)
    lead = jax.process_index() == 0  # only process 0 writes files
    resuming = args.resume is not None
    if resuming:
        args = load_resume_args(Path(args.resume), argv, args)
    run_dir = resolve_run_dir(args)
    ckpt_dir = run_dir / "checkpoints"
    if not resuming and ckpt_dir.exists() and any(ckpt_dir.iterdir()):
        raise SystemExit(
            f"error: {run_dir} already holds checkpoints; pass --resume {run_dir} to continue "
            "it, or choose another --exp-name / --run-dir"
        )
    if args.debug:
        jax.config.update("jax_debug_nans", True)

    try:  # bad input (unknown env, impossible config, replay too large) -> one-line error
        procs = jax.process_count()
        check_divisible("num_envs", args.num_envs, procs, "processes")
        mesh = make_mesh(args.num_devices)
        env = make_env(
            args.env,
            args.num_envs // procs,
            args.seed + 1000 * jax.process_index(),
            train=True,
            reward_clip=args.reward_clip,
            num_threads=args.num_threads,
        )
        agent = build_agent(args, env, mesh)
        config = agent.config
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    run_dir.mkdir(parents=True, exist_ok=True)
    state = agent.init(jax.random.PRNGKey(args.seed))
    checkpointer = Checkpointer(ckpt_dir, keep=args.keep_checkpoints)

    counters = {"env_steps": 0, "iteration": 0, "episodes": 0, "updates": 0, "wall_s": 0.0}
    last_ckpt = "none"
    if resuming:
        restored, meta, step = restore_checkpoint(checkpointer, checkpoint_tree(state))
        learner = type(state.learner)(**restored["learner"])
        state = state._replace(learner=learner)
        counters = meta["counters"]
        actor_key = jax.random.fold_in(
            jnp.asarray(meta["actor_key"], jnp.uint32), counters["iteration"]
        )
        actor_key = jax.random.fold_in(actor_key, jax.process_index())
        state = agent.restart_actor(state, actor_key)
        last_ckpt = str(ckpt_dir / str(step))
        print(f"resumed {run_dir} from checkpoint at env step {step}", file=sys.stderr)

    if lead:
        write_json_atomic(
            run_dir / "config.json",
            {
                "args": dataclasses.asdict(args),
                "agent_config": dataclasses.asdict(config),
                "env_spec": {
                    "env_id": env.spec.env_id,
                    "obs_shape": list(env.spec.obs_shape),
                    "num_actions": env.spec.num_actions,
                    "backend": env.spec.backend,
                    "is_atari": env.spec.is_atari,
                },
                "replay_bytes_per_transition": agent.bytes_per_transition,
                "jax": jax.__version__,
                "devices": [
                    str(d) for d in (agent.mesh.devices.flat if agent.mesh else jax.devices()[:1])
                ],
                "processes": jax.process_count(),
                "python": platform.python_version(),
            },
        )

    compile_s = agent.compile(state)
    logger = RunLogger(
        run_dir,
        CSV_COLUMNS,
        args.total_steps,
        start_step=counters["env_steps"],
        tensorboard=not args.debug,
        progress=args.progress and lead,
        write=lead,
        return_window=args.return_window,
    )
    steps_per_iter = config.trace_len * config.num_envs
    fps = frames_per_step(env)
    steady_steps, steady_time = 0, 0.0
    lengths = []
    next_ckpt = (counters["env_steps"] // args.checkpoint_every + 1) * args.checkpoint_every
    stop = StopRequest(args.max_minutes)
    with stop:
        try:
            while counters["env_steps"] < args.total_steps:
                t0 = time.perf_counter()
                state, out = agent.train_iteration(
                    state, counters["iteration"], counters["env_steps"]
                )
                host = jax.device_get(out)  # the one host sync of the iteration
                dt = time.perf_counter() - t0
                check_finite(host.metrics, counters["iteration"], counters["env_steps"], last_ckpt)

                counters["iteration"] += 1
                counters["env_steps"] += steps_per_iter
                counters["updates"] += len(host.metrics)
                counters["wall_s"] += dt
                over = np.asarray(host.game_over)
                counters["episodes"] += int(over.sum())
                logger.add_returns(np.asarray(host.finished_return)[over])
                lengths = (lengths + list(np.asarray(host.finished_length)[over]))[
                    -args.return_window :
                ]
                if counters["iteration"] > 1:
                    steady_steps += steps_per_iter
                    steady_time += dt
                keys = host.metrics[0] if host.metrics else {}
                mean = {k: float(np.mean([m[k] for m in host.metrics])) for k in keys}
                row = {
                    **mean,
                    "env_steps": counters["env_steps"],
                    "frames": counters["env_steps"] * fps,
                    "iteration": counters["iteration"],
                    "updates": counters["updates"],
                    "episodes": counters["episodes"],
                    "return_mean": logger.return_mean,
                    "length_mean": float(np.mean(lengths)) if lengths else math.nan,
                    "replay_updates": len(host.metrics) - agent.on_policy_updates,
                    "sps": steps_per_iter / dt,
                    "wall_s": counters["wall_s"],
                }
                logger.log(row, steps_per_iter)
                stopping = stop.requested()
                if (
                    stopping
                    or counters["env_steps"] >= next_ckpt
                    or counters["env_steps"] >= args.total_steps
                ):
                    path = checkpointer.save(
                        counters["env_steps"],
                        checkpoint_tree(state),
                        checkpoint_meta(state, counters),
                    )
                    last_ckpt = str(path)
                    next_ckpt = (counters["env_steps"] // args.checkpoint_every + 1) * (
                        args.checkpoint_every
                    )
                if stopping:
                    break
        except NonFiniteError as err:
            logger.close()
            agent.close()
            raise SystemExit(f"error: {err}") from None
    logger.close()
    checkpointer.close()
    agent.close()
    if jax.process_count() > 1:  # lets users (and the tests) see that replicas agree
        local = jax.device_get(local_replica(state.learner.params))
        checksum = sum(
            float(np.abs(np.asarray(x, np.float64)).sum()) for x in jax.tree.leaves(local)
        )
        print(f"process {jax.process_index()}: params checksum {checksum:.12e}", flush=True)
    if not lead:
        return None  # process 0 evaluates and writes the summary

    eval_env = make_env(args.env, min(args.eval_episodes, 16), args.seed + 10_000, train=False)
    t0 = time.perf_counter()
    returns, _ = evaluate(
        agent.act_fn(args.eval_greedy),
        local_replica(state.learner.params) if agent.mesh else state.learner.params,
        eval_env,
        args.eval_episodes,
        jax.random.PRNGKey(args.seed + 1),
        agent._initial_core(eval_env.spec.num_envs),
    )
    eval_s = time.perf_counter() - t0
    summary = {
        "agent": args.agent,
        "env": args.env,
        "preset": args.preset,
        "seed": args.seed,
        "env_steps": counters["env_steps"],
        "frames": counters["env_steps"] * fps,
        "episodes": counters["episodes"],
        "updates": counters["updates"],
        "wall_s": counters["wall_s"],
        "sps": steady_steps / steady_time if steady_time else math.nan,
        "compile_s": compile_s,
        "train_return_mean": logger.return_mean,
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "eval_episodes": len(returns),
        "eval_policy": "greedy" if args.eval_greedy else "sample",
        "eval_s": eval_s,
        "replay_bytes_per_transition": agent.bytes_per_transition,
        "devices": agent.shards,
        "processes": jax.process_count(),
        "last_checkpoint": last_ckpt,
        "stopped_by": stop.reason or "total_steps",
    }
    write_json_atomic(run_dir / "summary.json", summary)
    early = f" (stopped early: {stop.reason})" if stop.reason else ""
    print(
        f"{args.agent} on {args.env}: {counters['env_steps']} env steps{early} in "
        f"{counters['wall_s']:.1f} s ({summary['sps']:.0f} steps/s, compile {compile_s:.1f} s); "
        f"eval return {summary['eval_return_mean']:.1f} ± {summary['eval_return_std']:.1f} "
        f"over {len(returns)} episodes -> {run_dir}/summary.json"
    )
    return summary


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
