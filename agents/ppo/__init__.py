"""PPO (Schulman et al. 2017): config, learner and agent; registered as `--agent ppo`. The
learner (agents/ppo/learner.py) is shared with A2C (agents/a2c/)."""

from agents.core.registry import AgentSpec
from agents.ppo.agent import PPOAgent
from agents.ppo.config import PRESETS, OnPolicyConfig, PPOConfig

DESCRIPTION = "PPO: clipped surrogate, GAE, epochs x minibatches; discrete or Gaussian"
SPEC = AgentSpec(
    "ppo", PPOConfig, PPOAgent, PRESETS, "ppo-classic", DESCRIPTION, dict_obs=True,
)  # fmt: skip

__all__ = ["SPEC", "OnPolicyConfig", "PPOAgent", "PPOConfig"]
