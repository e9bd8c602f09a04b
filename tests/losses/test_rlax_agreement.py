"""Our losses agree with rlax 0.1.9: Retrace (`general_off_policy_returns_from_action_values`),
V-trace, λ-returns and the categorical L2 projection.

The inputs, the rlax side and the comparison come from `experiments.bench_losses`
(`make_inputs`, `make_rlax_fns`, `rlax_pairs`, `check_agreement`), so the benchmark times
exactly the pairs tested here. Shapes and seeds are random; traces come with and without
episode ends (steps with discount 0) inside them.
"""

import numpy as np
import pytest
import rlax

from experiments import bench_losses as bench

RLAX_FNS = bench.make_rlax_fns(rlax)  # jitted once for the whole module
COMPARED = {"retrace_targets", "vtrace", "lambda_returns", "categorical_projection"}


def random_size(seed):
    """(T, B, A, K) drawn from the seed; at least 6 steps in all so that episode ends occur."""
    rng = np.random.default_rng([seed, 7])
    return (
        int(rng.integers(3, 13)),
        int(rng.integers(2, 6)),
        int(rng.integers(2, 8)),
        int(rng.integers(2, 22)),
    )


def check_pairs(T, B, A, K, seed, p_terminal):
    args = bench.Args(batch_sizes=(B,), trace_len=T, num_actions=A, num_atoms=K, seed=seed)
    x = bench.make_inputs(args, B, with_dist=False, p_terminal=p_terminal)
    if p_terminal == 0.0:
        assert np.all(np.asarray(x.d) > 0)
    else:
        assert np.any(np.asarray(x.d) == 0)
    pairs = bench.rlax_pairs(x, RLAX_FNS)
    assert {ours.name for ours, _ in pairs} == COMPARED
    for ours, ref in pairs:
        # Raises unless every output agrees within bench.RTOL / bench.ATOL.
        diff = bench.check_agreement(ours.name, ours.fn(*ours.args), ref.fn(*ref.args))
        assert diff < 1e-4, (ours.name, diff)


def test_compared_quantities_match_the_benchmark():
    assert set(bench.RLAX_COMPARED) == set(RLAX_FNS) == COMPARED


@pytest.mark.parametrize("p_terminal", [0.0, 0.4], ids=["no-episode-ends", "episode-ends"])
@pytest.mark.parametrize("seed", range(6))
def test_ours_agree_with_rlax_on_random_shapes(seed, p_terminal):
    check_pairs(*random_size(seed), seed, p_terminal)


@pytest.mark.parametrize(("T", "B", "A", "K"), [(1, 1, 2, 2), (1, 3, 5, 11), (20, 1, 18, 51)])
def test_ours_agree_with_rlax_on_edge_shapes(T, B, A, K):
    check_pairs(T, B, A, K, seed=T + B, p_terminal=0.0)
