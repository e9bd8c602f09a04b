"""Training throughput against envpool's raw speed (and a compute ceiling where the agent
has a cost model), for any registered agent.

`python -m benchmarks.bench_throughput [--agent acer] [--env Pong-v5] [--compare FIELD=A,B]`
measures, in one process and on the same machine:

1. envpool's raw random-action steps/s (host `step` loop; same num_envs and threads);
2. the agent's training-loop steps/s and learner updates/s (the runner's `TrainLoop`,
   steady state; compile timed apart) for each value of one config field, in alternating
   rounds so that machine noise hits every variant alike; the median over rounds is
   reported, and ratios between variants are medians of per-round ratios;
3. if the agent has a cost model (`benchmarks.costs.COST_MODELS`), the compute-bound
   ceiling: env
   steps/s if the only costs were envpool's raw step plus the network passes the agent needs
   per env step, each timed alone at its best batch size.

The default comparison is `benchmarks.costs.COMPARE`'s (ACER: replay ratio 0 vs 4; Reactor:
acting and learning decoupled in threads vs lock-step). Timings on shared 2-core CPUs move
10-25% from run to run: compare the ratios, which are measured side by side.
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

from agents.core.config import check, from_dict
from benchmarks.costs import COMPARE, COST_MODELS, NetworkCost
from engine.args import check_env, check_output_file, cli, lookup
from engine.common import bench_preset, make_agent, save_results
from engine.runner import TrainLoop
from envs import make_env


@dataclass(frozen=True)
class BenchArgs:
    """Measure an agent's training steps/s against envpool's raw steps/s."""

    agent: str | None = None
    """Agent to benchmark (default: the agent --preset belongs to, else acer)."""
    env: str = "Pong-v5"
    """Environment id."""
    preset: str | None = None
    """Preset of the training loop (default: <agent>-atari if it exists, else the agent's
    default preset)."""
    num_envs: int | None = None
    """Parallel envs, the same for the raw envpool measurement (default: the preset's)."""
    num_threads: int = 0
    """envpool threads (0: envpool's default)."""
    compare: str | None = None
    """FIELD=V1,V2,...: a config field and the values to time side by side (default: the
    agent's entry in benchmarks.costs.COMPARE)."""
    iterations: int = 12
    """Timed training iterations per variant and round."""
    warmup: int = 3
    """Untimed iterations per variant first (fill the replay so learner updates run)."""
    rounds: int = 3
    """Alternating rounds (median reported)."""
    raw_steps: int = 3000
    """Batched envpool steps timed for the raw speed."""
    batch_sizes: tuple[int, ...] = (16, 32, 64, 128)
    """Batch sizes tried for the network-pass timings of the cost model."""
    json_out: str | None = None
    """Optional JSON file for all numbers."""

    def __post_init__(self):
        for name in ("iterations", "rounds", "raw_steps"):
            check(getattr(self, name) >= 1, name, getattr(self, name), ">= 1")
        check(self.warmup >= 0, "warmup", self.warmup, ">= 0")
        check(self.num_envs is None or self.num_envs >= 1, "num_envs", self.num_envs, ">= 1")
        check(self.num_threads >= 0, "num_threads", self.num_threads, ">= 0")
        sizes = self.batch_sizes
        check(bool(sizes) and min(sizes) >= 1, "batch_sizes", sizes, "one or more sizes >= 1")
        check(self.agent is None or self.agent.strip() != "", "agent", self.agent, "non-empty")
        check(self.env.strip() != "", "env", self.env, "non-empty")
        check_output_file("json_out", self.json_out)
        check_env(self.env)


def raw_env_sps(env_id: str, num_envs: int, num_threads: int, steps: int) -> float:
    env = make_env(env_id, num_envs, 0, num_threads=num_threads)
    rng = np.random.default_rng(0)
    env.reset()
    if env.spec.discrete:
        actions = rng.integers(0, env.spec.num_actions, size=(steps, num_envs)).astype(np.int32)
    else:
        low, high = env.spec.action_low, env.spec.action_high
        actions = rng.uniform(low, high, size=(steps, num_envs, *env.spec.action_shape))
        actions = actions.astype(np.float32)
    for a in actions[:50]:
        env.step(a)
    t0 = time.perf_counter()
    for a in actions:
        env.step(a)
    dt = time.perf_counter() - t0
    env.close()
    return steps * num_envs / dt


def best_per_sample(make, batch_sizes, reps=5) -> tuple[float, int]:
    """Seconds per sample of `fn(*args)` (`fn, args = make(batch)`) at the best batch size."""
    best = (float("inf"), 0)
    for b in batch_sizes:
        fn, args = make(b)
        jax.block_until_ready(fn(*args))
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - t0)
        best = min(best, (float(np.median(times)) / b, b))
    return best


