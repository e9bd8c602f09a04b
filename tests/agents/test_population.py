"""`--num-seeds P`: a population of P learners in one program (engine/population.py).

Member i must equal the single run with seed `seed + i`: its own envs, RNG streams, Poisson
update counts and replay. Compared metric by metric over several iterations, and on a mesh
of 2 fake CPU devices (conftest fakes 4)."""

import dataclasses
import functools

import jax
import numpy as np
import pytest

from agents.acer.config import ACERConfig
from agents.core.config import ConfigError
from agents.core.parallel import POP, make_mesh
from engine.driver import agent_class
from engine.population import Population, PopulationLearner, member_envs
from engine.protocol import Agent, Member
from envs import make_env, run_env_seed
from tests.agent_classes import ACERAgent

CFG = ACERConfig(
    num_envs=4, trace_len=5, batch_size=4, buffer_size=4 * 5 * 8, hidden=(16,), replay_ratio=2.0
)
SEED, ITERS = 3, 10
# Member i and its single run compute the same maths, vmapped or not; XLA:CPU may order a
# batched matmul's sums differently, so allow float32 rounding (observed: see the README).
RTOL, ATOL = 1e-5, 1e-6


@functools.cache  # shared by the 1- and 2-device cases (host outputs only)
def _single(seed: int, iters: int = ITERS):
    env = make_env("CartPole-v1", CFG.num_envs, run_env_seed(seed, CFG.num_envs))
    return _run_rows(ACERAgent(CFG, env, seed=seed), jax.random.PRNGKey(seed), iters)


def _population(size: int, mesh=None, iters: int = ITERS):
    pool = make_env("CartPole-v1", size * CFG.num_envs, run_env_seed(SEED, CFG.num_envs))
    views = member_envs(pool, size)
    pop = Population([ACERAgent(CFG, v, seed=SEED + i) for i, v in enumerate(views)], mesh=mesh)
    keys = jax.numpy.stack([jax.random.PRNGKey(SEED + i) for i in range(size)])
    state = pop.init(keys)
    pop.compile(state)
    rows = []
    for it in range(iters):
        state, out = pop.train_iteration(state, it, it * pop.member_steps_per_iteration)
        rows.append(pop.split_output(jax.device_get(out)))
    pop.close()
    return rows, pop, state


def _per_update(metrics):
    """One dict of scalars per update: a program of K updates (SAC's updates_per_program)
    returns one dict of [K] leaves, which a population's `split_output` gives as K dicts."""
    out = []
    for m in metrics:
        shapes = {np.shape(v) for v in m.values()}
        if len(shapes) == 1 and len(next(iter(shapes))) == 1:
            out += [{k: v[j] for k, v in m.items()} for j in range(len(next(iter(m.values()))))]
        else:
            out.append(m)
    return out


def _assert_same(single, member):
    for it, (a, b) in enumerate(zip(single, member, strict=True)):
        a = a._replace(metrics=_per_update(a.metrics))
        assert len(a.metrics) == len(b.metrics), f"iteration {it}: update counts differ"
        np.testing.assert_array_equal(a.game_over, b.game_over)
        np.testing.assert_allclose(a.finished_return, b.finished_return, rtol=RTOL)
        for ma, mb in zip(a.metrics, b.metrics, strict=True):
            for k in ma:
                np.testing.assert_allclose(
                    ma[k], mb[k], rtol=RTOL, atol=ATOL, err_msg=f"iter {it} {k}"
                )


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2])
def test_members_equal_single_runs(devices):
    """Issue 16's acceptance: member i of a P = 4 population equals the single run with
    seed SEED + i, metric by metric, for 10 iterations (on 1 device; and a population of 2
    split over 2 devices)."""
    mesh = make_mesh(devices, axis=POP) if devices > 1 else None
    size = 4 if devices == 1 else 2  # the mesh case: one member per device
    rows, pop, state = _population(size, mesh)
    assert pop.num_devices == devices and len(rows) == ITERS == 10
    assert jax.tree.leaves(state.learner)[0].shape[0] == size
    # the protocol: a population trains (`Agent`); its members act (`Member`)
    assert isinstance(pop, Agent) and not isinstance(pop, Member)
    assert all(isinstance(m, Member) for m in pop.members)
    for i in range(size):
        single = _single(SEED + i)
        _assert_same(single, [r[i] for r in rows])
    # the members did different numbers of updates somewhere (the masking was exercised)
    counts = [[len(r[i].metrics) for r in rows] for i in range(size)]
    assert len({tuple(c) for c in counts}) > 1
    assert pop.programs["absorb"].traces == 1
    assert pop.programs["replay_updates"].traces == 1


