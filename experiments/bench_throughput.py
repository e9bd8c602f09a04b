"""Training throughput against envpool's raw speed and the compute-bound ceiling.

`python -m experiments.bench_throughput [--env Pong-v5] [--num-envs 16]` measures, in one
process and on the same machine:

1. envpool's raw random-action steps/s (host `step` loop; same num_envs and threads);
2. ACER's training-loop steps/s at replay ratio 0 and at 4 (steady state; compile timed
   apart);
3. the compute-bound ceiling: env steps/s if the only costs were envpool's raw step plus the
   network passes ACER needs per env step, each timed alone at its best batch size. Per env
   step ACER runs (1 + replay_ratio)·(T+1)/T forward+backward passes (one on-policy and
   replay_ratio replayed traces of T+1 observations per T steps), as many forward passes of
   the averaged network (trust region), and one acting forward pass.

It prints the ratios training/raw and training/ceiling.

`--agent reactor` instead times Reactor's training loop (preset reactor-atari) with acting
and learning decoupled in threads and in lock-step, in alternating rounds, and prints the
median ratio and the share of time the decoupled learner waited for its actor.

Timings on shared 2-core CPUs move 10–25% from run to run: compare the ratios, which are
measured side by side.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro

from agents.acer.agent import ACERAgent
from agents.reactor.agent import ReactorAgent
from envs import make_env
from experiments.args import PRESETS, TrainArgs


@dataclass(frozen=True)
class BenchArgs:
    """Measure ACER's training steps/s against envpool's raw steps/s and the ceiling."""

    agent: str = "acer"
    """Agent to benchmark: acer (training vs raw vs ceiling) or reactor (decoupled vs
    lock-step acting and learning, same preset)."""
    env: str = "Pong-v5"
    """Environment id."""
    preset: str | None = None
    """Hyper-parameter preset of the training loop (default: <agent>-atari)."""
    num_envs: int | None = None
    """Parallel envs, the same for the raw envpool measurement (default: the preset's)."""
    num_threads: int = 0
    """envpool threads (0: envpool's default)."""
    replay_ratios: tuple[float, ...] = (0.0, 4.0)
    """Replay ratios of the training-loop measurements."""
    iterations: int = 12
    """Timed training iterations per replay ratio, or per Reactor mode and round (after 3
    warm-up iterations)."""
    rounds: int = 3
    """Reactor: alternating rounds of decoupled and lock-step timings (median reported)."""
    raw_steps: int = 3000
    """Batched envpool steps timed for the raw speed."""
    batch_sizes: tuple[int, ...] = (16, 32, 64, 128)
    """Batch sizes (observations) tried for the network-pass timings."""
    json_out: str | None = None
    """Optional JSON file for all numbers."""


def preset_args(preset: str) -> TrainArgs:
    """The training args of a preset."""
    return dataclasses.replace(TrainArgs(), **PRESETS[preset])


def raw_env_sps(env_id: str, num_envs: int, num_threads: int, steps: int) -> float:
    env = make_env(env_id, num_envs, 0, num_threads=num_threads)
    rng = np.random.default_rng(0)
    n = env.spec.num_actions
    env.reset()
    actions = rng.integers(0, n, size=(steps, num_envs)).astype(np.int32)
    for a in actions[:50]:
        env.step(a)
    t0 = time.perf_counter()
    for a in actions:
        env.step(a)
    dt = time.perf_counter() - t0
    env.close()
    return steps * num_envs / dt


def _best_per_sample(fn_for_batch, batch_sizes, reps=5) -> tuple[float, int]:
    """Seconds per sample at the best batch size, and that batch size."""
    best = (float("inf"), 0)
    for b in batch_sizes:
        fn, args = fn_for_batch(b)
        jax.block_until_ready(fn(*args))
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - t0)
        best = min(best, (float(np.median(times)) / b, b))
    return best


