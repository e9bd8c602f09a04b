"""The A2C agent: PPO's agent and learner (agents/ppo/) with A2C's config and RMSprop."""

from __future__ import annotations

from typing import ClassVar

import optax

from agents.ppo.agent import PPOAgent
from agents.ppo.learner import METRICS


class A2CAgent(PPOAgent):
    name = "a2c"
    metric_names = tuple(m for m in METRICS if m != "clip_fraction")
    # A2C has no ratio clipping to vary.
    tunable: ClassVar[dict[str, tuple[float, float]]] = {
        k: v for k, v in PPOAgent.tunable.items() if k != "clip_eps"
    }

    def make_optimizer(self, learning_rate) -> optax.GradientTransformation:
        """RMSprop with ε outside the square root (PyTorch, torch-ac) and the mean square
        started as --rmsprop-start says."""
        cfg = self.config
        return optax.rmsprop(
            learning_rate, decay=cfg.rmsprop_alpha, eps=cfg.rmsprop_eps, eps_in_sqrt=False,
            initial_scale=1.0 if cfg.rmsprop_start == "one" else 0.0,
            bias_correction=cfg.rmsprop_start == "debiased",
        )  # fmt: skip
