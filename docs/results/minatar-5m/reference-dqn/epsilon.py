"""How much of the gap between training returns is the action set's ε-exploration?

    PYTHONPATH=. python docs/results/minatar-5m/reference-dqn/epsilon.py RUN... [--episodes N]
        [--env MinAtar/Breakout-v1]

Plays each `dqn-minatar` run's checkpoint (the latest, or the one at env step S) on gymnax's
Breakout, greedy but for an ε = 0.1 chance per step of a random action (training's behaviour
policy), two ways:
- `minimal`: the random action uniform over our 3 actions (no-op, left, right), as in training;
- `full`: uniform over the 6 actions of the paper's script (kenjyoung/MinAtar's full set: no-op,
  left, up, right, down, fire), of which Breakout reads only left and right: a random action
  there is a no-op with probability 4/6 and moves the paddle with 1/3, where ours moves it with
  2/3.
and with ε = 0 (the greedy policy). Same episodes' seeds for the three: their differences are
the policy's only. `--env MinAtar/Breakout-v1` plays the same policies on the `minatar`
package's Breakout instead (the paper's env, through gymnasium, minimal action set in the same
order, sticky actions 0.1): what the port's differences do to one policy's returns.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from agents.core.registry import get_agent
from engine.common import load_run, restore_learner
from engine.driver import agent_class
from engine.evaluation import evaluate
from envs import make_eval_env

EPSILON = 0.1
# gymnax's Breakout-MinAtar minimal set, in our action indices: 0 no-op, 1 left, 2 right.
# A uniform draw over the full set of 6 lands on left or right with 1/6 each, else a no-op.
RANDOM = {"minimal": np.array([1, 1, 1]) / 3, "full": np.array([4, 1, 1]) / 6}


def eps_act(act, epsilon: float, probs: np.ndarray):
    def act_(params, obs, first, core, key):
        k_act, k_explore, k_random = jax.random.split(key, 3)
        action, core = act(params, obs, first, core, k_act)
        explore = jax.random.uniform(k_explore, action.shape) < epsilon
        random = jax.random.choice(k_random, len(probs), action.shape, p=jnp.asarray(probs))
        return jnp.where(explore, random.astype(action.dtype), action), core

    return jax.jit(act_)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--step", type=int, default=None)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--env", default=None, help="play here (default: the run's env)")
    ns = parser.parse_args()
    print("| run | env | step | greedy | ε = 0.1 over 3 actions | ε = 0.1 over 6 (the script's) |")
    print("|---|---|---|---|---|---|")
    for run_dir in ns.runs:
        train = load_run(run_dir)
        if not train.run.env.startswith("gymnax/Breakout"):
            raise SystemExit(f"error: {run_dir} is not a Breakout run ({train.run.env})")
        env_id = ns.env or train.run.env
        if "Breakout" not in env_id:
            raise SystemExit(f"error: --env {env_id} is not Breakout")
        env = make_eval_env(env_id, 16, ns.seed)
        acting = agent_class(get_agent(train.run.agent)).acting(train.config, env, seed=ns.seed)
        learner, _, step = restore_learner(acting.init_learner, run_dir, ns.step)
        greedy = acting.act(True)
        cells = []
        for epsilon, probs in ((0.0, RANDOM["minimal"]), (EPSILON, RANDOM["minimal"]),
                               (EPSILON, RANDOM["full"])):  # fmt: skip
            env = make_eval_env(env_id, 16, ns.seed)  # the same episodes each time
            returns, _ = evaluate(
                eps_act(greedy, epsilon, probs), acting.params(learner), env, ns.episodes,
                jax.random.PRNGKey(ns.seed), acting.initial_core(16),
            )  # fmt: skip
            se = returns.std(ddof=1) / np.sqrt(len(returns))
            cells.append(f"{returns.mean():.1f} ± {se:.1f}")
        print(f"| {run_dir} | {env_id} | {step:,} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
