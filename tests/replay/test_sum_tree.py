"""Tests for replay.sum_tree against a NumPy reference (a plain array of leaf values)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay import (
    sum_tree_build,
    sum_tree_descend,
    sum_tree_get,
    sum_tree_init,
    sum_tree_sample,
    sum_tree_set,
    sum_tree_size,
    sum_tree_total,
)
from replay.sum_tree import last_occurrence_mask

SIGMAS = 5.0
MAX_BATCH = 10
set_jit = jax.jit(sum_tree_set)
get_jit = jax.jit(sum_tree_get)
sample_jit = jax.jit(sum_tree_sample)


def pad(index, values, size):
    """Pads a batch with ignored (-1) indices so that jitted calls see few shapes."""
    extra = size - len(index)
    return (
        np.concatenate([index, np.full(extra, -1, np.int32)]).astype(np.int32),
        np.concatenate([values, np.full(extra, 7.0, np.float32)]).astype(np.float32),
    )


def build(values):
    """A tree holding ``values`` (at most 64), built by one jitted set."""
    values = np.asarray(values, np.float32)
    return set_jit(sum_tree_init(len(values)), *pad(np.arange(len(values)), values, 64))


def check_structure(tree, leaves):
    """Every internal node is exactly the float32 sum of its children; leaves match."""
    tree = np.asarray(tree)
    capacity = tree.shape[0] // 2
    assert tree[0] == 0
    padded = np.zeros(capacity, np.float32)
    padded[: len(leaves)] = leaves
    np.testing.assert_array_equal(tree[capacity:], padded)
    for j in range(1, capacity):
        assert tree[j] == np.float32(tree[2 * j] + tree[2 * j + 1]), j
    np.testing.assert_allclose(tree[1], np.sum(leaves, dtype=np.float64), rtol=1e-5, atol=1e-30)


@st.composite
def set_sequences(draw):
    num_leaves = draw(st.integers(1, 40))
    value = st.one_of(
        st.just(0.0), st.floats(0.0, 100.0, width=32, allow_subnormal=False), st.just(1e-6)
    )
    calls = []
    for _ in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, MAX_BATCH))
        index = draw(st.lists(st.integers(0, num_leaves - 1), min_size=size, max_size=size))
        values = draw(st.lists(value, min_size=size, max_size=size))
        calls.append((np.array(index, np.int32), np.array(values, np.float32)))
    return num_leaves, calls


@settings(max_examples=15, deadline=None)
@given(set_sequences())
def test_set_keeps_the_tree_exact_and_last_write_wins(case):
    num_leaves, calls = case
    tree = sum_tree_init(num_leaves)
    assert tree.shape == (sum_tree_size(num_leaves),) and tree.dtype == jnp.float32
    capacity = tree.shape[0] // 2
    assert capacity >= num_leaves and capacity & (capacity - 1) == 0
    assert capacity == 1 or capacity // 2 < num_leaves
    ref = np.zeros(num_leaves, np.float32)
    for index, values in calls:
        tree = set_jit(tree, *pad(index, values, MAX_BATCH))
        for i, v in zip(index, values, strict=True):  # sequential: the last write wins
            ref[i] = v
        check_structure(tree, ref)
        np.testing.assert_array_equal(get_jit(tree, np.arange(capacity))[:num_leaves], ref)
        np.testing.assert_allclose(sum_tree_total(tree), ref.sum(dtype=np.float64), rtol=1e-5)


def test_duplicates_last_write_wins_for_many_repeats():
    tree = sum_tree_init(8)
    index = np.array([3, 5, 3, 3, 5, 1, 3], np.int32)
    values = np.arange(1, 8, dtype=np.float32)
    tree = sum_tree_set(tree, index, values)
    np.testing.assert_array_equal(sum_tree_get(tree, np.array([1, 3, 5])), [6.0, 7.0, 5.0])
    check_structure(tree, np.array([0, 6, 0, 7, 0, 5, 0, 0], np.float32))
    mask = last_occurrence_mask(jnp.asarray(index))
    np.testing.assert_array_equal(mask, [False, False, False, False, True, True, True])


def test_out_of_range_indices_are_ignored():
    tree = sum_tree_set(sum_tree_init(5), np.array([0, 4]), np.array([1.0, 2.0]))
    before = np.asarray(tree)
    after = sum_tree_set(tree, np.array([-1, 8, 100]), np.array([5.0, 5.0, 5.0]))
    np.testing.assert_array_equal(after, before)
    np.testing.assert_array_equal(sum_tree_get(tree, np.array([-1, 8])), [0.0, 0.0])


def test_many_updates_do_not_drift():
    rng = np.random.default_rng(0)
    num_leaves = 1000
    tree = sum_tree_init(num_leaves)
    ref = np.zeros(num_leaves, np.float32)
    for _ in range(300):
        index = rng.integers(0, num_leaves, 32).astype(np.int32)
        values = (rng.random(32) * 10.0 ** rng.integers(-3, 3, 32)).astype(np.float32)
        tree = set_jit(tree, index, values)
        for i, v in zip(index, values, strict=True):
            ref[i] = v
    check_structure(tree, ref)


@pytest.mark.parametrize("num_leaves", [1, 2, 5, 37])
def test_build_equals_setting_every_leaf(num_leaves):
    values = np.random.default_rng(num_leaves).random(num_leaves).astype(np.float32)
    values[::3] = 0
    tree = sum_tree_build(values)
    np.testing.assert_array_equal(tree, build(values))
    check_structure(tree, values)


def test_sampling_frequencies_match_priorities():
    values = np.array([0.0, 3.0, 0.5, 0.0, 0.0, 10.0, 1.0, 0.25, 0.0, 2.0, 0.0], np.float32)
    tree = build(values)
    draws = 20_000
    u = jax.random.uniform(jax.random.key(0), (draws,)) * sum_tree_total(tree)
    leaves = np.asarray(sample_jit(tree, u))
    counts = np.bincount(leaves, minlength=16)
    assert counts[len(values) :].sum() == 0
    p = values / values.sum()
    expected = draws * p
    sigma = np.sqrt(draws * p * (1 - p))
    assert np.all(np.abs(counts[: len(values)] - expected) <= SIGMAS * sigma + 1e-9), counts
    assert np.all(counts[: len(values)][values == 0] == 0)
    # Pearson chi-square over the positive leaves (6 dof): far below the 1e-6 quantile (~36).
    positive = values > 0
    chi2 = np.sum((counts[: len(values)][positive] - expected[positive]) ** 2 / expected[positive])
    assert chi2 < 36.0, chi2


def test_descent_matches_the_cumulative_sum():
    rng = np.random.default_rng(1)
    values = rng.random(37).astype(np.float32) * (rng.random(37) > 0.3)
    tree = build(values)
    cumsum = np.cumsum(values.astype(np.float64))
    # The midpoint of each positive leaf's interval must land on that leaf.
    positive = np.flatnonzero(values)
    mid = (cumsum[positive] - values[positive] / 2).astype(np.float32)
    np.testing.assert_array_equal(sample_jit(tree, mid), positive)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.one_of(st.just(0.0), st.floats(float(np.float32(1e-6)), 1e3, width=32)),
        min_size=1,
        max_size=33,
    ).filter(lambda v: any(x > 0 for x in v)),
    st.integers(0, 2**31 - 1),
)
def test_zero_leaves_are_never_returned_even_at_boundaries(values, seed):
    values = np.array(values, np.float32)
    tree = build(values)
    total = np.float32(sum_tree_total(tree))
    boundary = np.array(
        [0.0, -1.0, total * (1 - 1e-7), total, np.nextafter(total, np.float32(np.inf)), 2 * total],
        np.float32,
    )
    cumsum = np.cumsum(values).astype(np.float32)  # edges between leaves, rounded
    random = np.random.default_rng(seed).random(64).astype(np.float32) * total
    below = np.nextafter(cumsum, np.float32(0))
    u = np.concatenate([boundary, cumsum, below, random])
    u = np.concatenate([u, np.zeros(136 - len(u), np.float32)])  # few shapes for the jit
    leaves = np.asarray(sample_jit(tree, u.astype(np.float32)))
    assert np.all((leaves >= 0) & (leaves < len(values))), leaves
    assert np.all(values[leaves] > 0), (values, u[values[leaves] == 0])


def test_descend_returns_values_and_shares_and_follows_forced_leaves():
    rng = np.random.default_rng(2)
    values = (rng.random(37) * (rng.random(37) > 0.3)).astype(np.float32)
    values[5] = 0.0
    tree = build(values)
    total = values.astype(np.float64).sum()
    u = rng.random(64).astype(np.float32) * np.float32(sum_tree_total(tree))
    forced = rng.integers(-3, 70, 64).astype(np.int32)  # < 0 or >= L (64): not forced
    forced[:3] = [0, 5, 36]  # zero-valued leaves can be forced too
    leaves, got_values, shares = jax.jit(sum_tree_descend)(tree, u, forced)
    leaves = np.asarray(leaves)
    is_forced = (forced >= 0) & (forced < 64)
    np.testing.assert_array_equal(leaves[is_forced], forced[is_forced])
    np.testing.assert_array_equal(leaves[~is_forced], sample_jit(tree, u)[~is_forced])
    padded = np.concatenate([values, np.zeros(64 - 37, np.float32)])
    np.testing.assert_array_equal(got_values, padded[leaves])
    np.testing.assert_allclose(shares, padded[leaves] / total, rtol=1e-5)
    assert np.all(values[leaves[~is_forced]] > 0)


def test_boundaries_with_trailing_and_leading_zeros():
    values = np.array([0, 0, 0, 2, 5, 0, 0, 0], np.float32)
    tree = build(values)
    total = float(sum_tree_total(tree))
    u = np.array([0.0, 1e-30, 2.0, total * (1 - 1e-7), total, total * 1.5], np.float32)
    np.testing.assert_array_equal(sample_jit(tree, u), [3, 3, 4, 4, 4, 4])


def test_single_leaf_tree():
    tree = sum_tree_set(sum_tree_init(1), np.array([0]), np.array([2.5]))
    assert tree.shape == (2,)
    assert float(sum_tree_total(tree)) == 2.5
    np.testing.assert_array_equal(sum_tree_sample(tree, np.array([0.0, 2.4, 9.0])), [0, 0, 0])


def test_set_under_jit_with_donation():
    tree = sum_tree_init(100)
    set_jit = jax.jit(sum_tree_set, donate_argnums=0)
    new = set_jit(tree, jnp.array([1, 2, 99]), jnp.array([1.0, 2.0, 3.0]))
    assert tree.is_deleted()
    assert float(sum_tree_total(new)) == 6.0
    np.testing.assert_array_equal(sample_jit(new, jnp.array([0.5, 1.5, 3.5])), [1, 2, 99])


def test_errors_name_the_argument():
    tree = sum_tree_init(4)
    with pytest.raises(ValueError, match="num_leaves"):
        sum_tree_init(0)
    with pytest.raises(ValueError, match="dtype"):
        sum_tree_init(4, jnp.int32)
    with pytest.raises(ValueError, match="tree"):
        sum_tree_set(jnp.zeros(6), np.array([0]), np.array([1.0]))
    with pytest.raises(ValueError, match="tree"):
        sum_tree_total(jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match="leaf_indices"):
        sum_tree_set(tree, np.array([0.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="leaf_indices"):
        sum_tree_get(tree, np.array([[0]]))
    with pytest.raises(ValueError, match="values"):
        sum_tree_set(tree, np.array([0, 1]), np.array([1.0]))
    with pytest.raises(ValueError, match="values"):
        sum_tree_build(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="forced_leaves"):
        sum_tree_descend(tree, np.zeros(2, np.float32), np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="u must"):
        sum_tree_sample(tree, np.array([0, 1]))
