"""DQN and its variants (double, dueling, prioritized, n-step; C51 with --distributional):
config, learner and agent; `--agent dqn`."""

from agents.core.registry import AgentSpec
from agents.dqn.agent import make
from agents.dqn.config import PRESETS, DQNConfig

# What a population may vary per member (`--vary`, `--evolve`): numbers the learner reads.
TUNABLE = {"lr": (1e-7, 1.0), "discount": (0.5, 1.0)}
DESCRIPTION = "DQN: double, dueling, prioritized, n-step; --distributional gives C51"
SPEC = AgentSpec(
    "dqn", DQNConfig, make, PRESETS, "dqn-classic", DESCRIPTION, dict_obs=False, tunable=TUNABLE,
)  # fmt: skip

__all__ = ["SPEC", "DQNConfig"]