def test_bad_population_is_refused():
    env = make_env("CartPole-v1", CFG.num_envs, 0)
    with pytest.raises(ValueError, match="--num-seeds=3 is not divisible by the number of devices"):
        Population([ACERAgent(CFG, env, seed=i) for i in range(3)], mesh=make_mesh(2, axis=POP))
    from agents.core.registry import get_agent
    from tests.agent_classes import PPOAgent

    ppo_cfg = get_agent("ppo").make_config(None, num_envs=CFG.num_envs, update_loop="dispatch")
    with pytest.raises(ConfigError, match=r"--num-seeds > 1 with --agent ppo: .*--update-loop"):
        Population([PPOAgent(ppo_cfg, env)])
    with pytest.raises(ValueError, match=r"member agents must be built on .*member_envs"):
        Population([ACERAgent(CFG, env, seed=i) for i in range(2)])


TINY = [
    "--env", "CartPole-v1", "--num-envs", "4", "--trace-len", "5", "--batch-size", "4",
    "--buffer-size", "160", "--hidden", "16", "--replay-ratio", "2", "--eval-episodes", "2",
    "--no-progress", "--num-devices", "1", "--seed", str(SEED),
]  # fmt: skip
COMPARED = ("env_steps", "iteration", "updates", "episodes", "return_mean", "loss", "entropy")


def _csv(path):
    import csv

    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_cli_population_logs_members_as_seeds_and_resumes(tmp_path):
    """`--num-seeds 2`: member folders with the single runs' metrics, report reads 2 seeds,
    the checkpoint holds both learners, and --resume restores them."""
    import json

    from engine.checkpoint import Checkpointer
    from engine.common import restore_checkpoint
    from experiments import report
    from experiments.train import main

    pop_dir, one_dir = tmp_path / "pop", tmp_path / "one"
    steps = ["--total-steps", "100", "--checkpoint-every", "60", "--iterations-per-sync", "1"]
    main([*TINY, *steps, "--num-seeds", "2", "--run-dir", str(pop_dir)])
    argv_one = [*TINY, *steps, "--run-dir", str(one_dir)]
    argv_one[argv_one.index("--seed") + 1] = str(SEED + 1)
    main(argv_one)
    member, single = _csv(pop_dir / "member-1" / "metrics.csv"), _csv(one_dir / "metrics.csv")
    assert len(member) == len(single) == 5
    for a, b in zip(member, single, strict=True):
        for k in COMPARED:
            np.testing.assert_allclose(float(a[k]), float(b[k]), rtol=RTOL, atol=ATOL, err_msg=k)
    runs = report.find_runs([str(pop_dir)])
    assert [p.name for p in runs] == ["member-0", "member-1"]
    assert sorted(report.load_result(p).seed for p in runs) == [SEED, SEED + 1]
    summary = json.loads((pop_dir / "summary.json").read_text())
    assert summary["num_seeds"] == 2 and summary["env_steps"] == 200
    assert json.loads((pop_dir / "member-1" / "summary.json").read_text())["seed"] == SEED + 1

    # The last checkpoint (100 steps) holds both members' learners and counters.
    agent = ACERAgent(CFG, make_env("CartPole-v1", CFG.num_envs, 0))
    keys = jax.numpy.stack([jax.random.PRNGKey(0)] * 2)
    target = PopulationLearner(jax.eval_shape(jax.vmap(agent.init_learner), keys), {})
    ckpt = Checkpointer(pop_dir / "checkpoints")
    saved, meta, step = restore_checkpoint(ckpt, target)
    ckpt.close()
    assert step == 100 and len(meta["counters"]) == 2
    first = jax.tree.leaves(saved.member.params)[0]
    assert first.shape[0] == 2 and not np.allclose(first[0], first[1])  # two learners
    # Resume continues both members to 160 steps, from the restored population.
    main(["--resume", str(pop_dir), "--total-steps", "160", "--no-progress"])
    for i in range(2):
        rows = _csv(pop_dir / f"member-{i}" / "metrics.csv")
        assert [int(r["env_steps"]) for r in rows] == list(range(20, 180, 20))
        assert int(rows[5]["updates"]) > int(rows[4]["updates"])  # counters restored
    assert json.loads((pop_dir / "summary.json").read_text())["env_steps_per_member"] == 160
    # A member folder evaluates its row of the population's checkpoint; the root is refused.
    from experiments import evaluate

    result = evaluate.main([str(pop_dir / "member-1"), "--episodes", "2"])
    assert result["checkpoint_step"] == 160 and result["episodes"] == 2
    with pytest.raises(SystemExit, match=r"is a population of 2.*member-<i>"):
        evaluate.main([str(pop_dir), "--episodes", "2"])


