"""PPO (Schulman et al. 2017): config, learner and agent; registered as `--agent ppo`. The
learner (agents/ppo/learner.py) and the agent's `build` are shared with A2C (agents/a2c/)."""

from agents.core.learning import ACTOR_CRITIC_TUNABLE
from agents.core.registry import AgentSpec
from agents.ppo.agent import make
from agents.ppo.config import PRESETS, OnPolicyConfig, PPOConfig

# What a population may vary per member (`--vary`, `--evolve`): numbers the learner reads.
TUNABLE = {
    **ACTOR_CRITIC_TUNABLE,
    "value_weight": (0.0, 10.0),
    "gae_lambda": (0.0, 1.0),
    "clip_eps": (1e-3, 1.0),
}
DESCRIPTION = "PPO: clipped surrogate, GAE, epochs x minibatches; discrete or Gaussian"
SPEC = AgentSpec(
    "ppo", PPOConfig, make, PRESETS, "ppo-classic", DESCRIPTION, dict_obs=True,
    tunable=TUNABLE, discrete_only=False,
)  # fmt: skip

__all__ = ["SPEC", "OnPolicyConfig", "PPOConfig"]