def parse_compare(spec, text: str) -> tuple[str, list]:
    """`FIELD=V1,V2` -> (field, [values typed like the field])."""
    field, _, values = text.partition("=")
    names = {f.name for f in dataclasses.fields(spec.config_cls)}
    if field not in names or not values:
        raise ValueError(
            f"--compare must be FIELD=V1,V2,... with FIELD a --agent {spec.name} config field "
            f"({', '.join(sorted(names))}), got {text!r}"
        )
    typed = []
    for v in values.split(","):
        try:
            raw = json.loads(v.lower() if v.lower() in ("true", "false") else v)
        except json.JSONDecodeError:
            raise ValueError(f"--compare {text!r}: {v!r} is not a number or true/false") from None
        typed.append(getattr(from_dict(spec.config_cls, {field: raw}, "--compare"), field))
    if len(set(typed)) < len(typed):
        raise ValueError(f"--compare {text!r} repeats a value")
    return field, typed


def overrides(args: BenchArgs, spec, field: str, value) -> dict:
    """Config changes for one variant. Steady-state training is measured, so a learning
    warm-up threshold (a `start_train_at` field) is zeroed: learning runs from the start."""
    changes = {field: value, **({"num_envs": args.num_envs} if args.num_envs else {})}
    if "start_train_at" in {f.name for f in dataclasses.fields(spec.config_cls)}:
        changes.setdefault("start_train_at", 0)
    return changes


def build(args: BenchArgs, spec, preset: str, field: str, value):
    agent = make_agent(
        spec.name, args.env, preset=preset, num_threads=args.num_threads,
        **overrides(args, spec, field, value),
    )  # fmt: skip
    state = agent.init(jax.random.PRNGKey(0))
    compile_s = agent.compile(state)
    return TrainLoop(agent, state), compile_s


