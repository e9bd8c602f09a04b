"""Evolving populations (engine/evolution.py): hyper-parameter draws, PBT and CEM selection
and resampling on fixed toy populations against NumPy written here, and the device side on
a real ACER population, and one PBT and one CEM generation on every agent that evolves."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents.acer.config import ACERConfig
from agents.core.config import ConfigError
from agents.core.learning import episode_fields
from agents.core.registry import agent_names, get_agent
from engine.driver import agent_class
from engine.evolution import (
    PERTURB_FACTORS,
    Plan,
    cem_plan,
    cem_resample,
    draw_hparams,
    exploit,
    pbt_plan,
    perturb,
)
from engine.population import Population, member_envs
from envs import make_env, run_env_seed
from tests.agent_classes import ACERAgent, PPOAgent

BOUNDS = {"lr": (1e-6, 1.0), "entropy_weight": (0.0, 1.0), "discount": (0.5, 1.0)}


# ------------------------------------------------------------------ hyper-parameter draws
def test_draw_listed_values_cycle_over_members():
    hp = draw_hparams({"lr": "1e-4,3e-4,1e-3"}, 5, BOUNDS, seed=0)
    np.testing.assert_allclose(hp["lr"], [1e-4, 3e-4, 1e-3, 1e-4, 3e-4], rtol=1e-6)
    assert hp["lr"].dtype == np.float32


def test_random_draws_are_in_range_seeded_and_spread():
    a = draw_hparams(
        {"lr": "loguniform:1e-5:1e-2", "entropy_weight": "normal:0.01:0.01"}, 64, BOUNDS, 3
    )
    b = draw_hparams(
        {"lr": "loguniform:1e-5:1e-2", "entropy_weight": "normal:0.01:0.01"}, 64, BOUNDS, 3
    )
    np.testing.assert_array_equal(a["lr"], b["lr"])  # the same seed draws the same values
    assert (a["lr"] >= 1e-5).all() and (a["lr"] <= 1e-2).all()
    # log-uniform: about half of the draws below the geometric mid-point 10^-3.5
    assert 16 < int((np.log10(a["lr"]) < -3.5).sum()) < 48
    # truncated to the field's range [0, 1]: no negative entropy weight
    assert (a["entropy_weight"] >= 0).all() and a["entropy_weight"].std() > 0
    c = draw_hparams({"entropy_weight": "normal:0.01:0.01:0.005:0.02"}, 64, BOUNDS, 3)
    assert (c["entropy_weight"] >= 0.005).all() and (c["entropy_weight"] <= 0.02).all()


@pytest.mark.parametrize(
    "specs, match",
    [
        ({"batch_size": "8,16"}, "cannot vary 'batch_size'"),
        ({"lr": "1e-4,2"}, "2 is outside lr's range"),
        ({"lr": "fast"}, "'fast' is not a number"),
        ({"lr": "loguniform:1e-3"}, "expected loguniform:LOW:HIGH"),
        ({"lr": "loguniform:0:1e-3"}, "needs LOW > 0"),
        ({"entropy_weight": "normal:0.1:-1"}, "needs STD > 0"),
    ],
)
def test_bad_hparam_specs_name_the_field(specs, match):
    with pytest.raises(ConfigError, match=match):
        draw_hparams(specs, 4, BOUNDS, 0)


# ------------------------------------------------------------------ selection (NumPy/by hand)
SCORES = np.array([5.0, 1.0, 3.0, 9.0, 7.0, 2.0, 8.0, 4.0])
# By hand: best to worst is members 3 (9), 6 (8), 4 (7), 0 (5), 7 (4), 2 (3), 5 (2), 1 (1).


def test_pbt_bottom_quarter_copies_the_top_quarter():
    for seed in range(20):
        plan = pbt_plan(SCORES, 0.25, np.random.default_rng(seed))
        # k = 2: members 1 and 5 copy one of 3 and 6; the other six keep their own weights
        assert set(plan.parent[[1, 5]]) <= {3, 6}
        keep = [0, 2, 3, 4, 6, 7]
        np.testing.assert_array_equal(plan.parent[keep], keep)
        assert not plan.resampled.any() and plan.elites.size == 0
    parents = {
        tuple(pbt_plan(SCORES, 0.25, np.random.default_rng(s)).parent[[1, 5]]) for s in range(20)
    }
    assert len(parents) > 1  # the donor is drawn, not fixed


def test_pbt_ranks_nan_last():
    scores = np.array([np.nan, 1.0, 2.0, 3.0])
    plan = pbt_plan(scores, 0.25, np.random.default_rng(0))
    np.testing.assert_array_equal(plan.parent, [3, 1, 2, 3])


def test_cem_elites_and_replacement():
    plan = cem_plan(SCORES, 0.3, 0, np.random.default_rng(0))
    np.testing.assert_array_equal(plan.elites, [3, 6])  # round(0.3 * 8) = 2 elites
    assert plan.resampled.all() and set(plan.parent) <= {3, 6}
    worst = cem_plan(SCORES, 0.3, 3, np.random.default_rng(0))
    np.testing.assert_array_equal(np.flatnonzero(worst.resampled), [1, 2, 5])
    np.testing.assert_array_equal(worst.parent[[0, 3, 4, 6, 7]], [0, 3, 4, 6, 7])


def test_cem_keeps_at_least_two_elites():
    """One elite's Gaussian has no spread: its resampled members would be its clones. So a
    fraction that rounds to one elite (0.25 of 3, the matrix's population) takes two, and a
    population of one its only member."""
    scores = np.array([1.0, 5.0, 3.0])
    plan = cem_plan(scores, 0.25, 0, np.random.default_rng(0))
    np.testing.assert_array_equal(plan.elites, [1, 2])
    np.testing.assert_array_equal(
        cem_plan(scores[:1], 0.25, 0, np.random.default_rng(0)).elites, [0]
    )


def test_perturb_multiplies_changed_members_only_and_clips():
    plan = Plan(np.array([0, 0, 2, 2]), np.array([False, False, False, True]), np.zeros(0, int))
    hp = {
        "lr": np.array([0.1, 0.2, 0.3, 0.4], np.float32),
        "discount": np.full(4, 0.99, np.float32),
    }
    new = perturb(hp, plan, BOUNDS, np.random.default_rng(1))
    for i in (0, 2):  # kept: unchanged
        assert new["lr"][i] == hp["lr"][i] and new["discount"][i] == hp["discount"][i]
    lr_factors = {round(float(new["lr"][1] / 0.1), 6), round(float(new["lr"][3] / 0.3), 6)}
    assert lr_factors <= {round(f, 6) for f in PERTURB_FACTORS}
    for i in (1, 3):  # a horizon: 1 − γ times 0.8 or 1.2 (1/(1 − γ) = 100 → 125 or 83 steps)
        assert np.isclose(new["discount"][i], [1 - 0.01 * 0.8, 1 - 0.01 * 1.2], atol=1e-6).any()
    clipped = perturb({"discount": np.full(4, 0.55, np.float32)}, plan, BOUNDS,
                      np.random.default_rng(2))["discount"]  # fmt: skip
    for i in (1, 3):  # 1 − 0.45 · 1.2 = 0.46 is clipped to the range's bottom, 0.5
        assert np.isclose(clipped[i], [0.5, 1 - 0.45 * 0.8], atol=1e-6).any()


def test_exploit_gathers_rows_as_numpy_fancy_indexing():
    tree = {"w": np.arange(24.0).reshape(4, 3, 2), "b": np.arange(4.0)}
    parent = np.array([2, 1, 2, 0])
    out = exploit(jax.tree.map(jnp.asarray, tree), jnp.asarray(parent))
    np.testing.assert_array_equal(out["w"], tree["w"][parent])
    np.testing.assert_array_equal(out["b"], tree["b"][parent])


def test_cem_resample_against_numpy():
    rng = np.random.default_rng(0)
    w = rng.normal(0, 3.0, (5, 4, 3)).astype(np.float32)
    noise = rng.normal(size=w.shape).astype(np.float32)
    elites, resampled, std_max = np.array([0, 2, 3]), np.array([1, 0, 1, 1, 0], bool), 1.5
    out = np.asarray(
        cem_resample({"w": jnp.asarray(w)}, jnp.asarray(elites), jnp.asarray(resampled),
                     {"w": jnp.asarray(noise)}, std_max)["w"]
    )  # fmt: skip
    expected = w.copy()
    for j in range(4):
        for k in range(3):
            values = [w[e, j, k] for e in elites]
            mean = sum(values) / len(values)
            std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
            for i in range(5):
                if resampled[i]:
                    expected[i, j, k] = mean + min(std, std_max) * noise[i, j, k]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[[1, 4]], w[[1, 4]])  # not resampled: untouched


# ------------------------------------------------------------------ on a real population
CFG = ACERConfig(
    num_envs=2, trace_len=4, batch_size=2, buffer_size=64, hidden=(8,), replay_ratio=1.0
)


def _population(hparams=None, size=4, mesh=None):
    pool = make_env("CartPole-v1", size * CFG.num_envs, run_env_seed(0, CFG.num_envs))
    members = [ACERAgent(CFG, v, seed=i) for i, v in enumerate(member_envs(pool, size))]
    pop = Population(members, mesh=mesh, hparams=hparams)
    state = pop.init(jnp.stack([jax.random.PRNGKey(i) for i in range(size)]))
    for it in range(3):  # some updates, so that optimiser states differ from fresh ones
        state, _ = pop.train_iteration(state, it, it * pop.member_steps_per_iteration)
    return pop, state


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2])
def test_population_pbt_copies_learner_rows_and_refreshes_keys(devices):
    """Also with the members split over a 2-device mesh: the copy crosses devices."""
    from agents.core.parallel import POP, make_mesh

    mesh = make_mesh(devices, axis=POP) if devices > 1 else None
    pop, state = _population({"lr": np.array([1e-3, 2e-3, 3e-3, 4e-3])}, mesh=mesh)
    before = jax.device_get(state.learner)
    plan = Plan(np.array([0, 3, 2, 3]), np.zeros(4, bool), np.zeros(0, int))
    hp = {"lr": np.array([1e-3, 4.8e-3, 3e-3, 4e-3], np.float32)}
    evolved = pop.evolve(state, plan, hp, jax.random.PRNGKey(0))
    after = jax.device_get(evolved.learner)
    pop.train_iteration(evolved, 3, 3 * pop.member_steps_per_iteration)  # and it trains on
    m0, m1 = before.member, after.member
    for a, b in zip(jax.tree.leaves(m1.params), jax.tree.leaves(m0.params), strict=True):
        np.testing.assert_array_equal(a, b[[0, 3, 2, 3]])
    for a, b in zip(jax.tree.leaves(m1.opt_state), jax.tree.leaves(m0.opt_state), strict=True):
        np.testing.assert_array_equal(a, b[[0, 3, 2, 3]])
    np.testing.assert_array_equal(m1.key[[0, 2, 3]], m0.key[[0, 2, 3]])  # kept members
    # the copy samples on its own stream: its parent's key folded with its own index
    np.testing.assert_array_equal(m1.key[1], jax.random.fold_in(m0.key[3], 1))
    assert not np.array_equal(m1.key[1], m0.key[3])
    np.testing.assert_allclose(after.hparams["lr"], hp["lr"])
    np.testing.assert_allclose(pop.hparams["lr"], hp["lr"])


@pytest.mark.slow
def test_population_cem_resamples_weights_and_resets_optimiser():
    pop, state = _population()
    before = jax.device_get(state.learner.member)
    plan = Plan(np.array([0, 0, 2, 3]), np.array([False, True, False, False]), np.array([0, 2]))
    after = jax.device_get(pop.evolve(state, plan, {}, jax.random.PRNGKey(1), 0.5).learner.member)
    for new, old in zip(jax.tree.leaves(after.params), jax.tree.leaves(before.params), strict=True):
        np.testing.assert_array_equal(new[[0, 2, 3]], old[[0, 2, 3]])
        e = old[[0, 2]]  # the elites; member 1 lies within 6 clipped stds of their mean
        assert np.all(np.abs(new[1] - e.mean(0)) <= np.minimum(e.std(0), 0.5) * 6 + 1e-6)
        assert not np.array_equal(new[1], old[1])
    for avg, p in zip(
        jax.tree.leaves(after.avg_params), jax.tree.leaves(after.params), strict=True
    ):
        np.testing.assert_array_equal(avg[1], p[1])  # the Polyak average restarts there
    fresh = jax.tree.leaves(after.opt_state)
    kept = jax.tree.leaves(before.opt_state)
    assert any(np.any(k[1] != 0) for k in kept if k.dtype == np.float32)
    for f in fresh:  # Adam moments and counts of the resampled member are zero again
        assert np.all(f[1] == 0)


def test_population_refuses_fields_it_cannot_vary():
    with pytest.raises(ConfigError, match="cannot vary 'batch_size'"):
        _population({"batch_size": np.array([2, 4, 2, 4])})
    with pytest.raises(ConfigError, match="--lr must be > 0"):
        _population({"lr": np.array([1e-3, 0.0, 1e-3, 1e-3])})


# ------------------------------------------------------------------ every agent that evolves
# The smallest sizes, applied in order to the fields an agent's config has and takes (sizes
# only shrink: a feed-forward default, lstm_size 0, stays one; a field that applies only
# with a switch that is off stays as it is); a population steps its actors lock-step.
SMALL = dict(
    num_envs=2, trace_len=4, batch_size=2, buffer_size=2 * 4 * 16, hidden=(8,),
    start_train_at=0, replay_ratio=1.0, update_to_data=0.5, lstm_size=8, torso_out=8,
    num_atoms=11, seq_len=4, burn_in=4, epochs=1, num_minibatches=1,
)  # fmt: skip
LOCK_STEP = dict(decoupled=False)
EVOLVING = [n for n in agent_names() if agent_class(get_agent(n)).supports_population]


def _small_population(name: str, size: int = 2) -> tuple[Population, object]:
    """A population of `name`'s smallest config on Pendulum (continuous actions) where the
    agent takes them, else CartPole: (population, fresh state)."""
    spec = get_agent(name)
    cfg = spec.make_config(None)
    fields = {f.name for f in dataclasses.fields(cfg)}
    for k, v in {**SMALL, **LOCK_STEP}.items():
        if k in fields:
            try:
                cfg = dataclasses.replace(cfg, **{k: min(v, getattr(cfg, k))})
            except ConfigError:
                pass
    env_id = "CartPole-v1" if agent_class(spec).discrete_only else "Pendulum-v1"
    pool = make_env(env_id, size * cfg.num_envs, run_env_seed(0, cfg.num_envs))
    members = [agent_class(spec)(cfg, v, seed=i) for i, v in enumerate(member_envs(pool, size))]
    pop = Population(members)
    state = pop.init(jnp.stack([jax.random.PRNGKey(i) for i in range(size)]))
    return pop, state


def _rows(tree):
    """Host copies of a stacked learner state's leaves."""
    return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(tree))]