def test_cli_num_seeds_errors(tmp_path):
    from experiments.train import main

    with pytest.raises(SystemExit, match=r"--num-seeds > 1 with --agent ppo: .*--update-loop"):
        main(["--agent", "ppo", "--num-seeds", "2", "--update-loop", "dispatch",
              "--num-devices", "1", "--run-dir", str(tmp_path / "d")])  # fmt: skip
    with pytest.raises(SystemExit, match="--num-seeds=3 is not divisible by the number of dev"):
        one_device = TINY.index("--num-devices")  # TINY's "1", replaced (a flag is given once)
        argv = [*TINY[:one_device], *TINY[one_device + 2 :], "--num-devices", "2"]
        main([*argv, "--num-seeds", "3", "--run-dir", str(tmp_path / "e")])


# ------------------------------------------ Reactor, varied hyper-parameters
def _run_rows(agent_or_pop, keys, iters, split=False):
    """Host outputs of `iters` iterations from `init(keys)` (split per member if `split`)."""
    state = agent_or_pop.init(keys)
    agent_or_pop.compile(state)
    rows = []
    for it in range(iters):
        steps = getattr(
            agent_or_pop, "member_steps_per_iteration", agent_or_pop.steps_per_iteration
        )
        state, out = agent_or_pop.train_iteration(state, it, it * steps)
        host = jax.device_get(out)
        rows.append(agent_or_pop.split_output(host) if split else host)
    agent_or_pop.close()
    return rows


def _pair(make, cfgs, size=2, iters=4, hparams=None, env_id="CartPole-v1", member_loop=None):
    """Rows of a population of `size` members (config cfgs[0], hyper-parameters `hparams`)
    and of the single runs with seeds SEED + i and configs cfgs[i]."""
    n = cfgs[0].num_envs
    pool = make_env(env_id, size * n, run_env_seed(SEED, n))
    views = member_envs(pool, size)
    members = [make(cfgs[0], v, SEED + i) for i, v in enumerate(views)]
    pop = Population(members, hparams=hparams, member_loop=member_loop)
    keys = jax.numpy.stack([jax.random.PRNGKey(SEED + i) for i in range(size)])
    pop_rows = _run_rows(pop, keys, iters, split=True)
    singles = []
    for i in range(size):
        agent = make(cfgs[i], make_env(env_id, n, run_env_seed(SEED + i, n)), SEED + i)
        singles.append(_run_rows(agent, jax.random.PRNGKey(SEED + i), iters))
    return pop_rows, singles


@pytest.mark.slow
def test_reactor_members_equal_lock_step_single_runs():
    from agents.reactor.config import ReactorConfig
    from tests.agent_classes import ReactorAgent

    cfg = ReactorConfig(
        num_envs=2, trace_len=4, batch_size=2, buffer_size=2 * 4 * 8, start_train_at=0,
        num_atoms=11, hidden=(16,), torso_out=16, lstm_size=8, env_steps_per_update=4.0,
        decoupled=False,
    )  # fmt: skip
    rows, singles = _pair(lambda c, e, s: ReactorAgent(c, e, seed=s), [cfg, cfg])
    for i in range(2):
        _assert_same(singles[i], [r[i] for r in rows])
    assert sum(len(r[0].metrics) for r in rows) > 0  # learner updates were compared
    decoupled = ReactorAgent(
        dataclasses.replace(cfg, decoupled=True), make_env("CartPole-v1", 2, 0)
    )
    with pytest.raises(ConfigError, match=r"lock-step.*--no-decoupled"):
        Population([decoupled])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dqn", "r2d1"])
