"""Helpers shared by the experiment scripts: building an agent from saved args and loading
checkpoints of a run folder."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp

from agents.acer.agent import ACERAgent
from experiments.args import TrainArgs
from experiments.checkpoint import Checkpointer


def checkpoint_tree(state) -> dict:
    """What a checkpoint holds: the whole learner state and the actor's RNG key. The replay
    and the env states are not saved; a resumed run refills its replay."""
    return {"learner": state.learner._asdict(), "actor_key": state.actor.key}


def load_args(run_dir: Path) -> TrainArgs:
    cfg_path = Path(run_dir) / "config.json"
    if not cfg_path.exists():
        raise SystemExit(f"error: {run_dir} is not a run folder (no config.json)")
    saved = json.loads(cfg_path.read_text())["args"]
    saved["hidden"] = tuple(saved["hidden"])
    return TrainArgs(**saved)


def restore_learner(agent: ACERAgent, run_dir: Path, step: int | None = None):
    """Restore the learner state of a run without building its replay or stepping envs.

    Returns (learner_state, meta, step).
    """
    spec = agent.env.spec
    sample_obs = jnp.zeros((spec.num_envs, *spec.obs_shape), spec.obs_dtype)
    learner = jax.eval_shape(agent.learner.init, jax.random.PRNGKey(0), sample_obs)
    target = {"learner": learner._asdict(), "actor_key": jax.ShapeDtypeStruct((2,), jnp.uint32)}
    checkpointer = Checkpointer(Path(run_dir) / "checkpoints")
    try:
        restored, meta, step = checkpointer.restore(target, step)
    finally:
        checkpointer.close()
    return type(learner)(**restored["learner"]), meta, step