def _same_rows(a, b):
    """Per member (leading axis): equal leaves, floats up to 1e-5 of the leaf's largest
    magnitude. XLA may compute a copy of the weights (a target network, an average) in a
    fusion of its own that recomputes their initializer, and the copy then differs in the
    last bits: seen with XLA:CPU's elemental emitters (the tests' `--xla_cpu_use_fusion_
    emitters=false`, tests/conftest.py), 2.7e-6 relative on the Reactor's orthogonally
    initialised LSTM kernel. A learner update moves them by orders of magnitude more."""
    n = len(a)
    if not np.issubdtype(a.dtype, np.floating):
        return (a == b).reshape(n, -1).all(1)
    a, b = a.reshape(n, -1).astype(np.float64), b.reshape(n, -1).astype(np.float64)
    return np.abs(a - b).max(1, initial=0.0) <= 1e-5 * np.abs(b).max(1, initial=0.0)


def _restarted(pop, member):
    """Whether every member of the stacked learner state `member` is what its learner's
    `reset_params` makes of it around its own weights (fresh optimiser, targets = weights)."""
    first = pop.members[0]
    fresh = jax.vmap(lambda s: first.reset_params(s, s.params))(member)
    same = [_same_rows(a, b) for a, b in zip(_rows(fresh), _rows(member), strict=True)]
    return np.all(same, axis=0)