def timed_pass(cost: NetworkCost):
    """`make(batch) -> (jitted fn, args)` of one part of a cost model: the forward pass
    `cost.apply(params, *inputs)`, or with an optimizer a training step: the gradient of the
    sum of its outputs' mean squares with respect to `params`, then the optimizer's update
    (the network's forward+backward cost, whatever the agent's loss)."""
    if cost.optimizer is None:
        fn = jax.jit(cost.apply)
        return lambda b: (fn, (cost.params, *cost.inputs(b)))
    opt = cost.optimizer

    def train_step(params, opt_state, *inputs):
        def loss(p):
            out = jax.tree.leaves(cost.apply(p, *inputs))
            return sum(jnp.mean(jnp.square(x.astype(jnp.float32))) for x in out)

        updates, opt_state = opt.update(jax.grad(loss)(params), opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    fn, opt_state = jax.jit(train_step), opt.init(cost.params)
    return lambda b: (fn, (cost.params, opt_state, *cost.inputs(b)))


def ceiling(costs: dict, raw: float, batch_sizes) -> dict | None:
    """The compute-bound ceiling from an agent's cost model (`costs`: name -> NetworkCost),
    or None without one."""
    if not costs:
        return None
    seconds, parts = 1.0 / raw, {}
    for name, cost in costs.items():
        per_sample, batch = best_per_sample(timed_pass(cost), batch_sizes)
        parts[name] = {
            "s_per_sample": per_sample, "batch": batch, "passes_per_step": cost.passes
        }  # fmt: skip
        seconds += cost.passes * per_sample
    return {"ceiling_sps": 1.0 / seconds, "parts": parts}


def main(argv: list[str] | None = None) -> dict:
    args = cli(BenchArgs, argv, prog="python -m benchmarks.bench_throughput")
    try:
        spec = lookup(args.agent, args.preset)  # checks --preset against the agent
        preset = bench_preset(spec) if args.preset is None else args.preset
        field, values = parse_compare(
            spec,
            COMPARE.get(spec.name, "") if args.compare is None else args.compare,
        )
        for value in values:  # every variant's config, before anything is built
            try:
                spec.make_config(preset, **overrides(args, spec, field, value))
            except ValueError as err:
                raise ValueError(f"with --compare {field}={value}: {err}") from None
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    loops = {}
    try:
        for value in values:
            try:
                loops[value] = build(args, spec, preset, field, value)
            except ValueError as err:  # the env id, or the config against the env
                raise SystemExit(f"error: {err}") from None
        num_envs = next(iter(loops.values()))[0].agent.config.num_envs
        print(
            f"jax {jax.__version__} on {jax.devices()[0].platform}: {spec.name} ({preset}) on "
            f"{args.env}, {num_envs} envs, comparing {field} = {values}"
        )
        raw = raw_env_sps(args.env, num_envs, args.num_threads, args.raw_steps)
        print(f"envpool raw random-action steps/s: {raw:,.0f}")
        for loop, _ in loops.values():
            loop.timed(args.warmup)
        waits = {v: dict(lp.agent.wait_s) for v, (lp, _) in loops.items()}
        rounds = {v: [] for v in values}
        for r in range(args.rounds):
            for value in values if r % 2 == 0 else values[::-1]:
                rounds[value].append(loops[value][0].timed(args.iterations))
        rows = []
        for value in values:
            loop, compile_s = loops[value]
            secs = [t for t, _, _ in rounds[value]]
            sps = [s / t for t, s, _ in rounds[value]]
            row = {
                field: value,
                "sps": float(np.median(sps)),
                "sps_rounds": sps,
                "updates_per_s": float(np.median([u / t for t, _, u in rounds[value]])),
                "env_steps_per_update": sum(s for _, s, _ in rounds[value])
                / max(sum(u for _, _, u in rounds[value]), 1),
                "compile_s": compile_s,
                "train_over_raw": float(np.median(sps)) / raw,
            }
            wait = loop.agent.wait_s
            for k, v in wait.items():
                row[f"{k}_fraction"] = (v - waits[value].get(k, 0.0)) / sum(secs)
            rows.append(row)
            print(
                f"{field}={value}: {row['sps']:,.1f} env steps/s, {row['updates_per_s']:.2f} "
                f"updates/s ({row['env_steps_per_update']:.1f} env steps per update), "
                f"train/raw {row['train_over_raw']:.3f}, compile {compile_s:.1f} s "
                f"[median of {args.rounds} rounds]"
                + "".join(
                    f", {k} {100 * v:.1f}%" for k, v in row.items() if k.endswith("_fraction")
                )
            )
        base = rounds[values[0]]
        for value, row in zip(values[1:], rows[1:], strict=True):
            ratios = [
                (s / t) / (s0 / t0)
                for (t, s, _), (t0, s0, _) in zip(rounds[value], base, strict=True)
            ]
            row["ratio_to_first"] = float(np.median(ratios))
            print(
                f"{field}={value} / {field}={values[0]}: {row['ratio_to_first']:.2f}x "
                f"(per round {', '.join(f'{x:.2f}' for x in ratios)})"
            )
        model_of = COST_MODELS.get(spec.name)
        costs = model_of(loops[values[-1]][0].agent) if model_of else {}
        model = ceiling(costs, raw, args.batch_sizes)
        if model is not None:
            # the cost model describes the agent as configured (the last variant)
            c = model["ceiling_sps"]
            for name, part in model["parts"].items():
                print(
                    f"cost model: {name} {part['s_per_sample'] * 1e6:.0f} µs/sample (batch "
                    f"{part['batch']}) x {part['passes_per_step']:.2f} per env step"
                )
            print(
                f"compute-bound ceiling ({field}={values[-1]}): {c:,.1f} env steps/s; "
                f"train/ceiling {rows[-1]['sps'] / c:.2f}"
            )
            rows[-1]["ceiling_sps"] = c
            rows[-1]["train_over_ceiling"] = rows[-1]["sps"] / c
    finally:
        for loop, _ in loops.values():
            loop.agent.close()
    out = {
        "agent": spec.name, "preset": preset, "env": args.env, "num_envs": num_envs,
        "raw_env_sps": raw, "compare": field, "rows": rows,
        "cost_model": None if model is None else model["parts"],
    }  # fmt: skip
    save_results(args.json_out, out)
    return out


if __name__ == "__main__":
    main()
