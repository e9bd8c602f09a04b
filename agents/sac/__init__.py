"""SAC (continuous and discrete) with critic ensembles (REDQ), n-step or V-trace targets and
prioritized replay; registered as `--agent sac`."""

from agents.core.registry import AgentSpec
from agents.sac.agent import SACAgent, network_costs
from agents.sac.config import PRESETS, SACConfig

DESCRIPTION = "SAC: soft actor-critic, continuous or discrete, critic ensembles (REDQ)"
SPEC = AgentSpec(
    "sac", SACConfig, SACAgent, PRESETS, "sac-classic", DESCRIPTION, dict_obs=False,
    bench_compare="update_to_data=1,4", network_costs=network_costs,
)  # fmt: skip

__all__ = ["SPEC", "SACAgent", "SACConfig"]
