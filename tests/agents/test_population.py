"""`--num-seeds P`: a population of P learners in one program (agents/population.py).

Member i must equal the single run with seed `seed + i`: its own envs, RNG streams, Poisson
update counts and replay. Compared metric by metric over several iterations, and on a mesh
of 2 fake CPU devices (conftest fakes 4)."""

import jax
import numpy as np
import pytest

from agents.acer.agent import ACERAgent
from agents.acer.config import ACERConfig
from agents.config import ConfigError
from agents.parallel import POP, make_mesh
from agents.population import Population
from envs import make_env

CFG = ACERConfig(
    num_envs=4, trace_len=5, batch_size=4, buffer_size=4 * 5 * 8, hidden=(16,), replay_ratio=2.0
)
SEED, ITERS = 3, 6
# Member i and its single run compute the same maths, vmapped or not; XLA:CPU may order a
# batched matmul's sums differently, so allow float32 rounding (observed: see the README).
RTOL, ATOL = 1e-5, 1e-6


def _single(seed: int, iters: int = ITERS):
    agent = ACERAgent(CFG, make_env("CartPole-v1", CFG.num_envs, seed), seed=seed)
    state = agent.init(jax.random.PRNGKey(seed))
    agent.compile(state)
    rows = []
    for it in range(iters):
        state, out = agent.train_iteration(state, it, it * agent.steps_per_iteration)
        rows.append(jax.device_get(out))
    agent.close()
    return rows


def _population(size: int, mesh=None, iters: int = ITERS):
    members = [
        ACERAgent(CFG, make_env("CartPole-v1", CFG.num_envs, SEED + i), seed=SEED + i)
        for i in range(size)
    ]
    pop = Population(members, mesh=mesh)
    keys = jax.numpy.stack([jax.random.PRNGKey(SEED + i) for i in range(size)])
    state = pop.init(keys)
    pop.compile(state)
    rows = []
    for it in range(iters):
        state, out = pop.train_iteration(state, it, it * pop.member_steps_per_iteration)
        rows.append(pop.split_output(jax.device_get(out)))
    pop.close()
    return rows, pop, state


def _assert_same(single, member):
    for it, (a, b) in enumerate(zip(single, member, strict=True)):
        assert len(a.metrics) == len(b.metrics), f"iteration {it}: update counts differ"
        np.testing.assert_array_equal(a.game_over, b.game_over)
        np.testing.assert_allclose(a.finished_return, b.finished_return, rtol=RTOL)
        for ma, mb in zip(a.metrics, b.metrics, strict=True):
            for k in ma:
                np.testing.assert_allclose(
                    ma[k], mb[k], rtol=RTOL, atol=ATOL, err_msg=f"iter {it} {k}"
                )


@pytest.mark.parametrize("devices", [1, 2])
def test_members_equal_single_runs(devices):
    mesh = make_mesh(devices, axis=POP) if devices > 1 else None
    rows, pop, state = _population(2, mesh)
    assert pop.num_devices == devices
    assert jax.tree.leaves(state.learner)[0].shape[0] == 2
    for i in range(2):
        single = _single(SEED + i)
        _assert_same(single, [r[i] for r in rows])
    # the members did different numbers of updates somewhere (the masking was exercised)
    counts = [[len(r[i].metrics) for r in rows] for i in range(2)]
    assert counts[0] != counts[1]
    assert pop.programs["absorb"].traces == 1
    assert pop.programs["replay_updates"].traces == 1


def test_bad_population_is_refused():
    env = make_env("CartPole-v1", CFG.num_envs, 0)
    with pytest.raises(ValueError, match="--num-seeds=3 is not divisible by the number of devices"):
        Population([ACERAgent(CFG, env, seed=i) for i in range(3)], mesh=make_mesh(2, axis=POP))
    from agents.dqn.agent import DQNAgent
    from agents.registry import get_agent

    dqn_cfg = get_agent("dqn").make_config(None, num_envs=CFG.num_envs)
    with pytest.raises(ConfigError, match="--num-seeds > 1 is not supported by --agent dqn"):
        Population([DQNAgent(dqn_cfg, env)])


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


def test_cli_population_logs_members_as_seeds_and_resumes(tmp_path):
    """`--num-seeds 2`: member folders with the single runs' metrics, report reads 2 seeds,
    the checkpoint holds both learners, and --resume restores them."""
    import json

    from experiments import report
    from experiments.checkpoint import Checkpointer
    from experiments.common import restore_checkpoint
    from experiments.train import main

    pop_dir, one_dir = tmp_path / "pop", tmp_path / "one"
    steps = ["--total-steps", "100", "--checkpoint-every", "60"]
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
    target = jax.eval_shape(jax.vmap(agent.init_learner), keys)
    ckpt = Checkpointer(pop_dir / "checkpoints")
    saved, meta, step = restore_checkpoint(ckpt, target)
    ckpt.close()
    assert step == 100 and len(meta["counters"]) == 2
    first = jax.tree.leaves(saved.params)[0]
    assert first.shape[0] == 2 and not np.allclose(first[0], first[1])  # two learners
    # Resume continues both members to 160 steps, from the restored population.
    main(["--resume", str(pop_dir), "--total-steps", "160", "--no-progress"])
    for i in range(2):
        rows = _csv(pop_dir / f"member-{i}" / "metrics.csv")
        assert [int(r["env_steps"]) for r in rows] == list(range(20, 180, 20))
        assert int(rows[5]["updates"]) > int(rows[4]["updates"])  # counters restored
    assert json.loads((pop_dir / "summary.json").read_text())["env_steps_per_member"] == 160


def test_cli_num_seeds_errors(tmp_path):
    from experiments.train import main

    with pytest.raises(SystemExit, match="--num-seeds > 1 is not supported by --agent dqn"):
        main(["--agent", "dqn", "--num-seeds", "2", "--num-devices", "1", "--run-dir",
              str(tmp_path / "d")])  # fmt: skip
    with pytest.raises(SystemExit, match="--num-seeds=3 is not divisible by the number of dev"):
        main([*TINY, "--num-seeds", "3", "--num-devices", "2", "--run-dir", str(tmp_path / "e")])