def _check_pbt_and_cem(name):
    pop, state = _small_population(name)
    assert _restarted(pop, state.learner.member).all()  # `init` is `reset_params` of its weights
    steps, it = pop.member_steps_per_iteration, 0
    while _restarted(pop, state.learner.member).any():  # until every member has learnt
        assert it < 4, f"{name}: no learner update in {it} iterations"
        state, _ = pop.train_iteration(state, it, it * steps)
        it += 1

    # PBT: member 1 copies member 0's whole learner (but samples on its own key).
    before = jax.device_get(state.learner.member)
    plan = Plan(np.array([0, 0]), np.zeros(2, bool), np.zeros(0, int))
    state = pop.evolve(state, plan, {}, jax.random.PRNGKey(0))
    after = jax.device_get(state.learner.member)
    own = episode_fields(state.learner.member)  # the member's envs' state
    for field, new in after._asdict().items():
        old = getattr(before, field)
        for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(old), strict=True):
            np.testing.assert_array_equal(a[0], b[0], err_msg=f"{name} kept member: {field}")
            if field in own:
                np.testing.assert_array_equal(a[1], b[1], err_msg=f"{name} own: {field}")
            elif field != "key":
                np.testing.assert_array_equal(a[1], b[0], err_msg=f"{name} copy: {field}")
    assert not np.array_equal(after.key[1], after.key[0])
    state, _ = pop.train_iteration(state, it, it * steps)

    # CEM: member 1 draws new weights from members 0 and 1 and restarts from them.
    before = jax.device_get(state.learner.member)
    plan = Plan(np.array([0, 0]), np.array([False, True]), np.array([0, 1]))
    state = pop.evolve(state, plan, {}, jax.random.PRNGKey(1))
    after = jax.device_get(state.learner.member)
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(before), strict=True):
        np.testing.assert_array_equal(a[0], b[0], err_msg=f"{name}: the kept member changed")
    for a, b in zip(jax.tree.leaves(after.params), jax.tree.leaves(before.params), strict=True):
        assert not np.array_equal(a[1], b[1]) or np.all(b[0] == b[1])
    np.testing.assert_array_equal(_restarted(pop, state.learner.member), [False, True])
    state, out = pop.train_iteration(state, it + 1, (it + 1) * steps)  # and it trains on
    for metrics in jax.device_get(out.metrics):
        for value in jax.tree.leaves(metrics):
            assert np.all(np.isfinite(value)), name
    pop.close()


