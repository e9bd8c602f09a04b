"""Checkpoints: round trip, the older layout that stored the actor key as an array, and a
run refusing a checkpoints/ folder that is a link."""

import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from engine.checkpoint import Checkpointer
from engine.common import checkpoint_tree, restore_checkpoint
from experiments import train

LEGACY_ACER = Path(__file__).resolve().parents[1] / "data" / "legacy_runs" / "acer"


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


class EpisodeLearner(NamedTuple):
    params: Any
    returns: Any  # episode state (as PPO's per-env discounted returns)

    EPISODE_FIELDS = ("returns",)


class OlderLearner(NamedTuple):  # the same learner state before it had `returns`
    params: Any


@pytest.mark.parametrize("population", [False, True])
def test_checkpoint_from_before_an_episode_field_restores_it_as_zeros(tmp_path, population):
    """A learner state that gained an episode field (PPO's `returns`, once kept beside the
    envs): its older checkpoints, which lack it, still restore (as a single run and as a
    population's stacked state), the field as zeros; a different mismatch is still told."""
    from engine.population import PopulationLearner

    w = {"w": jnp.arange(6.0).reshape(2, 3)}
    old, new = OlderLearner(w), EpisodeLearner(w, jnp.ones(4))
    if population:
        old, new = PopulationLearner(old, {}), PopulationLearner(new, {})
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(5, checkpoint_tree(old), {"counters": {"env_steps": 5}})
    restored, _, step = restore_checkpoint(ckpt, jax.tree.map(jnp.zeros_like, new))
    inner = restored.member if population else restored
    assert step == 5 and type(restored) is type(new)
    np.testing.assert_array_equal(inner.params["w"], w["w"])
    np.testing.assert_array_equal(inner.returns, np.zeros(4, np.float32))
    other = EpisodeLearner({"v": jnp.zeros(3)}, jnp.ones(4))
    other = PopulationLearner(other, {}) if population else other
    with pytest.raises(ValueError, match=r"not saved: learner/.*v"):
        restore_checkpoint(ckpt, other)


class WithEmpty(NamedTuple):  # the learner state after it gained a field empty when off
    params: Any
    step: jax.Array
    icm: Any = ()  # as PPO's and DQN's ICM state without --icm-coef


@pytest.mark.parametrize("population", [False, True])
def test_an_empty_field_added_or_taken_out_since_the_checkpoint_changes_nothing(
    tmp_path, population
):
    """A learner state that gained a field holding no arrays (`icm=()`): its checkpoints from
    before still restore, and the other way round (a checkpoint holding the empty field, a
    state without it); the arrays come back, the state's type and empty value are its own.
    A field with arrays that was not saved is still a mismatch."""
    from engine.population import PopulationLearner

    wrap = (lambda x: PopulationLearner(x, {})) if population else (lambda x: x)
    old, new = wrap(_learner()), wrap(WithEmpty(*_learner()))
    for saved, target, name in ((old, new, "a"), (new, old, "b")):
        ckpt = Checkpointer(tmp_path / name)
        ckpt.save(5, checkpoint_tree(saved), {"counters": {"env_steps": 5}})
        zeros = jax.tree.map(jnp.zeros_like, target)
        for exact in (None, {"replay": jnp.zeros(2)}):
            if exact is not None:
                ckpt = Checkpointer(tmp_path / f"{name}-exact")
                ckpt.save(5, checkpoint_tree(saved), {"counters": {}}, exact=exact)
            out, _, step = restore_checkpoint(ckpt, zeros, exact=exact)
            restored = out if exact is None else out[0]
            inner = restored.member if population else restored
            assert step == 5 and type(restored) is type(target)
            np.testing.assert_array_equal(inner.params["w"], _learner().params["w"])
            assert int(inner.step) == 7
            assert getattr(inner, "icm", ()) == ()
    with pytest.raises(ValueError, match=r"not saved: learner/.*icm"):
        restore_checkpoint(Checkpointer(tmp_path / "a"), wrap(WithEmpty(*_learner(), jnp.ones(2))))


def test_resume_with_checkpoints_linked_elsewhere_is_refused_before_training(tmp_path, capsys):
    """A resumed run would rotate (delete) integer-named folders where checkpoints/ leads."""
    run = tmp_path / "run"
    shutil.copytree(LEGACY_ACER, run)
    outside = tmp_path / "photos"
    shutil.move(run / "checkpoints", outside)  # its checkpoint 20, beside someone's folders
    for name in ("1", "2"):
        (outside / name).mkdir()
        (outside / name / "photo.jpg").write_bytes(b"jpeg")
    os.symlink(outside, run / "checkpoints")
    before = sorted(p.relative_to(outside) for p in outside.rglob("*"))
    with pytest.raises(SystemExit) as info:
        train.main(["--resume", str(run), "--total-steps", "80", "--no-progress",
                    "--num-devices", "1", "--eval-episodes", "0"])  # fmt: skip
    message = str(info.value)
    assert message.startswith(f"error: refusing to write in {run / 'checkpoints'}: it is a")
    assert "\n" not in message and capsys.readouterr().err == ""
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == before
    assert not (run / ".lock").exists()  # refused before the run took its folder
