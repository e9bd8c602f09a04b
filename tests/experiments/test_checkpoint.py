"""Checkpoints: round trip, and the older layout that stored the actor key as an array."""

import jax
import jax.numpy as jnp
import numpy as np

from experiments.checkpoint import Checkpointer
from experiments.common import restore_checkpoint


def _learner():
    return {"params": {"w": jnp.arange(6.0).reshape(2, 3)}, "step": jnp.int32(7)}


def test_round_trip_and_latest_step(tmp_path):
    ckpt = Checkpointer(tmp_path / "c", keep=2)
    for step in (10, 20, 30):
        ckpt.save(step, {"learner": _learner()}, {"counters": {"env_steps": step}})
    assert ckpt.latest_step() == 30
    assert sorted(int(p.name) for p in (tmp_path / "c").iterdir()) == [20, 30]  # keep=2
    target = {"learner": jax.tree.map(jnp.zeros_like, _learner())}
    restored, meta, step = restore_checkpoint(ckpt, target)
    np.testing.assert_array_equal(restored["learner"]["params"]["w"], _learner()["params"]["w"])
    assert meta["counters"]["env_steps"] == 30 and step == 30


def test_legacy_layout_with_actor_key_array_still_loads(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    key = jax.random.PRNGKey(3)
    ckpt.save(5, {"learner": _learner(), "actor_key": key}, {"counters": {"env_steps": 5}})
    target = {"learner": jax.tree.map(jnp.zeros_like, _learner())}
    restored, meta, _ = restore_checkpoint(ckpt, target)
    assert set(restored) == {"learner"}
    assert meta["actor_key"] == np.asarray(key).tolist()
    assert int(restored["learner"]["step"]) == 7