@pytest.mark.slow
def test_pbt_and_cem_on_sac():
    """The fast representative of `test_pbt_and_cem_on_every_evolving_agent`: SAC, whose
    CEM restart crashed (three optimisers, a target of the critic alone)."""
    _check_pbt_and_cem("sac")


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in EVOLVING if n != "sac"])
def test_pbt_and_cem_on_every_evolving_agent(name):
    """Every registered agent that supports populations (a new one is covered by
    registering it): one PBT generation copies a learner whole, one CEM generation
    restarts the resampled member from its new weights as its learner's `reset_params`
    says (every optimiser fresh: SAC and TD3 have several; target networks and Polyak
    averages set to the new weights), and the population trains on after each."""
    _check_pbt_and_cem(name)


def test_pbt_leaves_each_member_its_own_episode_state():
    """PPO with --normalize-reward: a PBT copy takes the parent's weights and return
    statistics, but each env's discounted return so far belongs to the member's own envs
    (their episodes go on), so it stays the member's."""
    cfg = get_agent("ppo").make_config(None)
    cfg = dataclasses.replace(cfg, num_envs=2, trace_len=8, hidden=(8,), normalize_reward=True)
    pool = make_env("CartPole-v1", 2 * cfg.num_envs, run_env_seed(0, cfg.num_envs))
    pop = Population([PPOAgent(cfg, v, seed=i) for i, v in enumerate(member_envs(pool, 2))])
    state = pop.init(jnp.stack([jax.random.PRNGKey(i) for i in range(2)]))
    for it in range(5):  # 40 steps: some episodes have ended, at other steps in each member
        state, _ = pop.train_iteration(state, it, it * pop.member_steps_per_iteration)
    before = jax.device_get(state.learner.member)
    assert not np.array_equal(before.returns[0], before.returns[1])
    plan = Plan(np.array([0, 0]), np.zeros(2, bool), np.zeros(0, int))
    after = jax.device_get(pop.evolve(state, plan, {}, jax.random.PRNGKey(0)).learner.member)
    np.testing.assert_array_equal(after.returns, before.returns)
    np.testing.assert_array_equal(after.return_stats.var[1], before.return_stats.var[0])
    for a, b in zip(jax.tree.leaves(after.params), jax.tree.leaves(before.params), strict=True):
        np.testing.assert_array_equal(a[1], b[0])
    pop.close()


