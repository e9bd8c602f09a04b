"""Helpers shared by the experiment scripts: building an agent from saved args and loading
checkpoints of a run folder."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from agents.acer.agent import ACERAgent
from experiments.args import TrainArgs
from experiments.checkpoint import Checkpointer


def build_agent(args: TrainArgs, env, mesh=None, seed: int | None = None):
    """The agent named by `args.agent`, configured from `args`."""
    seed = args.seed if seed is None else seed
    if args.agent == "reactor":
        from agents.reactor.agent import ReactorAgent

        config = args.reactor_config().replace(num_envs=env.spec.num_envs * jax.process_count())
        return ReactorAgent(config, env, seed=seed, mesh=mesh)
    config = args.acer_config().replace(num_envs=env.spec.num_envs * jax.process_count())
    return ACERAgent(config, env, seed=seed, mesh=mesh)


def checkpoint_tree(state) -> dict:
    """The arrays a checkpoint holds: the whole learner state (replicated over the mesh when
    data parallel). The actor's RNG key and the counters go into the JSON metadata
    (`checkpoint_meta`). The replay and the env states are not saved; a resumed run refills
    its replay and starts new episodes."""
    return {"learner": state.learner._asdict()}


def checkpoint_meta(state, counters: dict) -> dict:
    key = np.asarray(jax.device_get(state.actor.key)).astype(np.uint32).tolist()
    return {"counters": dict(counters), "actor_key": key}


def restore_checkpoint(checkpointer: Checkpointer, target: dict, step: int | None = None):
    """Restore `target` ({"learner": ...}); returns (restored, meta, step).

    Checkpoints written before the actor's RNG key moved into the JSON metadata also hold an
    `actor_key` array; those still load (the key is then read from that array)."""
    try:
        return checkpointer.restore(target, step)
    except ValueError:
        legacy = {**target, "actor_key": jax.ShapeDtypeStruct((2,), jnp.uint32)}
        restored, meta, step = checkpointer.restore(legacy, step)
        meta.setdefault("actor_key", np.asarray(restored.pop("actor_key")).tolist())
        return restored, meta, step


def load_args(run_dir: Path) -> TrainArgs:
    cfg_path = Path(run_dir) / "config.json"
    if not cfg_path.exists():
        raise SystemExit(f"error: {run_dir} is not a run folder (no config.json)")
    saved = json.loads(cfg_path.read_text())["args"]
    saved["hidden"] = tuple(saved["hidden"])
    return TrainArgs(**saved)


def restore_learner(agent, run_dir: Path, step: int | None = None):
    """Restore the learner state of a run without building its replay or stepping envs.

    Returns (learner_state, meta, step).
    """
    spec = agent.env.spec
    sample_obs = jnp.zeros((spec.num_envs, *spec.obs_shape), spec.obs_dtype)
    learner = jax.eval_shape(agent.learner.init, jax.random.PRNGKey(0), sample_obs)
    target = {"learner": learner._asdict()}
    checkpointer = Checkpointer(Path(run_dir) / "checkpoints")
    try:
        restored, meta, step = restore_checkpoint(checkpointer, target, step)
    finally:
        checkpointer.close()
    return type(learner)(**restored["learner"]), meta, step