def network_pass_costs(agent: ACERAgent, batch_sizes) -> dict:
    """Per-sample seconds of a forward pass and of forward+backward+Adam, best batch size."""
    net, spec = agent.network, agent.env.spec
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, *spec.obs_shape), spec.obs_dtype))
    opt = optax.adam(1e-4)
    opt_state = opt.init(params)

    def obs(b):
        return jax.random.randint(jax.random.PRNGKey(b), (b, *spec.obs_shape), 0, 255).astype(
            spec.obs_dtype
        )

    fwd = jax.jit(lambda p, o: net.apply(p, o))

    def train_step(p, s, o):
        def loss(p):
            logits, q = net.apply(p, o)
            return jnp.mean(jax.nn.log_softmax(logits)[:, 0]) + jnp.mean(q**2)

        g = jax.grad(loss)(p)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    train = jax.jit(train_step)
    f, fb = _best_per_sample(lambda b: (fwd, (params, obs(b))), batch_sizes)
    t, tb = _best_per_sample(lambda b: (train, (params, opt_state, obs(b))), batch_sizes)
    return {"forward_s": f, "forward_batch": fb, "train_s": t, "train_batch": tb}


def reactor_modes(args: BenchArgs) -> list[dict]:
    """Reactor steps/s with acting and learning decoupled (threads) and in lock-step.

    Both agents are built and warmed up first; then `rounds` rounds time `iterations`
    iterations of each, alternating which goes first, so machine noise hits both alike. The
    ratio is the median of the per-round ratios.
    """
    base = preset_args(args.preset)
    runs = {}
    try:
        for mode, decoupled in (("decoupled", True), ("lock-step", False)):
            cfg = base.reactor_config().replace(
                num_envs=args.num_envs, decoupled=decoupled, start_train_at=0
            )
            env = make_env(args.env, args.num_envs, 0, num_threads=args.num_threads)
            agent = ReactorAgent(cfg, env, seed=0)
            state = agent.init(jax.random.PRNGKey(0))
            runs[mode] = {"agent": agent, "state": state, "it": 0, "rounds": []}
            runs[mode]["compile_s"] = agent.compile(state)
            runs[mode]["steps"] = cfg.trace_len * cfg.num_envs

        def timed(run, n):
            """(seconds, env steps, learner updates) of n training iterations."""
            agent, steps, updates = run["agent"], run["steps"], 0
            t0 = time.perf_counter()
            for _ in range(n):
                run["state"], out = agent.train_iteration(
                    run["state"], run["it"], run["it"] * steps
                )
                jax.device_get(out)  # the loop's one sync per iteration
                updates += len(out.metrics)
                run["it"] += 1
            return time.perf_counter() - t0, n * steps, updates

        def sps(timing):
            return timing[1] / timing[0]

        for run in runs.values():
            timed(run, 3)  # warm-up: replay has sequences to sample, learning steps run
        ratios, wait0 = [], runs["decoupled"]["agent"].wait_s["learner_waiting_for_actor"]
        for r in range(args.rounds):
            order = ("decoupled", "lock-step") if r % 2 == 0 else ("lock-step", "decoupled")
            for mode in order:
                runs[mode]["rounds"].append(timed(runs[mode], args.iterations))
            ratios.append(
                sps(runs["decoupled"]["rounds"][-1]) / sps(runs["lock-step"]["rounds"][-1])
            )
        waited = runs["decoupled"]["agent"].wait_s["learner_waiting_for_actor"] - wait0
    finally:
        for run in runs.values():
            run["agent"].close()
    rows = []
    for mode, run in runs.items():
        seconds, steps, updates = np.sum(run["rounds"], axis=0).tolist()
        sps_rounds = [sps(t) for t in run["rounds"]]
        row = {
            "mode": mode,
            "sps": float(np.median(sps_rounds)),
            "sps_rounds": sps_rounds,
            "updates_per_s": float(np.median([u / dt for dt, _, u in run["rounds"]])),
            "env_steps_per_update": steps / max(updates, 1),
            "compile_s": run["compile_s"],
            "timed_s": seconds,
        }
        rows.append(row)
        print(
            f"Reactor {mode:>9}: {row['sps']:,.1f} env steps/s, {row['updates_per_s']:.1f} "
            f"updates/s ({row['env_steps_per_update']:.1f} acting steps per learning step), "
            f"compile {run['compile_s']:.1f} s  [median of {args.rounds} rounds]"
        )
    waited_share = waited / rows[0]["timed_s"]
    rows[0]["learner_waiting_for_actor_fraction"] = waited_share
    print(f"decoupled: the learner waited for the actor {100 * waited_share:.1f}% of the time")
    print(
        f"decoupled / lock-step: {np.median(ratios):.2f}x "
        f"(median of per-round ratios {', '.join(f'{x:.2f}' for x in ratios)})"
    )
    rows[0]["ratio_rounds"] = ratios
    return rows


