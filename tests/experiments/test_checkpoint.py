"""Checkpoints: round trip, and the older layout that stored the actor key as an array."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments.checkpoint import Checkpointer
from experiments.common import checkpoint_tree, restore_checkpoint


class Learner(NamedTuple):
    params: Any
    step: jax.Array


def _learner():
    return Learner({"w": jnp.arange(6.0).reshape(2, 3)}, jnp.int32(7))


def test_round_trip_and_latest_step(tmp_path):
    ckpt = Checkpointer(tmp_path / "c", keep=2)
    for step in (10, 20, 30):
        ckpt.save(step, checkpoint_tree(_learner()), {"counters": {"env_steps": step}})
    assert ckpt.latest_step() == 30
    assert sorted(int(p.name) for p in (tmp_path / "c").iterdir() if p.name.isdigit()) == [20, 30]
    restored, meta, step = restore_checkpoint(ckpt, jax.tree.map(jnp.zeros_like, _learner()))
    assert isinstance(restored, Learner)
    np.testing.assert_array_equal(restored.params["w"], _learner().params["w"])
    assert meta["counters"]["env_steps"] == 30 and step == 30


def test_legacy_layout_with_actor_key_array_still_loads(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    legacy = {**checkpoint_tree(_learner()), "actor_key": jax.random.PRNGKey(3)}
    ckpt.save(5, legacy, {"counters": {"env_steps": 5}})
    restored, meta, _ = restore_checkpoint(ckpt, jax.tree.map(jnp.zeros_like, _learner()))
    assert int(restored.step) == 7 and meta["counters"]["env_steps"] == 5
    assert (tmp_path / "c" / "5").exists()  # a structure mismatch is not damage: not moved