def test_dqn_and_r2d1_members_equal_single_runs(name):
    """ε from each member's own step count, windows with look-back/ahead, R2D1's stored
    LSTM states and previous-action feedback: all per member; member 1 has another lr."""
    from agents.core.registry import get_agent

    spec = get_agent(name)
    small = dict(
        num_envs=2, trace_len=4, batch_size=2, buffer_size=2 * 4 * 16, start_train_at=8,
        hidden=(8,), eps_decay_steps=40, replay_ratio=4.0,
    )  # fmt: skip
    if name == "r2d1":
        small.update(seq_len=4, burn_in=4, lstm_size=8)
    cfg = spec.make_config(None, **small)
    cfg_b = dataclasses.replace(cfg, lr=cfg.lr * 3)
    hp = {"lr": np.array([cfg.lr, cfg.lr * 3])}
    make = lambda c, e, s: agent_class(spec)(c, e, seed=s)  # noqa: E731
    rows, singles = _pair(make, [cfg, cfg_b], iters=8, hparams=hp)
    for i in range(2):
        _assert_same(singles[i], [r[i] for r in rows])
    assert sum(len(r[1].metrics) for r in rows) > 0  # learner updates were compared


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, env_id, small, varied",
    [
        # PPO: several epochs and minibatches, reward scaling (per-member returns in the
        # learner state), member 1 with another lr and clip ε.
        ("ppo", "CartPole-v1",
         dict(num_envs=2, trace_len=8, epochs=2, num_minibatches=2, hidden=(8,),
              normalize_reward=True),
         {"lr": 3.0, "clip_eps": 0.5}),
        ("a2c", "CartPole-v1", dict(num_envs=2, trace_len=5, hidden=(8,)),
         {"lr": 3.0, "gae_lambda": 0.5}),
        # PQN: ε from each member's own step count; member 1 with another lr and λ.
        ("pqn", "CartPole-v1",
         dict(num_envs=2, trace_len=4, epochs=2, num_minibatches=2, hidden=(8,),
              eps_decay_steps=16),
         {"lr": 3.0, "td_lambda": 0.5}),
        # SAC (discrete on CartPole) and TD3 (Pendulum): uniform actions before
        # start_train_at from each member's own step count, then update_to_data updates.
        ("sac", "CartPole-v1",
         dict(num_envs=2, trace_len=4, batch_size=4, buffer_size=2 * 4 * 16, start_train_at=8,
              hidden=(8,), update_to_data=0.5),
         {"critic_lr": 3.0, "tau": 4.0}),
        # 2.4 updates per iteration: 2 or 3, in programs of K = 2, so a lock-step population
        # runs its remainder update through the masked program
        ("sac", "CartPole-v1",
         dict(num_envs=2, trace_len=4, batch_size=4, buffer_size=2 * 4 * 16, start_train_at=8,
              hidden=(8,), update_to_data=0.3),
         {"critic_lr": 3.0}),
        ("td3", "Pendulum-v1",
         dict(num_envs=2, trace_len=4, batch_size=4, buffer_size=2 * 4 * 16, start_train_at=8,
              hidden=(8,), update_to_data=0.5, policy_delay=2),
         {"actor_lr": 3.0, "target_noise": 0.5}),
    ],
)  # fmt: skip
def test_ppo_a2c_sac_td3_members_equal_single_runs(name, env_id, small, varied):
    """Member i equals the single run with seed SEED + i; member 1's varied fields (traced
    inside the vmapped update) equal a single run configured with those values."""
    from agents.core.registry import get_agent

    spec = get_agent(name)
    cfg = spec.make_config(None, **small)
    values = {k: getattr(cfg, k) * f for k, f in varied.items()}
    cfg_b = dataclasses.replace(cfg, **values)
    hp = {k: np.array([getattr(cfg, k), v]) for k, v in values.items()}
    make = lambda c, e, s: agent_class(spec)(c, e, seed=s)  # noqa: E731
    rows, singles = _pair(make, [cfg, cfg_b], iters=4, hparams=hp, env_id=env_id)
    for i in range(2):
        _assert_same(singles[i], [r[i] for r in rows])
    assert sum(len(r[1].metrics) for r in rows) > 0  # learner updates were compared


