"""DQN and its variants (double, dueling, prioritized, n-step; C51 with --distributional):
config, learner and agent; `--agent dqn`."""

from agents.core.registry import AgentSpec
from agents.dqn.agent import DQNAgent
from agents.dqn.config import PRESETS, DQNConfig

DESCRIPTION = "DQN: double, dueling, prioritized, n-step; --distributional gives C51"
SPEC = AgentSpec(
    "dqn", DQNConfig, DQNAgent, PRESETS, "dqn-classic", DESCRIPTION, dict_obs=False,
)  # fmt: skip

__all__ = ["SPEC", "DQNAgent", "DQNConfig"]
