"""Where our PPO's time goes against the single-file PPO (experiments/fused_ppo_peer.py) on
gymnax CartPole-v1, with bench_gymnax's settings (4 envs × 128 steps, 4 epochs × 4
minibatches, MLP 64-64):

    PYTHONPATH=. python docs/results/ppo-gymnax-gap/measure.py [ROUNDS]

Four programs, compiled once each and alternated round by round in one process (median ms
per iteration of 512 env steps, host syncs excluded): ours as `experiments.train` builds it
(the chunk program of 200 iterations), ours with `absorb` replaced by the identity (the
rollout alone: acting, the env step, the trace), the peer's whole run of 200 iterations, and
the peer with 0 epochs (its rollout and GAE). Then the instructions of each one's innermost
loop body (one minibatch update) in the optimised HLO: on XLA:CPU, at this size, each
instruction is a separately dispatched kernel, and their count sets the update's cost.
"""

import collections
import re
import statistics
import sys
import time

import jax

from benchmarks.fused_ppo_peer import make_train
from engine.common import build_agent, preset_args
from envs import make_env, run_env_seed

ITERATIONS = 200
FLAGS = dict(num_envs=4, trace_len=128, epochs=4, num_minibatches=4, hidden=(64, 64))


def ours(rollout_only: bool):
    """A callable running ITERATIONS iterations of our PPO, and its chunk program."""
    args = preset_args("ppo", "gymnax/CartPole-v1", None, 0, dict(FLAGS))
    env = make_env("gymnax/CartPole-v1", 4, run_env_seed(0, 4))
    agent = build_agent(args, env)
    if rollout_only:  # the learner never runs: no update, no metrics
        agent.absorb = lambda learner, replay, traj, axis_name=None, hparams=None: (
            learner, replay, [])  # fmt: skip
    box = {"state": agent.init(jax.random.PRNGKey(0), jit=True), "it": 0}
    agent.compile(box["state"])

    def run():
        it = box["it"]
        box["state"], _ = agent.train_chunk(box["state"], it, it * 512, ITERATIONS)
        jax.block_until_ready(box["state"])
        box["it"] = it + ITERATIONS

    def hlo() -> str:  # the chunk program's optimised HLO
        todos = jax.ShapeDtypeStruct((agent._chunk.length,), "int32")
        count = jax.ShapeDtypeStruct((), "int32")
        return agent._chunk._jitted.lower(box["state"], todos, count).compile().as_text()

    run()  # builds and compiles the chunk program
    return run, hlo


def peer(epochs: int):
    train, _ = make_train("CartPole-v1", 512 * ITERATIONS, epochs=epochs)
    key = jax.random.PRNGKey(0)
    compiled = jax.jit(train).lower(key).compile()
    return lambda: jax.block_until_ready(compiled(key)), compiled.as_text


def innermost_body(hlo: str) -> collections.Counter:
    """Instruction kinds of the largest while body holding a dot (the minibatch update)."""
    comps, cur = {}, None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head and not line.startswith(" "):
            cur = head.group(1)
            comps[cur] = []
        elif line.startswith("}"):
            cur = None
        elif cur and "=" in line:
            comps[cur].append(line.strip())
    bodies = {m.group(1) for lines in comps.values() for x in lines
              if (m := re.search(r"while\(.*body=%?([\w.\-]+)", x))}  # fmt: skip
    with_dot = [b for b in bodies if any(" dot(" in x for x in comps.get(b, []))]
    body = max(with_dot, key=lambda b: len(comps[b]))
    kinds = (re.search(r"= \S+ ([\w\-]+)\(", x) for x in comps[body])
    return collections.Counter(k.group(1) if k else "?" for k in kinds)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    built = {
        "ours": ours(False),
        "ours, rollout only": ours(True),
        "peer": peer(4),
        "peer, 0 epochs": peer(0),
    }
    times = {name: [] for name in built}
    for _ in range(rounds):
        for name, (run, _) in built.items():
            t = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - t) / ITERATIONS * 1e3)
    med = {name: statistics.median(v) for name, v in times.items()}
    for name, values in times.items():
        rounds_ms = " ".join(f"{v:.3f}" for v in values)
        print(f"{name:20s} ms/iteration {rounds_ms}; median {med[name]:.3f}"
              f" ({512 / med[name] * 1e3:,.0f} env steps/s)")  # fmt: skip
    ours_update = med["ours"] - med["ours, rollout only"]
    peer_update = med["peer"] - med["peer, 0 epochs"]
    print(f"update phase (whole minus rollout): ours {ours_update:.3f} ms, peer "
          f"{peer_update:.3f} ms, ratio {ours_update / peer_update:.2f}")  # fmt: skip
    for name in ("ours", "peer"):
        kinds = innermost_body(built[name][1]())
        top = ", ".join(f"{k} {n}" for k, n in kinds.most_common(5))
        print(f"{name}: one minibatch update = {sum(kinds.values())} HLO instructions ({top})")


if __name__ == "__main__":
    main()