def test_shared_replay_draw_members_update_in_lock_step():
    """--replay-draw shared: each member still equals its single run (which draws the same
    counts), and the members run the same number of replay updates in every iteration, so
    none is masked."""
    cfg = CFG.replace(replay_draw="shared")
    rows, singles = _pair(lambda c, e, s: ACERAgent(c, e, seed=s), [cfg, cfg], size=2, iters=6)
    for i in range(2):
        _assert_same(singles[i], [r[i] for r in rows])
    counts = [[len(r[i].metrics) for r in rows] for i in range(2)]
    assert counts[0] == counts[1]
    assert sum(counts[0]) > 6  # replay updates ran beside the 6 on-policy ones


@pytest.mark.parametrize("draw", ["shared", "seed"])
def test_host_driven_lock_step_runs_unmasked_updates(draw):
    """One iteration per call (`train_iteration`): members in lock step (`--replay-draw
    shared`: the same counts) run their replay updates unmasked; members that draw their own
    counts run them masked. The values are checked against single runs above."""
    pool = make_env("CartPole-v1", 2 * CFG.num_envs, run_env_seed(SEED, CFG.num_envs))
    cfg = CFG.replace(replay_draw=draw)
    views = member_envs(pool, 2)
    pop = Population([ACERAgent(cfg, v, seed=SEED + i) for i, v in enumerate(views)])
    assert pop.lock_step == (draw == "shared")
    state = pop.init(jax.numpy.stack([jax.random.PRNGKey(SEED + i) for i in range(2)]))
    pop.compile(state)
    for it in range(4):
        state, _ = pop.train_iteration(state, it, it * pop.member_steps_per_iteration)
    pop.close()
    traced = (pop._all_updates.traces, pop._updates.traces)
    assert traced == ((1, 0) if draw == "shared" else (0, 1))


@pytest.mark.slow
def test_member_loop_members_equal_single_runs():
    """The unrolled member loop (the default for image observations on CPU) computes what
    the vmapped population does: each member equals its single run, updates and acting."""
    rows, singles = _pair(
        lambda c, e, s: ACERAgent(c, e, seed=s), [CFG, CFG], size=2, iters=4, member_loop=True
    )
    for i in range(2):
        _assert_same(singles[i], [r[i] for r in rows])
    assert sum(len(r[0].metrics) for r in rows) > 1


def test_member_loop_is_chosen_for_images_on_cpu():
    from types import SimpleNamespace

    from engine.programs import member_loop_map
    from envs import ArraySpec
    from networks.torsos import convolves_on_cpu

    def convolves(obs_spec, **config):
        spec = SimpleNamespace(obs_spec=obs_spec)
        return convolves_on_cpu(spec, SimpleNamespace(**config))

    assert jax.default_backend() == "cpu"
    assert convolves(ArraySpec((4, 84, 84), np.uint8))  # Atari frames
    # data-efficient Rainbow's torso: its stride-5 convolutions are TiledConv's matmuls
    assert not convolves(ArraySpec((4, 84, 84), np.uint8), cnn="data-efficient")
    assert convolves(
        {"image": ArraySpec((7, 7, 3), np.uint8), "direction": ArraySpec((), np.int32)}
    )
    assert not convolves(ArraySpec((4,), np.float32))
    assert not convolves(ArraySpec((10, 10, 4), np.bool_))  # MinAtar: PatchConv on CPU
    pool = make_env("CartPole-v1", 2 * CFG.num_envs, 0)
    assert not Population([ACERAgent(CFG, v) for v in member_envs(pool, 2)]).member_loop
    f = member_loop_map(lambda x, y: {"s": x.sum() + y, "x": x * y})
    x, y = np.arange(6.0).reshape(3, 2), np.array([1.0, 2.0, 3.0])
    out, ref = f(x, y), jax.vmap(lambda x, y: {"s": x.sum() + y, "x": x * y})(x, y)
    np.testing.assert_array_equal(out["s"], ref["s"])
    np.testing.assert_array_equal(out["x"], ref["x"])


