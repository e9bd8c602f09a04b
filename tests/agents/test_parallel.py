"""Data parallelism: the sharded learner equals the single-device one, bad splits are refused,
and the CLI runs on 2 fake devices and as 2 jax.distributed processes on 127.0.0.1."""

import functools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from agents.acer.config import ACERConfig
from agents.core.parallel import make_mesh, place_rollout, to_global
from engine.driver import agent_class
from envs import make_env
from tests.agent_classes import ACERAgent
from tests.xla import subprocess_xla_flags

ROOT = Path(__file__).resolve().parents[2]
CFG = ACERConfig(num_envs=8, trace_len=5, batch_size=8, buffer_size=8 * 5 * 3, hidden=(16,))


@functools.cache  # the 1-device reference, once per worker for the cases that share it
def _one_update(num_devices: int, trust_region: bool):
    """One on-policy update on the same global batch of traces, with `num_devices` shards."""
    # adam_eps = 1 makes the step proportional to the gradient. With a tiny ε, Adam's first
    # step is ≈ lr·sign(g), which turns float32 summation-order noise in near-zero gradient
    # entries into visible parameter differences; that would test Adam, not the sharding.
    cfg = CFG.replace(trust_region=trust_region, microbatch_traces=0, adam_eps=1.0)
    ref_env = make_env("CartPole-v1", 8, 3, max_episode_steps=6)  # boundaries inside traces
    ref = ACERAgent(cfg, ref_env)
    state = ref.init(jax.random.PRNGKey(0))
    learner = state.learner._replace(  # an average that differs: the trust region is active
        avg_params=jax.tree.map(lambda p: -300.0 * p, state.learner.params)
    )
    _, traj = jax.jit(_rollout(ref))(learner.params, state.actor)
    if num_devices == 1:
        new, _, metrics = jax.jit(ref.absorb)(learner, ref.replay.init(), traj)
        return jax.device_get((new.params, new.avg_params, metrics[0]))
    agent = ACERAgent(cfg, make_env("CartPole-v1", 8, 3), mesh=make_mesh(num_devices))
    placed = place_rollout(traj, agent.mesh)
    new, _, metrics = agent.programs["absorb"](
        to_global(learner, agent.mesh, P()), agent._init_replay(), placed
    )
    return jax.device_get((new.params, new.avg_params, metrics[0]))


def _rollout(agent):
    from engine.rollout import make_xla_rollout

    return make_xla_rollout(agent.env, agent.select_action, CFG.trace_len, CFG.discount)


@pytest.mark.parametrize(
    "trust_region, n",
    [
        (True, 2),
        pytest.param(True, 4, marks=pytest.mark.slow),
        pytest.param(False, 2, marks=pytest.mark.slow),
        pytest.param(False, 4, marks=pytest.mark.slow),
    ],
)
def test_sharded_update_equals_single_device(trust_region, n):
    """The fast tier's test of data parallelism's gradient averaging
    (agents.core.learning.gradient_step: pmean'd gradients, psum'd sums) through an agent's
    sharded update: 2 devices, the trust region active (asserted). 4 devices and no trust
    region are the slow tier's, as are the other agents' own sharded-equals-single tests
    (Reactor's learner, PPO) and sharded training runs (SAC, continuous ACER): one fast
    test per mechanism (issue 67; PQN's is the fast one of `grads_and_aux`)."""
    assert jax.device_count() >= 4, "conftest fakes 4 CPU devices"
    p1, a1, m1 = _one_update(1, trust_region)
    pn, an, mn = _one_update(n, trust_region)
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)  # noqa: E731
    jax.tree.map(close, p1, pn)
    jax.tree.map(close, a1, an)
    for k in m1:
        close(m1[k], mn[k])
    if trust_region:
        assert m1["tr_active"] > 0


def test_indivisible_batch_or_envs_is_refused():
    mesh = make_mesh(4)
    with pytest.raises(ValueError, match="--num-envs=6 is not divisible by the number of devices"):
        ACERAgent(CFG.replace(num_envs=6, batch_size=8), make_env("CartPole-v1", 6, 0), mesh=mesh)
    with pytest.raises(
        ValueError, match="--batch-size=6 is not divisible by the number of devices"
    ):
        ACERAgent(CFG.replace(batch_size=6), make_env("CartPole-v1", 8, 0), mesh=mesh)
    with pytest.raises(ValueError, match="--num-devices 9 is not possible"):
        make_mesh(9)


