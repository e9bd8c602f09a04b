"""Population throughput: `python -m benchmarks.bench_population [--num-seeds 8] [...]`.

Trains P seeds of an agent two ways in this process, each from scratch with compilation
included: as one population (`--num-seeds P`, engine/population.py) and as P single-seed
runs one after another. Both run the runner's loops (one host sync per iteration) for the
same env steps per member. Prints env steps/s over all members of each and their ratio
(population ÷ sequential): the acceptance figure of issue 16 (goal ≥ 4 for ACER on
CartPole-v1 with P = 8 on the 2-core CPU).

The sequential runs share this process, so they skip P − 1 interpreter starts and imports a
real sweep would pay; the ratio is, if anything, an underestimate. `--processes` also times
the comparison as a user runs it: one `python -m experiments.train --num-seeds P` process
against P `python -m experiments.train --seed s` processes, one after another, each timed
from launch to exit (interpreter start, imports, run folder, metrics and one final checkpoint
included; evaluation off).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from agents.core.config import check
from engine.args import check_env, check_output_file, cli, lookup
from engine.common import cold_process_env, make_agent, make_population, save_results
from engine.runner import Counters, PopulationLoop, TrainLoop


@dataclass(frozen=True)
class PopulationBenchArgs:
    """Compare a population of P seeds with P sequential single-seed runs."""

    agent: str = "acer"
    """Agent to measure (one that supports --num-seeds)."""
    env: str = "CartPole-v1"
    """Environment id."""
    preset: str | None = None
    """Preset (default: the agent's default preset)."""
    num_seeds: int = 8
    """Population size P (seeds seed .. seed + P - 1)."""
    seed: int = 0
    """First seed."""
    steps_per_member: int = 10_000
    """Env steps each member (and each single run) trains for, rounded up to iterations."""
    processes: bool = False
    """Also compare as command lines: one `experiments.train --num-seeds P` process against
    P single-seed `experiments.train` processes (module docstring)."""
    json_out: str | None = None
    """Optional JSON file for the numbers."""

    def __post_init__(self):
        check(self.num_seeds >= 1, "num_seeds", self.num_seeds, ">= 1")
        check(self.steps_per_member >= 1, "steps_per_member", self.steps_per_member, ">= 1")
        lookup(self.agent, self.preset)
        check_env(self.env)
        check_output_file("json_out", self.json_out)


def _drive(loop, agent, iterations: int) -> None:
    """`iterations` iterations, as many per host sync as the agent runs (the runner's steady
    state, engine.runner.SyncPace)."""
    done = 0
    while done < iterations:
        count = min(agent.max_chunk, iterations - done)
        loop.step(count=count)
        done += count


def run_population(args: PopulationBenchArgs) -> dict:
    t0 = time.perf_counter()
    seeds = range(args.seed, args.seed + args.num_seeds)
    pop = make_population(args.agent, args.env, args.num_seeds, preset=args.preset, seed=args.seed)
    state = pop.init(jnp.stack([jax.random.PRNGKey(s) for s in seeds]))
    compile_s = pop.compile(state)
    loop = PopulationLoop(pop, state, [Counters() for _ in seeds])
    _drive(loop, pop, -(-args.steps_per_member // pop.member_steps_per_iteration))
    jax.block_until_ready(loop.state)
    wall = time.perf_counter() - t0
    steps = loop.counters.env_steps * pop.size
    pop.close()
    return {"env_steps": steps, "wall_s": wall, "compile_s": compile_s, "sps": steps / wall}


def run_sequential(args: PopulationBenchArgs) -> dict:
    t0, steps, compile_s = time.perf_counter(), 0, 0.0
    for s in range(args.seed, args.seed + args.num_seeds):
        agent = make_agent(args.agent, args.env, preset=args.preset, seed=s)
        # op by op: after the first run the ops are compiled, the sequential runs' fastest way
        state = agent.init(jax.random.PRNGKey(s))
        compile_s += agent.compile(state)
        loop = TrainLoop(agent, state)
        _drive(loop, agent, -(-args.steps_per_member // agent.steps_per_iteration))
        jax.block_until_ready(loop.state)
        steps += loop.counters.env_steps
        agent.close()
    wall = time.perf_counter() - t0
    return {"env_steps": steps, "wall_s": wall, "compile_s": compile_s, "sps": steps / wall}


def _train_process(args: PopulationBenchArgs, run_dir: str, steps: int, *extra: str) -> float:
    """Wall seconds of one `experiments.train` process, launch to exit."""
    cmd = [
        sys.executable, "-m", "experiments.train", "--agent", args.agent, "--env", args.env,
        "--total-steps", str(steps), "--checkpoint-every", str(steps), "--eval-episodes", "0",
        "--no-progress", "--run-dir", run_dir, *extra,
    ]  # fmt: skip
    if args.preset:
        cmd += ["--preset", args.preset]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=cold_process_env())
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed:\n{proc.stderr.strip()}")
    return wall


def run_processes(args: PopulationBenchArgs, steps: int) -> dict:
    """The population and the sequential runs as `experiments.train` processes."""
    seeds = range(args.seed, args.seed + args.num_seeds)
    with tempfile.TemporaryDirectory() as tmp:
        pop = _train_process(
            args, f"{tmp}/pop", steps, "--seed", str(args.seed), "--num-seeds", str(args.num_seeds)
        )
        seq = sum(_train_process(args, f"{tmp}/s{s}", steps, "--seed", str(s)) for s in seeds)
    total = steps * args.num_seeds
    return {
        "env_steps": total,
        "population_wall_s": pop,
        "sequential_wall_s": seq,
        "population_sps": total / pop,
        "sequential_sps": total / seq,
        "ratio": seq / pop,
    }


def main(argv: list[str] | None = None) -> dict:
    args = cli(PopulationBenchArgs, argv, description=__doc__.split("\n\n")[0])
    pop = run_population(args)
    seq = run_sequential(args)
    ratio = pop["sps"] / seq["sps"]
    print(f"{args.agent} on {args.env}, P = {args.num_seeds}, {args.steps_per_member} steps each")
    for name, r in (("population", pop), ("sequential", seq)):
        print(
            f"  {name:>10}: {r['env_steps']} env steps in {r['wall_s']:.1f} s "
            f"(compile {r['compile_s']:.1f} s): {r['sps']:.0f} env steps/s over all members"
        )
    print(f"  ratio population / sequential: {ratio:.2f}")
    results = {"args": vars(args), "population": pop, "sequential": seq, "ratio": ratio}
    if args.processes:
        procs = run_processes(args, pop["env_steps"] // args.num_seeds)
        print(f"as processes ({procs['env_steps'] // args.num_seeds} steps each, launch to exit)")
        for name in ("population", "sequential"):
            print(
                f"  {name:>10}: {procs[name + '_wall_s']:.1f} s: "
                f"{procs[name + '_sps']:.0f} env steps/s over all members"
            )
        print(f"  ratio population / sequential: {procs['ratio']:.2f}")
        results["processes"] = procs
    save_results(args.json_out, results)
    return results


if __name__ == "__main__":
    main()
