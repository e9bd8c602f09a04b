"""Pytree (dict) observations in envs/: MiniGrid through the gymnasium adapter, the mission
vocabulary, the spaces table and the errors."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import ArraySpec, EnvSpec, make_env, obs_spec_json, obs_zeros
from envs.core import finalize_step
from envs.spaces import space_converter
from envs.text import (
    HASH_BUCKETS,
    MISSION_VOCAB_SIZE,
    MISSION_WORDS,
    encode_mission,
    encode_missions,
)

DOORKEY = "MiniGrid-DoorKey-5x5-v0"
DOORKEY_MISSION = "use the key to open the door and then get to the goal"
TEXT_PY = Path(__file__).resolve().parents[2] / "envs" / "text.py"


@pytest.fixture(scope="module")
def doorkey():
    with make_env(DOORKEY, 2, seed=5) as env:
        yield env


def test_minigrid_spec(doorkey):
    spec = doorkey.spec
    assert spec.backend == "gymnasium" and spec.pytree_obs and spec.frame_stack == 1
    assert spec.obs_shape is None and spec.obs_dtype is None
    assert spec.discrete and spec.num_actions == 7 and spec.max_episode_steps == 250
    assert spec.obs_spec == {
        "direction": ArraySpec((), np.int32, num_values=4),
        "image": ArraySpec((7, 7, 3), np.uint8),
        "mission": ArraySpec((64,), np.int32, num_values=MISSION_VOCAB_SIZE, tokens=True),
    }
    assert json.loads(json.dumps(obs_spec_json(spec.obs_spec)))["image"] == {
        "shape": [7, 7, 3],
        "dtype": "uint8",
    }
    with pytest.raises(ValueError, match=r"array observations only; MiniGrid-DoorKey-5x5-v0"):
        spec.require_array_obs("this agent")


def test_minigrid_obs_are_the_gymnasium_obs(doorkey):
    """Each env's converted obs equals a plain gymnasium env's with the same seed and
    actions: the image as is, the direction as int32, the mission as its word ids."""
    actions = np.array([[2, 1], [0, 2], [2, 2], [1, 0]], np.int32)
    got = [doorkey.reset()] + [doorkey.step(a) for a in actions]
    for i in range(2):
        ref = gymnasium.make(DOORKEY)
        obs, _ = ref.reset(seed=5 + i)
        for t, ts in enumerate(got):
            if t > 0:
                obs, *_ = ref.step(int(actions[t - 1, i]))
            np.testing.assert_array_equal(ts.obs["image"][i], obs["image"])
            assert ts.obs["direction"].dtype == np.int32
            assert ts.obs["direction"][i] == obs["direction"]
            words = obs["mission"].split()
            ids = [MISSION_WORDS.index(w) + 1 for w in words]
            np.testing.assert_array_equal(ts.obs["mission"][i], ids + [0] * (64 - len(ids)))


def test_mission_ids_are_fixed():
    """The ids are part of every checkpoint trained with the mission: they must never move.
    The known words are append-only and alphabetical; DoorKey's mission has these ids."""
    digest = hashlib.sha256("\n".join(MISSION_WORDS[:58]).encode()).hexdigest()[:16]
    assert digest == "ef640b5999870d3b", (
        "the first 58 MISSION_WORDS changed: only appending is allowed"
    )
    assert list(MISSION_WORDS[:58]) == sorted(MISSION_WORDS[:58])
    assert MISSION_VOCAB_SIZE == 1 + len(MISSION_WORDS) + HASH_BUCKETS
    ids = encode_mission(DOORKEY_MISSION, 16)
    np.testing.assert_array_equal(ids, [54, 47, 26, 49, 36, 47, 11, 4, 48, 19, 49, 47, 21, 0, 0, 0])
    assert ids.dtype == np.int32
    # Case and punctuation do not matter; torch-ac splits the same way.
    np.testing.assert_array_equal(encode_mission("Use the KEY, to", 4), [54, 47, 26, 49])


def test_unknown_words_hash_the_same_in_every_process():
    """Unknown words get CRC-32 buckets, not Python's salted hash: two processes with
    different hash seeds agree (envs/text.py is loaded on its own, numpy only)."""
    code = (
        "import importlib.util, sys; "
        f"s = importlib.util.spec_from_file_location('text', {str(TEXT_PY)!r}); "
        "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
        "print(m.encode_mission('zebra quokka the', 4).tolist())"
    )
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert run.returncode == 0, run.stderr
        outs.append(run.stdout.strip())
    assert outs[0] == outs[1]
    ids = json.loads(outs[0])
    base = 1 + len(MISSION_WORDS)
    assert all(base <= i < MISSION_VOCAB_SIZE for i in ids[:2]) and ids[2:] == [47, 0]
    assert ids == encode_mission("zebra quokka the", 4).tolist()


def test_too_long_mission_is_an_error():
    with pytest.raises(ValueError, match=r"has 13 words, more than mission_length=8"):
        encode_missions([DOORKEY_MISSION], 8)
    with make_env(DOORKEY, 1, seed=0, mission_length=8) as env:
        with pytest.raises(ValueError, match="mission_length=8"):
            env.reset()