def test_sharded_agent_trains_and_keeps_replicas_identical():
    agent = ACERAgent(
        CFG.replace(replay_ratio=2.0), make_env("CartPole-v1", 8, 0), mesh=make_mesh(2)
    )
    state = agent.init(jax.random.PRNGKey(0))
    agent.compile(state)
    due = [agent.updates_due(it, it * 40) for it in range(4)]
    for it in range(4):
        state, out = agent.train_iteration(state, it, it * 40)
        assert len(jax.device_get(out.metrics)) == 1 + due[it]  # on-policy + replay updates
    assert sum(due) > 0 and int(state.learner.step) == 4 + sum(due)
    for leaf in jax.tree.leaves(state.learner.params):
        shards = [np.asarray(s.data) for s in leaf.addressable_shards]
        for s in shards[1:]:
            np.testing.assert_array_equal(shards[0], s)
    assert state.replay.frames.sharding.spec == P("data")


def _env_with(devices=None):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    env["XLA_FLAGS"] = subprocess_xla_flags(devices)
    return env


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["acer", "reactor"])
def test_cli_num_devices_2_runs_end_to_end(tmp_path, agent):
    run_dir = tmp_path / "dp"
    extra = ["--lstm-size", "8", "--start-train-at", "0"] if agent == "reactor" else []
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.train",
            "--agent",
            agent,
            *extra,
            "--num-devices",
            "2",
            "--num-envs",
            "4",
            "--trace-len",
            "5",
            "--batch-size",
            "4",
            "--buffer-size",
            "400",
            "--total-steps",
            "200",
            "--checkpoint-every",
            "100",
            "--eval-episodes",
            "2",
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ],
        cwd=ROOT,
        env=_env_with(2),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["devices"] == 2 and summary["processes"] == 1
    resumed = subprocess.run(
        [sys.executable, "-m", "experiments.train", "--resume", str(run_dir),
         "--total-steps", "260", "--no-progress"],
        cwd=ROOT, env=_env_with(2), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 260


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(run_dir, extra):
    port = _free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "experiments.train",
                "--coordinator-address",
                f"127.0.0.1:{port}",
                "--num-processes",
                "2",
                "--process-id",
                str(i),
                "--no-progress",
                *extra,
            ],
            cwd=ROOT,
            env=_env_with(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    return [o for o, _ in outs]


@pytest.mark.slow
def test_two_processes_with_jax_distributed(tmp_path):
    run_dir = tmp_path / "mh"
    common = [
        "--num-envs", "4", "--trace-len", "5", "--batch-size", "4", "--buffer-size", "200",
        "--checkpoint-every", "100", "--eval-episodes", "2", "--run-dir", str(run_dir),
    ]  # fmt: skip
    outs = _two_processes(run_dir, [*common, "--total-steps", "200"])
    sums = [o.split("params checksum ")[1].split()[0] for o in outs]
    assert sums[0] == sums[1]  # identical replicas at the end
    assert "summary.json" in outs[0] and "summary.json" not in outs[1]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["devices"] == 2
    lines = (run_dir / "metrics.csv").read_text().splitlines()
    steps = [int(line.split(",")[0]) for line in lines[1:]]  # one writer, one row per sync
    assert steps == sorted(set(steps)) and steps[-1] == 200 and 100 in steps  # a checkpoint
    assert len(list((run_dir / "tb").iterdir())) == 1
    # Every process resumes from process 0's checkpoint.
    outs = _two_processes(run_dir, ["--resume", str(run_dir), "--total-steps", "240"])
    sums = [o.split("params checksum ")[1].split()[0] for o in outs]
    assert sums[0] == sums[1]
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == 240


def test_device_keys_give_each_device_its_own_draws():
    """SAC's sampled actions and TD3's target smoothing noise under data parallelism: every
    device starts from the same learner key; `device_keys` folds in the device index, so
    the rows of different devices get different noise (as one device drawing for the whole
    batch would), and the key each device would have used unfolded is the same on all."""
    from agents.core.learning import device_keys
    from agents.core.parallel import DATA

    mesh = make_mesh(2)

    def draws(key):
        (mine,) = device_keys(DATA, key)
        return jax.random.normal(mine, (1, 3)), jax.random.normal(key, (1, 3))

    fn = jax.shard_map(draws, mesh=mesh, in_specs=P(), out_specs=(P(DATA), P(DATA)))
    own, shared = (np.asarray(x) for x in jax.jit(fn)(jax.random.PRNGKey(0)))
    assert not np.allclose(own[0], own[1])
    np.testing.assert_array_equal(shared[0], shared[1])


class _WeightsOnly:
    """A learner whose update only hands back the importance weights of the batch it is given
    and the probabilities of the draw that made it (`drawn`: the `SampleInfo`s that the
    test's spy on `sample` records), so that an agent's replay update runs its own sampling
    without compiling any learning maths."""

    def __init__(self, drawn):
        self.drawn = drawn

    def update(self, learner, batch, axis_name=None, hparams=None):
        metrics = {"is_weight": batch.is_weight, "probability": self.drawn[-1].probability}
        return learner, metrics, jnp.ones_like(batch.is_weight)


def _sharded_replay_with_unequal_priorities(agent, seed=0):
    """Every slot of each device's replay written (zeros: what a trace holds does not matter
    here), then priorities on its (env, slot) pairs (those not valid now are ignored by
    `set_priorities`): spread from 0.1 to 10 on device 0, all 1 on device 1. Device 1's
    weights are then all 1 and device 0's are not, so one device's largest weight differs
    from the whole batch's (unless device 0 draws a weight of exactly 1)."""
    from agents.core.parallel import DATA

    replay, mesh = agent.replay, agent.mesh
    specs, base = replay.partition_specs(DATA), replay.base
    n, c, devices = replay.num_envs, replay.traces_per_env, mesh.size

    def zeros(spec, lead):
        return jax.tree.map(lambda s: jnp.zeros((*lead, *s.shape), s.dtype), spec)

    t = base.trace_len
    obs = zeros(base.obs_spec, (t, n * devices))
    steps = zeros(dict(base.step_spec), (t, n * devices))
    extras = zeros(base.extras_spec, (n * devices,))
    add = jax.jit(
        jax.shard_map(
            replay.add, mesh=mesh, in_specs=(specs, P(None, DATA), P(None, DATA), P(DATA)),
            out_specs=specs,
        ),
        donate_argnums=0,
    )  # fmt: skip
    state = agent._init_replay()
    for _ in range(c):
        state = add(state, obs, steps, extras)
    env, slot = (a.reshape(-1) for a in np.meshgrid(np.arange(n), np.arange(c), indexing="ij"))
    values = np.ones((devices, n * c))
    values[0] = np.random.default_rng(seed).permutation(np.logspace(-1.0, 1.0, n * c))
    set_priorities = jax.jit(
        jax.shard_map(
            replay.set_priorities, mesh=mesh, in_specs=(specs, P(DATA), P(DATA), P(DATA)),
            out_specs=specs,
        )
    )  # fmt: skip
    tile = lambda a: np.tile(a, devices).astype(np.int32)  # noqa: E731
    return set_priorities(state, tile(env), tile(slot), values.reshape(-1).astype(np.float32))


# One fast case per code path that hands `sample` the mesh axis: DQN's (the parts driver's
# replay_update) and TD3's (agents.core.offpolicy.sample_transitions, with β). R2D1 and the
# Reactor share DQN's, feed-forward SAC shares TD3's: the slow tier's (issue 67).
@pytest.mark.parametrize(
    "name, env_id, overrides",
    [
        ("dqn", "CartPole-v1", dict(prioritized=True, start_train_at=0)),
        pytest.param(
            "r2d1",
            "CartPole-v1",
            dict(prioritized=True, start_train_at=0, seq_len=4, burn_in=4, lstm_size=8),
            marks=pytest.mark.slow,
        ),
        pytest.param("reactor", "CartPole-v1", dict(start_train_at=0), marks=pytest.mark.slow),
        pytest.param(
            "sac", "Pendulum-v1", dict(prioritized=True, start_train_at=0), marks=pytest.mark.slow
        ),
        ("td3", "Pendulum-v1", dict(prioritized=True, start_train_at=0)),
    ],
)
def test_prioritized_agents_normalise_weights_over_every_device(
    monkeypatch, name, env_id, overrides
):
    """Each prioritized agent's replay update under `shard_map` on 2 devices hands its learner
    importance weights divided by their maximum over the whole batch, every device's draws
    (replay/prioritized.py, "Data parallelism"), not by each device's own maximum.

    The agent's own `replay_update` runs (its sampling call, the key it folds, β where it
    applies one) with its learner replaced by one that returns the weights of the batch it
    is given. Reference, in NumPy from the drawn probabilities P(i) of both devices: the
    weight 1 / (num_valid · P(i)) over the largest of the whole batch, i.e. min P / P(i)
    (num_valid is the same on every device: equal shards), to the power β. The replay's
    priorities make the per-device rule give other weights (checked).

    Cost: only the replay's functions and the sampling are compiled, no learner (the test
    compiled the 5 whole agents before, about 50 s for the 5 on a 2-core machine, to see the
    keyword only). `sample` itself is checked against NumPy, both rules, in
    tests/replay/test_partition_specs.py; this test is the agents' wiring of it."""
    from agents.core.parallel import DATA
    from agents.core.registry import get_agent
    from replay import PrioritizedTraceReplay

    seen, drawn = [], []
    sample = PrioritizedTraceReplay.sample

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("axis_name"))
        out = sample(self, *args, **kwargs)
        drawn.append(out.info)
        return out

    monkeypatch.setattr(PrioritizedTraceReplay, "sample", spy)
    spec = get_agent(name)
    tiny = dict(num_envs=2, trace_len=4, batch_size=8, buffer_size=2 * 4 * 16, hidden=(8,))
    cfg = spec.make_config(None, **tiny, **overrides)
    agent = agent_class(spec)(cfg, make_env(env_id, 2, 0), seed=0, mesh=make_mesh(2))
    assert isinstance(agent.replay, PrioritizedTraceReplay)
    # Only the learner's key (the draws) and env step count (β, 0 here) matter to sampling:
    # zeros of its shapes, not an initialised network (8.8 s for Reactor's, op by op).
    abstract = jax.eval_shape(agent.init_learner, jax.random.PRNGKey(0))
    learner = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), abstract)
    replay = _sharded_replay_with_unequal_priorities(agent)
    weights_only = _WeightsOnly(drawn)
    if agent.parts.replay.update is not None:  # the driver samples (`ReplayParts.update`)
        replay_parts = agent.parts.replay._replace(
            update=lambda learner, batch, hyper, axis_name=None: weights_only.update(
                learner, batch, axis_name
            )
        )
        agent.parts = agent.parts._replace(replay=replay_parts)
    else:  # the agent samples (`ReplayParts.step`, SAC and TD3): its learner's update
        # (the parts are shared by equal agents: monkeypatch restores it)
        monkeypatch.setattr(agent.modules.learner, "update", weights_only.update)

    def weights(learner, replay):
        _, _, metrics = agent.replay_update(learner, replay, DATA)
        return metrics["is_weight"], metrics["probability"]

    specs = agent.replay.partition_specs(DATA)
    fn = jax.shard_map(weights, mesh=agent.mesh, in_specs=(P(), specs), out_specs=P(DATA))
    got, probability = (np.asarray(x, np.float64) for x in jax.jit(fn)(learner, replay))

    b = cfg.batch_size // 2
    assert got.shape == probability.shape == (2 * b,)
    inverse = 1.0 / probability
    want = inverse / inverse.max()
    per_device = (inverse.reshape(2, b) / inverse.reshape(2, b).max(axis=1, keepdims=True)).ravel()
    assert np.abs(per_device - want).max() > 0.05  # the two rules differ on these draws
    # SAC and TD3 raise the weights to β before their learner (β = --importance-exponent at
    # env step 0); DQN, R2D1 and Reactor hand them on as sampled.
    beta = cfg.importance_exponent if agent.parts.replay.step is not None else 1.0
    np.testing.assert_allclose(got, want**beta, rtol=1e-5)
    assert seen and set(seen) == {DATA}  # the one sampling call, given the mesh axis
