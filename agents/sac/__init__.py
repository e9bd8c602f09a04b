"""SAC (continuous and discrete) with critic ensembles (REDQ), n-step or V-trace targets and
prioritized replay; registered as `--agent sac`."""

from agents.core.offpolicy import OFF_POLICY_TUNABLE
from agents.core.registry import AgentSpec
from agents.sac.agent import make
from agents.sac.config import PRESETS, SACConfig

# What a population may vary per member (`--vary`, `--evolve`): numbers the learner reads.
TUNABLE = {**OFF_POLICY_TUNABLE, "alpha_lr": (1e-7, 1.0)}
DESCRIPTION = "SAC: soft actor-critic, continuous or discrete, critic ensembles (REDQ)"
SPEC = AgentSpec(
    "sac", SACConfig, make, PRESETS, "sac-classic", DESCRIPTION, dict_obs=True,
    privileged_obs=True, tunable=TUNABLE, discrete_only=False,
)  # fmt: skip

__all__ = ["SPEC", "SACConfig"]
