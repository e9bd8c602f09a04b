"""`overwrite_steps` / `overwrite_extras`: the replay's one documented way to change what it
stored (SAC's --overwrite-mu, recurrent SAC's --refresh-stored-state), checked against numpy
writes into copies of the stored arrays: exactly the named positions change, in the ring's
wrapped positions, and nothing else in the state does."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from replay import PrioritizedTraceReplay, TraceReplay

SDS = jax.ShapeDtypeStruct
N, T, C, A = 3, 4, 3, 2  # envs, trace length, slots per env, mu's width


def filled(replay: TraceReplay, adds: int = 4, seed: int = 0):
    """A replay state after `adds` adds of random data (4 > C: the ring has wrapped)."""
    rng = np.random.default_rng(seed)
    state, add = replay.init(), jax.jit(replay.add)  # one program, not op by op
    for _ in range(adds):
        steps = {
            "mu": rng.normal(size=(T, N, A)).astype(np.float32),
            "id": rng.integers(1, 10**6, size=(T, N)).astype(np.int32),
        }
        obs = rng.normal(size=(T, N, 5)).astype(np.float32)
        extras = {"h": rng.normal(size=(N, 2)).astype(np.float32)}
        state = add(state, obs, steps, extras if replay.extras_spec else None)
    return state


def make(extras: bool = True) -> TraceReplay:
    return TraceReplay(
        num_envs=N,
        trace_len=T,
        capacity=N * T * C,
        obs_shape=(5,),
        obs_dtype=np.float32,
        step_spec={"mu": SDS((A,), jnp.float32), "id": SDS((), jnp.int32)},
        extras_spec={"h": SDS((2,), jnp.float32)} if extras else None,
    )


def as_numpy(tree):
    return jax.tree.map(np.asarray, tree)


def assert_trees_equal(a, b):
    for x, y in zip(jax.tree.leaves(as_numpy(a)), jax.tree.leaves(as_numpy(b)), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("jit", [False, True])
def test_overwrite_steps_writes_exactly_the_named_ring_positions(jit):
    replay = make()
    state = filled(replay)
    ring = C * T
    env_index = np.array([0, 1, 2, 0], np.int32)
    start = np.array([0, ring - 2, 5, 6], np.int32)  # env 1 wraps to positions 10, 11, 0
    length = 3
    values = np.random.default_rng(1).normal(size=(length, 4, A)).astype(np.float32)
    expected = np.array(state.steps["mu"])  # [N, C*T, A]
    for b in range(4):
        for step in range(length):
            expected[env_index[b], (start[b] + step) % ring] = values[step, b]

    write = jax.jit(replay.overwrite_steps, static_argnums=1) if jit else replay.overwrite_steps
    new = write(state, "mu", jnp.asarray(env_index), jnp.asarray(start), jnp.asarray(values))

    np.testing.assert_array_equal(np.asarray(new.steps["mu"]), expected)
    assert (np.asarray(new.steps["mu"]) != np.asarray(state.steps["mu"])).any(axis=-1).sum() == 12
    assert_trees_equal(new.replace(steps={**new.steps, "mu": state.steps["mu"]}), state)


def test_overwrite_extras_writes_exactly_the_named_slots():
    replay = make()
    state = filled(replay)
    env_index = np.array([2, 0, 1], np.int32)
    slot = np.array([[0, 2, 1], [1, 0, 2]], np.int32)  # [M, B]
    values = {"h": np.random.default_rng(2).normal(size=(2, 3, 2)).astype(np.float32)}
    expected = np.array(state.extras["h"])  # [N, C, 2]
    for m in range(2):
        for b in range(3):
            expected[env_index[b], slot[m, b]] = values["h"][m, b]

    new = replay.overwrite_extras(state, jnp.asarray(env_index), jnp.asarray(slot), values)

    np.testing.assert_array_equal(np.asarray(new.extras["h"]), expected)
    assert_trees_equal(new.replace(extras=state.extras), state)


def test_prioritized_replay_overwrites_its_traces_and_keeps_its_priorities():
    base = make()
    replay = PrioritizedTraceReplay(base)
    state, add = replay.init(), jax.jit(replay.add)  # one program, not op by op
    rng = np.random.default_rng(3)
    for _ in range(4):
        state = add(
            state,
            rng.normal(size=(T, N, 5)).astype(np.float32),
            {
                "mu": rng.normal(size=(T, N, A)).astype(np.float32),
                "id": rng.integers(1, 99, size=(T, N)).astype(np.int32),
            },
            {"h": rng.normal(size=(N, 2)).astype(np.float32)},
        )
    env_index, start = jnp.array([1, 2]), jnp.array([3, 11])
    values = jnp.ones((2, 2, A))
    slot, h = jnp.array([[2, 0]]), {"h": jnp.full((1, 2, 2), 7.0)}

    new = replay.overwrite_steps(state, "mu", env_index, start, values)
    assert_trees_equal(new.base, base.overwrite_steps(state.base, "mu", env_index, start, values))
    new = replay.overwrite_extras(new, env_index, slot, h)
    assert np.asarray(new.base.extras["h"])[2, 0].tolist() == [7.0, 7.0]
    assert_trees_equal(new.replace(base=state.base), state)  # priorities, tree, assigned


def test_overwrite_names_what_the_replay_does_not_store():
    replay = make(extras=False)
    state = filled(replay, adds=1)
    with pytest.raises(ValueError, match=r"no step field 'logp' \(have \['id', 'mu'\]\)"):
        zeros = jnp.zeros(1, int)
        replay.overwrite_steps(state, "logp", zeros, zeros, jnp.ones((1, 1)))
    with pytest.raises(ValueError, match="stores no per-trace extras"):
        replay.overwrite_extras(state, jnp.zeros(1, int), jnp.zeros((1, 1), int), {})


def z(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        # values missing the field's axis ([L, B] for mu's [L, B, A]): no broadcast
        (("mu", [0, 1], [0, 0], z(3, 2)), r"values has shape \(3, 2\)"),
        # a float written into the int32 field: no silent truncation
        (("id", [0], [0], np.full((2, 1), 2.7, np.float32)), "dtype float32, expected shape"),
        (("mu", [0, 3], [0, 0], z(1, 2, A)), r"env_index must lie in \[0, 3\), got 3"),
        (("mu", [0], [-1], z(1, 1, A)), r"start must lie in \[0, 12\), got -1"),
        (("mu", [0], [0], z(13, 1, A)), "1 to 12 steps"),
        (("mu", [0, 1], [0], z(1, 2, A)), r"start must be a 1-D integer array \[2\]"),
        (("mu", [0.0], [0], z(1, 1, A)), "env_index must be a 1-D integer"),
        (("mu", [0], [0], {"m": z(1, 1, A)}), "values does not match its spec"),
    ],
)
def test_overwrite_steps_refuses_bad_input_in_one_line(args, match):
    replay = make()
    state = filled(replay)
    field, env, start, values = args
    with pytest.raises(ValueError, match=match) as err:
        replay.overwrite_steps(state, field, np.asarray(env), np.asarray(start), values)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("env", "slot", "values", "match"),
    [
        ([0, 1], [[0, 1]], {"h": z(1, 2)}, r"values\['h'\] has shape \(1, 2\)"),
        ([0], [[0]], {"h": z(1, 1, 2, dtype=np.int32)}, "dtype int32"),
        ([5], [[0]], {"h": z(1, 1, 2)}, r"env_index must lie in \[0, 3\), got 5"),
        ([0], [[-1]], {"h": z(1, 1, 2)}, r"slot must lie in \[0, 3\), got -1"),
        ([0], [[3]], {"h": z(1, 1, 2)}, r"slot must lie in \[0, 3\), got 3"),
        ([0, 1], [0, 1], {"h": z(1, 2, 2)}, r"slot must be an integer array \[M, 2\]"),
        ([0], [[0]], {"g": z(1, 1, 2)}, "values does not match its spec"),
    ],
)
def test_overwrite_extras_refuses_bad_input_in_one_line(env, slot, values, match):
    replay = make()
    state = filled(replay)
    with pytest.raises(ValueError, match=match) as err:
        replay.overwrite_extras(state, np.asarray(env), np.asarray(slot), values)
    assert "\n" not in str(err.value)
