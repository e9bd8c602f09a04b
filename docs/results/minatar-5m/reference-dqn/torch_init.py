"""Freeway diagnostic: our DQN with PyTorch's default initialisation instead of ours.

The MinAtar paper's script builds its network from `torch.nn.Conv2d` and `torch.nn.Linear`
with their default initialisation; ours draws orthogonal kernels (gain sqrt(2) in the torso,
1 on the Q head) and zero biases. This runs `experiments.train` with every layer of the DQN
network drawn as torch's `reset_parameters` draws it: kaiming_uniform(a=sqrt(5)) for the
weights, which is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias from the same interval
(fan_in: the product of a flax kernel's dimensions but the last, [kh, kw, c_in] or [in]).
Everything else is the command line's. Only for this diagnostic: nothing in the run folder
records the change, so resuming or evaluating it rebuilds our usual network.

    python docs/results/minatar-5m/reference-dqn/torch_init.py --agent dqn \\
        --preset dqn-minatar --env gymnax/Freeway-MinAtar-full --seed 3 ...
"""

from __future__ import annotations

import math
import sys

import jax

from agents.dqn.learner import DQNLearner
from experiments import train


def torch_default(params, key):
    """`params` with every {kernel, bias} layer redrawn as torch's default would draw it."""
    if isinstance(params, dict) and "kernel" in params:
        kernel = params["kernel"]
        bound = 1.0 / math.sqrt(math.prod(kernel.shape[:-1]))
        k_kernel, k_bias = jax.random.split(key)
        out = dict(params)
        out["kernel"] = jax.random.uniform(k_kernel, kernel.shape, kernel.dtype, -bound, bound)
        if "bias" in params:
            bias = params["bias"]
            out["bias"] = jax.random.uniform(k_bias, bias.shape, bias.dtype, -bound, bound)
        return out
    if isinstance(params, dict):
        names = sorted(params)
        keys = jax.random.split(key, len(names))
        return {n: torch_default(params[n], k) for n, k in zip(names, keys, strict=True)}
    return params


_ours = DQNLearner.init_params


def init_params(self, key, sample_obs):
    params = _ours(self, key, sample_obs)
    return torch_default(params, jax.random.fold_in(key, 0x7041))


if __name__ == "__main__":
    DQNLearner.init_params = init_params
    train.main(sys.argv[1:])
