"""The Reactor (Gruslys et al. 2018): config, learner and agent; `--agent reactor`."""

from agents.core.learning import ACTOR_CRITIC_TUNABLE
from agents.core.registry import AgentSpec
from agents.reactor.agent import make
from agents.reactor.config import PRESETS, ReactorConfig

DESCRIPTION = "Reactor: distributional Retrace, β-LOO, prioritized sequence replay, LSTM"
SPEC = AgentSpec(
    "reactor", ReactorConfig, make, PRESETS, "reactor-classic", DESCRIPTION, dict_obs=True,
    tunable=ACTOR_CRITIC_TUNABLE,
)  # fmt: skip

__all__ = ["SPEC", "ReactorConfig"]