def training_sps(args: BenchArgs, replay_ratio: float) -> dict:
    cfg = (
        preset_args(args.preset)
        .acer_config()
        .replace(num_envs=args.num_envs, replay_ratio=replay_ratio)
    )
    env = make_env(args.env, args.num_envs, 0, num_threads=args.num_threads)
    agent = ACERAgent(cfg, env, seed=0)
    state = agent.init(jax.random.PRNGKey(0))
    compile_s = agent.compile(state)
    steps = cfg.trace_len * cfg.num_envs
    it = 0
    for _ in range(3):  # warm-up: fills the replay so replay updates run
        state, out = agent.train_iteration(state, it, it * steps)
        jax.device_get(out)
        it += 1
    updates, t0 = 0, time.perf_counter()
    for _ in range(args.iterations):
        state, out = agent.train_iteration(state, it, it * steps)
        jax.device_get(out)  # the loop's one sync per iteration
        updates += len(out.metrics)
        it += 1
    dt = time.perf_counter() - t0
    return {
        "replay_ratio": replay_ratio,
        "sps": args.iterations * steps / dt,
        "compile_s": compile_s,
        "updates_per_iteration": updates / args.iterations,
        "agent": agent,
        "config": cfg,
    }


def ceiling_sps(raw_sps: float, costs: dict, cfg, replay_ratio: float) -> float:
    per_trace = (cfg.trace_len + 1) / cfg.trace_len
    n_train = (1 + replay_ratio) * per_trace
    n_fwd = 1 + ((1 + replay_ratio) * per_trace if cfg.trust_region else 0)
    seconds = 1 / raw_sps + n_train * costs["train_s"] + n_fwd * costs["forward_s"]
    return 1 / seconds


def main(argv: list[str] | None = None) -> dict:
    args = tyro.cli(BenchArgs, args=argv)
    if args.agent not in ("acer", "reactor"):
        raise SystemExit(f"error: unknown --agent {args.agent!r} (acer or reactor)")
    preset = args.preset or f"{args.agent}-atari"
    if preset not in PRESETS:
        raise SystemExit(f"error: unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    num_envs = args.num_envs or preset_args(preset).num_envs
    args = dataclasses.replace(args, preset=preset, num_envs=num_envs)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {args.env}, {args.num_envs} envs")
    raw = raw_env_sps(args.env, args.num_envs, args.num_threads, args.raw_steps)
    print(f"envpool raw random-action steps/s: {raw:,.0f}")
    if args.agent == "reactor":
        rows = reactor_modes(args)
        out = {"env": args.env, "num_envs": args.num_envs, "raw_env_sps": raw, "rows": rows}
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(out, f, indent=2)
        return out
    results = []
    for rr in args.replay_ratios:
        r = training_sps(args, rr)
        results.append(r)
        print(
            f"ACER replay ratio {rr:g}: {r['sps']:,.1f} steps/s "
            f"({r['updates_per_iteration']:.2f} updates/iteration), compile {r['compile_s']:.1f} s"
        )
    costs = network_pass_costs(results[0]["agent"], args.batch_sizes)
    print(
        f"network: forward {costs['forward_s'] * 1e6:.0f} µs/sample (batch "
        f"{costs['forward_batch']}), forward+backward+Adam {costs['train_s'] * 1e6:.0f} µs/sample "
        f"(batch {costs['train_batch']})"
    )
    rows = []
    for r in results:
        ceiling = ceiling_sps(raw, costs, r["config"], r["replay_ratio"])
        rows.append(
            {
                "replay_ratio": r["replay_ratio"],
                "train_sps": r["sps"],
                "compile_s": r["compile_s"],
                "raw_env_sps": raw,
                "ceiling_sps": ceiling,
                "train_over_raw": r["sps"] / raw,
                "train_over_ceiling": r["sps"] / ceiling,
            }
        )
    print(f"\n{'replay ratio':>12} {'train sps':>10} {'ceiling':>9} {'/ceiling':>9} {'/raw':>7}")
    for row in rows:
        print(
            f"{row['replay_ratio']:>12g} {row['train_sps']:>10.1f} {row['ceiling_sps']:>9.1f} "
            f"{row['train_over_ceiling']:>9.2f} {row['train_over_raw']:>7.3f}"
        )
    out = {"env": args.env, "num_envs": args.num_envs, "network": costs, "rows": rows}
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
