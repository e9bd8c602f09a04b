"""TD3 and DDPG (a deterministic actor on the shared off-policy seam); `--agent td3`, with the
ddpg-mujoco preset for DDPG."""

from agents.core.offpolicy import OFF_POLICY_TUNABLE
from agents.core.registry import AgentSpec
from agents.td3.agent import make
from agents.td3.config import PRESETS, TD3Config

# What a population may vary per member (`--vary`, `--evolve`): numbers the learner reads.
TUNABLE = {**OFF_POLICY_TUNABLE, "target_noise": (0.0, 10.0)}
DESCRIPTION = "TD3 / DDPG: deterministic actor, clipped double Q, target smoothing, delay"
SPEC = AgentSpec(
    "td3", TD3Config, make, PRESETS, "td3-classic", DESCRIPTION, dict_obs=True,
    tunable=TUNABLE, discrete_only=False,
)  # fmt: skip

__all__ = ["SPEC", "TD3Config"]