def test_ppo_population_needs_a_one_program_update():
    from agents.core.registry import get_agent
    from tests.agent_classes import PPOAgent

    cfg = get_agent("ppo").make_config(None, num_envs=2, update_loop="dispatch")
    with pytest.raises(ConfigError, match=r"--num-seeds > 1 with --agent ppo: .*--update-loop"):
        Population([PPOAgent(cfg, member_envs(make_env("CartPole-v1", 2, 0), 1)[0])])
    a2c = get_agent("a2c").make_config(None, num_envs=2)
    pool = make_env("CartPole-v1", 4, 0)
    members = [agent_class(get_agent("a2c"))(a2c, v) for v in member_envs(pool, 2)]
    with pytest.raises(ConfigError, match=r"--agent a2c cannot vary 'clip_eps'"):
        Population(members, hparams={"clip_eps": np.array([0.1, 0.2])})


@pytest.mark.slow
def test_varied_hparams_members_equal_single_runs_with_those_values():
    """The traced config: member i with lr_i, entropy_weight_i, discount_i computes what
    the single run with those flags computes."""
    cfg_a = dataclasses.replace(CFG, lr=3e-4, entropy_weight=0.01, discount=0.95)
    cfg_b = dataclasses.replace(CFG, lr=2e-3, entropy_weight=0.05, discount=0.9)
    hp = {
        "lr": np.array([3e-4, 2e-3]),
        "entropy_weight": np.array([0.01, 0.05]),
        "discount": np.array([0.95, 0.9]),
    }
    rows, singles = _pair(lambda c, e, s: ACERAgent(c, e, seed=s), [cfg_a, cfg_b], hparams=hp)
    for i in range(2):
        _assert_same(singles[i], [r[i] for r in rows])
    # and the values matter: member 1 differs from a run with member 0's values
    other = [r[1] for r in rows]
    base = _single(SEED + 1, iters=4)
    assert not all(
        np.allclose(a.metrics[0]["loss"], b.metrics[0]["loss"])
        for a, b in zip(base, other, strict=True)
        if a.metrics and b.metrics
    )


@pytest.mark.slow
def test_cli_pbt_writes_lineage_and_resume_restores_hyper_parameters(tmp_path):
    from experiments.train import main

    run_dir = tmp_path / "pbt"
    argv = [
        *TINY, "--num-seeds", "4", "--sweep-lr", "1e-4,1e-2", "--evolve", "pbt",
        "--evolve-every", "40", "--evolve-fraction", "0.25", "--run-dir", str(run_dir),
        "--checkpoint-every", "100", "--return-window", "5",
    ]  # fmt: skip
    main([*argv, "--total-steps", "200"])
    lineage = _csv(run_dir / "lineage.csv")
    generations = sorted({int(r["generation"]) for r in lineage})
    assert generations and all(
        len([r for r in lineage if int(r["generation"]) == g]) == 4 for g in generations
    )
    for g in generations:
        rows = {int(r["member"]): r for r in lineage if int(r["generation"]) == g}
        scores = {m: float(r["score"]) for m, r in rows.items()}
        copied = [m for m, r in rows.items() if int(r["parent"]) != m]
        assert len(copied) == 1  # 0.25 of 4
        child = copied[0]
        parent = int(rows[child]["parent"])
        assert scores[parent] == max(scores.values()) and scores[child] == min(scores.values())
        # the child's lr is its parent's times 0.8 or 1.2
        before = [r for r in lineage if int(r["generation"]) < g and int(r["member"]) == parent]
        parent_lr = float(before[-1]["hp_lr"]) if before else (1e-4, 1e-2)[parent % 2]
        ratio = float(rows[child]["hp_lr"]) / parent_lr
        assert min(abs(ratio - 0.8), abs(ratio - 1.2)) < 1e-4
    member = _csv(run_dir / "member-0" / "metrics.csv")
    assert "hp_lr" in member[0] and "parent" in member[0]
    assert float(member[0]["hp_lr"]) == pytest.approx(1e-4)
    _assert_member_configs_follow_lineage(run_dir, lineage, 4)
    # Resume from the 200-step checkpoint: the evolved lrs come back from it.
    last = {int(r["member"]): float(r["hp_lr"]) for r in lineage}
    main(["--resume", str(run_dir), "--total-steps", "280", "--no-progress"])
    for i in range(4):
        rows = _csv(run_dir / f"member-{i}" / "metrics.csv")
        resumed = [r for r in rows if int(r["env_steps"]) > 200]
        assert float(resumed[0]["hp_lr"]) == pytest.approx(last[i], rel=1e-6)
    lineage = _csv(run_dir / "lineage.csv")
    assert max(int(r["env_steps"]) for r in lineage) > 200  # generations after the resume
    _assert_member_configs_follow_lineage(run_dir, lineage, 4)


