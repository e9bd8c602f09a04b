"""R2D1 (R2D2 without distributed actors, as rlpyt): config, learner and agent;
`--agent r2d1`."""

from agents.core.registry import AgentSpec
from agents.dqn import TUNABLE
from agents.r2d1.agent import make
from agents.r2d1.config import PRESETS, R2D1Config

DESCRIPTION = "R2D1: recurrent DQN with stored states, burn-in, value rescaling, sequence PER"
SPEC = AgentSpec(
    "r2d1", R2D1Config, make, PRESETS, "r2d1-classic", DESCRIPTION, dict_obs=False,
    tunable=TUNABLE,
)  # fmt: skip

__all__ = ["SPEC", "R2D1Config"]