def test_cem_restarts_each_member_with_its_own_hyper_parameters():
    """PPO's optimiser state holds its learning rate: a resampled member's fresh state has
    the member's new lr, not the base config's nor another member's."""
    spec = get_agent("ppo")
    cfg = spec.make_config(None, num_envs=2, trace_len=4, hidden=(8,), lr=1e-3)
    pool = make_env("CartPole-v1", 2 * cfg.num_envs, run_env_seed(0, cfg.num_envs))
    members = [agent_class(spec)(cfg, v, seed=i) for i, v in enumerate(member_envs(pool, 2))]
    pop = Population(members, hparams={"lr": np.array([2e-3, 3e-3])})
    state = pop.init(jnp.stack([jax.random.PRNGKey(i) for i in range(2)]))
    plan = Plan(np.array([0, 0]), np.array([False, True]), np.array([0, 1]))
    hp = {"lr": np.array([2e-3, 5e-3], np.float32)}
    learner = pop.evolve(state, plan, hp, jax.random.PRNGKey(0)).learner
    lr = jax.device_get(learner.member.opt_state.hyperparams["learning_rate"])
    np.testing.assert_allclose(lr[1], 5e-3, rtol=1e-6)
    assert lr[0] == np.float32(1e-3)  # kept: the state `init` built (PPO sets lr per update)
    pop.close()
