"""SAC (continuous and discrete) with critic ensembles (REDQ), n-step or V-trace targets and
prioritized replay; registered as `--agent sac`."""

from agents.core.registry import AgentSpec
from agents.sac.agent import SACAgent
from agents.sac.config import PRESETS, SACConfig

DESCRIPTION = "SAC: soft actor-critic, continuous or discrete, critic ensembles (REDQ)"
SPEC = AgentSpec(
    "sac", SACConfig, SACAgent, PRESETS, "sac-classic", DESCRIPTION, dict_obs=False,
)  # fmt: skip

__all__ = ["SPEC", "SACAgent", "SACConfig"]
