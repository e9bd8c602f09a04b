"""A2C configuration and presets: the command line of `--agent a2c`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from agents.core.config import check
from agents.ppo.config import OnPolicyConfig


@dataclass(frozen=True)
class A2CConfig(OnPolicyConfig):
    """A2C: the synchronous advantage actor-critic (Mnih et al. 2016, "Asynchronous Methods
    for Deep Reinforcement Learning", arXiv:1602.01783, as OpenAI baselines and torch-ac run
    it): one gradient step per rollout on −Â·log π + value_weight·½(R − V)² − entropy bonus,
    RMSprop. It is PPO's learner with one epoch, one minibatch and no ratio clipping. A3C's
    asynchronous threads are replaced by synchronous data parallelism over --num-devices
    (gradients averaged with pmean). The defaults are the a2c-classic preset (CartPole-v1)."""

    num_envs: int = 16
    """Parallel environments (envpool batch; over all processes)."""
    trace_len: int = 8
    """Rollout length T: steps per env per update (n in the paper's n-step returns)."""
    lr: float = 7e-3
    """RMSprop learning rate."""
    anneal_steps: int = 300_000
    """Decay the learning rate linearly to 0 over this many env steps (set it to
    --total-steps, as the presets do); 0: constant."""
    gae_lambda: float = 1.0
    """GAE λ; 1 (the default) is the n-step return bootstrapped at the end of the rollout,
    A2C's estimator (baselines). torch-ac uses 0.95."""
    n_step: int = 0
    """n-step returns bootstrapped n steps ahead (or at the rollout's end) instead of GAE;
    0: GAE(--gae-lambda)."""
    entropy_weight: float = 0.01
    """Entropy bonus weight."""
    normalize_advantages: bool = False
    """Normalise advantages to mean 0, std 1 over the rollout (all devices)."""
    rmsprop_alpha: float = 0.99
    """RMSprop decay α (torch-ac's --optim-alpha, baselines' alpha)."""
    rmsprop_eps: float = 1e-8
    """RMSprop ε, added outside the square root as in PyTorch (torch-ac's --optim-eps)."""
    rmsprop_start: Literal["zero", "one", "debiased"] = "debiased"
    """RMSprop's mean square before the first gradient. zero: as PyTorch (torch-ac): the
    first steps are then about lr/√(1−α) = 10·lr per parameter whatever the gradient's size,
    which collapsed the CartPole-v1 policy to one action within five updates on 3 seeds of 10.
    one: as TensorFlow 1's RMSProp (tensorflow/python/training/rmsprop.py), which OpenAI
    baselines' A2C ran: the first hundreds of steps are damped. debiased: from zero, divided
    by 1 − α^t as Adam's bias correction: the first steps are about lr per parameter."""

    ONLY_WITH: ClassVar[dict[str, str]] = {
        **OnPolicyConfig.ONLY_WITH,
        "gae_lambda": "n_step=0",  # n-step returns replace GAE
    }

    def __post_init__(self):
        check(self.n_step >= 0, "n_step", self.n_step, ">= 0")
        check(0.0 <= self.rmsprop_alpha < 1.0, "rmsprop_alpha", self.rmsprop_alpha, "in [0, 1)")
        check(self.rmsprop_eps > 0, "rmsprop_eps", self.rmsprop_eps, "> 0")
        super().__post_init__()


PRESETS: dict[str, dict] = {
    # CartPole-v1 / Acrobot-v1: the config defaults (16 envs x 8 steps, RMSprop lr 7e-3 with
    # Adam's bias correction, annealed to 0 over 300k steps, separate tanh MLPs 64-64), the
    # greedy policy evaluated (as SB3's evaluate_policy, deterministic=True). Tuned here for a
    # 2-core CPU over 40 seeds (docs/results/defaults-10-seeds): 40/40 solved, where the
    # earlier 100k steps with PyTorch's RMSprop start solved 23/30.
    "a2c-classic": {"total_steps": 300_000, "eval_greedy": True},
    # OpenAI baselines a2c on Atari (defaults of baselines/a2c/a2c.py and run_atari): 16 envs
    # x 5 steps, RMSprop lr 7e-4 (α 0.99, ε 1e-5, mean square from 1 as TensorFlow 1's)
    # decayed linearly to 0, entropy 0.01, value 0.5, grad norm 0.5, γ 0.99, n-step returns
    # to the rollout's end (λ = 1), Nature CNN shared by both heads, 10M steps (40M frames).
    "a2c-atari": {
        "env": "Pong-v5",
        "total_steps": 10_000_000,
        "num_envs": 16,
        "trace_len": 5,
        "lr": 7e-4,
        "anneal_steps": 10_000_000,
        "gae_lambda": 1.0,
        "rmsprop_eps": 1e-5,
        "rmsprop_start": "one",
        "entropy_weight": 0.01,
        "value_weight": 0.5,
        "max_grad_norm": 0.5,
        "microbatch_traces": 16,
        "checkpoint_every": 500_000,
        "return_window": 10,
    },
}