def _assert_member_configs_follow_lineage(run_dir, lineage, size):
    """Each member's config.json holds its hyper-parameters of lineage.csv's last row, and
    since when: the last generation that copied or resampled it (0: drawn by --vary)."""
    import json

    from engine.common import load_run

    for i in range(size):
        rows = [r for r in lineage if int(r["member"]) == i]
        changed = [r for r in rows if int(r["parent"]) != i or int(r["resampled"])]
        since = {"generation": 0, "env_steps": 0}
        if changed:
            since = {k: int(changed[-1][k]) for k in since}
        config = json.loads((run_dir / f"member-{i}" / "config.json").read_text())
        assert config["population"]["since"] == since
        assert config["population"]["hparams"] == {"lr": pytest.approx(float(rows[-1]["hp_lr"]))}
        assert config["agent_config"]["lr"] == config["population"]["hparams"]["lr"]
        assert load_run(run_dir / f"member-{i}").config.lr == config["agent_config"]["lr"]


@pytest.mark.slow
def test_cli_vary_writes_each_members_own_values(tmp_path):
    """--vary: member-i/config.json holds member i's drawn values (what it trains with) in
    agent_config and population.hparams, the root config.json the base values and the
    specs; a resume keeps both."""
    import json

    from agents.core.registry import get_agent
    from engine.common import load_run
    from engine.evolution import draw_hparams
    from experiments.train import main

    run_dir = tmp_path / "vary"
    specs = ["lr=loguniform:1e-4:1e-2", "entropy_weight=0.02,0.05"]
    argv = [*TINY, "--num-seeds", "2", "--run-dir", str(run_dir)]
    argv += ["--vary", *specs]
    main([*argv, "--total-steps", "20", "--checkpoint-every", "20"])
    drawn = draw_hparams(
        dict(s.split("=", 1) for s in specs), 2, agent_class(get_agent("acer")).tunable, SEED
    )

    def check():
        root = json.loads((run_dir / "config.json").read_text())
        assert "population" not in root and root["run"]["vary"] == specs
        base = load_run(run_dir).config
        for i in range(2):
            config = json.loads((run_dir / f"member-{i}" / "config.json").read_text())
            pop = config["population"]
            assert pop["member"] == i and pop["of"] == 2 and config["run"]["seed"] == SEED + i
            assert pop["since"] == {"generation": 0, "env_steps": 0}
            assert set(pop["hparams"]) == set(drawn)
            member = load_run(run_dir / f"member-{i}").config  # it loads, with its values
            for field, values in drawn.items():
                value = config["agent_config"][field]
                assert value == pop["hparams"][field] == getattr(member, field)
                assert np.float32(value) == values[i]  # the float32 the member trains with
                assert getattr(base, field) != value  # the root keeps the base value

    check()
    main(["--resume", str(run_dir), "--total-steps", "40", "--no-progress"])
    check()
    rows = _csv(run_dir / "member-1" / "metrics.csv")
    assert [int(r["env_steps"]) for r in rows] == [20, 40]
    assert float(rows[1]["hp_entropy_weight"]) == pytest.approx(0.05)


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--num-seeds", "1", "--evolve", "pbt"], "--evolve needs --num-seeds > 1"),
        (["--num-seeds", "2", "--evolve", "pbt"], "--evolve-every must be >= 1"),
        (["--num-seeds", "2", "--evolve-every", "10"], "--evolve-every needs --evolve pbt or cem"),
        (["--num-seeds", "2", "--evolve", "pbt", "--evolve-every", "9", "--evolve-replace", "1"],
         "--evolve-replace needs --evolve cem"),
        (["--num-seeds", "2", "--vary", "batch_size=2,4"], "cannot vary 'batch_size'"),
        (["--num-seeds", "2", "--vary", "lr"], "--vary must be FIELD=SPEC"),
        (["--num-seeds", "2", "--sweep-lr", "1e-3", "--vary", "lr=1e-4"], "give lr twice"),
    ],
)  # fmt: skip
def test_cli_population_flag_errors(tmp_path, extra, match):
    from experiments.train import main

    argv = [a for a in TINY]
    with pytest.raises(SystemExit, match=match):
        main([*argv, *extra, "--run-dir", str(tmp_path / "x")])
