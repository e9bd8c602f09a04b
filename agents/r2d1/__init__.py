"""R2D1 (R2D2 without distributed actors, as rlpyt): config, learner and agent;
`--agent r2d1`."""

from agents.core.registry import AgentSpec
from agents.dqn import TUNABLE
from agents.r2d1.agent import make
from agents.r2d1.config import PRESETS, R2D1Config
from engine.driver import parts_agent

R2D1Agent = parts_agent("r2d1", make, tunable=TUNABLE)

DESCRIPTION = "R2D1: recurrent DQN with stored states, burn-in, value rescaling, sequence PER"
SPEC = AgentSpec(
    "r2d1", R2D1Config, R2D1Agent, PRESETS, "r2d1-classic", DESCRIPTION, dict_obs=False,
)  # fmt: skip

__all__ = ["SPEC", "R2D1Agent", "R2D1Config"]
