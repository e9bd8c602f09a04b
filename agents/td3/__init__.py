"""TD3 and DDPG (a deterministic actor on the shared off-policy seam); `--agent td3`, with the
ddpg-mujoco preset for DDPG."""

from agents.core.registry import AgentSpec
from agents.td3.agent import TD3Agent
from agents.td3.config import PRESETS, TD3Config

DESCRIPTION = "TD3 / DDPG: deterministic actor, clipped double Q, target smoothing, delay"
SPEC = AgentSpec("td3", TD3Config, TD3Agent, PRESETS, "td3-classic", DESCRIPTION, dict_obs=False)

__all__ = ["SPEC", "TD3Agent", "TD3Config"]