def test_obs_keys_and_their_errors():
    with make_env(DOORKEY, 1, seed=0, obs_keys=("image", "direction")) as env:
        assert set(env.spec.obs_spec) == {"image", "direction"}
        assert set(env.reset().obs) == {"image", "direction"}
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['colour'\]; the observation keys"):
        make_env(DOORKEY, 1, seed=0, obs_keys=("image", "colour"))
    with pytest.raises(ValueError, match=r"obs_keys=\['image'\].*array observations"):
        make_env("CartPole-v1", 1, seed=0, obs_keys=("image",))
    with pytest.raises(ValueError, match="sequence of keys"):
        make_env(DOORKEY, 1, seed=0, obs_keys="image")
    with pytest.raises(ValueError, match=r"unknown environment 'MiniGrid-DorKey-5x5-v0'.*"):
        make_env("MiniGrid-DorKey-5x5-v0", 1, seed=0)
    # envpool has its own MiniGrid port; its Dict observation is not taken by that adapter.
    with pytest.raises(ValueError, match=r"not supported by the envpool adapter.*minigrid"):
        make_env(DOORKEY, 1, seed=0, backend="envpool")


def test_spaces_table():
    space = gymnasium.spaces.Dict(
        {
            "pos": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float64),
            "cell": gymnasium.spaces.Discrete(3, start=1),
            "bits": gymnasium.spaces.MultiBinary(3),
            "nested": gymnasium.spaces.Tuple(
                (gymnasium.spaces.MultiDiscrete([2, 5]), gymnasium.spaces.Text(20))
            ),
        }
    )
    spec, convert = space_converter(space, "Toy", mission_length=4)
    assert spec["pos"] == ArraySpec((2,), np.float32)
    assert spec["cell"] == ArraySpec((), np.int32, num_values=3)
    assert spec["bits"] == ArraySpec((3,), np.uint8)
    assert spec["nested"][0] == ArraySpec((2,), np.int32, num_values=5)
    assert spec["nested"][1].tokens
    batch = {
        "pos": np.array([[0.5, -0.25]]),
        "cell": np.array([3]),
        "bits": np.array([[1, 0, 1]], np.int8),
        "nested": (np.array([[1, 4]]), ("go to the door",)),
    }
    out = convert(batch)
    assert out["pos"].dtype == np.float32 and out["cell"].tolist() == [2]  # 0-based
    np.testing.assert_array_equal(out["nested"][1], [[20, 49, 47, 11]])
    zeros = obs_zeros(spec, (3,))
    assert zeros["nested"][1].shape == (3, 4) and zeros["pos"].dtype == np.float32
    graph = gymnasium.spaces.Dict({"g": gymnasium.spaces.Graph(gymnasium.spaces.Discrete(2), None)})
    with pytest.raises(ValueError, match=r"Toy: unsupported observation space at obs\['g'\]"):
        space_converter(graph, "Toy", mission_length=4)


def test_env_spec_array_fields_unchanged():
    common = dict(
        env_id="X", num_envs=1, discrete=True, num_actions=2, action_shape=(),
        action_low=None, action_high=None, frame_stack=1, is_atari=False,
        backend="gymnasium", max_episode_steps=None,
    )  # fmt: skip
    spec = EnvSpec(obs_shape=(4,), obs_dtype=np.float32, **common)
    assert not spec.pytree_obs and spec.obs_spec == ArraySpec((4,), np.float32)
    # A ShapeDtypeStruct works as an obs_spec leaf.
    spec = EnvSpec(
        obs_shape=None, obs_dtype=None, obs_spec=jax.ShapeDtypeStruct((3,), jnp.uint8), **common
    )
    assert spec.obs_shape == (3,) and spec.obs_dtype == np.uint8
    with pytest.raises(ValueError, match=r"observation leaf \['a'\] is 3"):
        EnvSpec(obs_shape=None, obs_dtype=None, obs_spec={"a": 3}, **common)
    with pytest.raises(ValueError, match="frame_stack=4 with a pytree observation"):
        EnvSpec(
            obs_shape=None, obs_dtype=None, obs_spec={"a": ArraySpec((2,), np.uint8)},
            **{**common, "frame_stack": 4},
        )  # fmt: skip


def test_finalize_step_passes_pytree_obs_through_bit_identically():
    obs = {"image": np.arange(2 * 7 * 7 * 3, dtype=np.uint8).reshape(2, 7, 7, 3),
           "direction": np.array([3, 0], np.int32)}  # fmt: skip
    args = dict(
        raw_reward=np.array([0.5, 1e-45], np.float32), terminated=np.array([True, False]),
        truncated=np.array([True, True]), prev_done=np.array([False, True]),
        prev_game_over=np.array([False, True]),
    )  # fmt: skip
    host = finalize_step(np, obs=obs, real_termination=None, reward_clip=True, **args)
    dev = jax.jit(
        lambda o, a: finalize_step(jnp, obs=o, real_termination=None, reward_clip=True, **a)
    )(obs, args)
    for h, d in zip(jax.tree.leaves(host), jax.tree.leaves(dev), strict=True):
        np.testing.assert_array_equal(h, np.asarray(d))
