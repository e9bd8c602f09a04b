"""ACER (Wang et al. 2017): config, actor, learner and agent; registered as `--agent acer`."""

from agents.acer.agent import make
from agents.acer.config import PRESETS, ACERConfig
from agents.core.learning import ACTOR_CRITIC_TUNABLE
from agents.core.registry import AgentSpec

DESCRIPTION = "ACER: Retrace critic, truncated IS with bias correction, trust region"
SPEC = AgentSpec(
    "acer", ACERConfig, make, PRESETS, "acer-classic", DESCRIPTION, dict_obs=True,
    tunable=ACTOR_CRITIC_TUNABLE, discrete_only=False,
)  # fmt: skip

__all__ = ["SPEC", "ACERConfig"]
