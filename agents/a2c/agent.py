"""A2C as pure functions: PPO's `build` (agents/ppo/agent.py) with A2C's config, RMSprop and
metrics (no ratio clipping, so no clip fraction)."""

from __future__ import annotations

import functools

import optax

from agents.core.parts import AgentParts
from agents.ppo.agent import build
from agents.ppo.learner import METRICS

A2C_METRICS = tuple(m for m in METRICS if m != "clip_fraction")


def rmsprop(config, lr) -> optax.GradientTransformation:
    """RMSprop with ε outside the square root (PyTorch, torch-ac) and the mean square
    started as --rmsprop-start says."""
    return optax.rmsprop(
        lr, decay=config.rmsprop_alpha, eps=config.rmsprop_eps, eps_in_sqrt=False,
        initial_scale=1.0 if config.rmsprop_start == "one" else 0.0,
        bias_correction=config.rmsprop_start == "debiased",
    )  # fmt: skip


def make(config, spec) -> AgentParts:
    """A2C's parts for `config` (agents/a2c/config.py)."""
    return build(config, spec, functools.partial(rmsprop, config), A2C_METRICS)
