"""The Reactor (Gruslys et al. 2018): config, learner and agent; `--agent reactor`."""

from agents.core.learning import ACTOR_CRITIC_TUNABLE
from agents.core.registry import AgentSpec
from agents.reactor.agent import make
from agents.reactor.config import PRESETS, ReactorConfig
from engine.driver import parts_agent

ReactorAgent = parts_agent("reactor", make, tunable=ACTOR_CRITIC_TUNABLE)

DESCRIPTION = "Reactor: distributional Retrace, β-LOO, prioritized sequence replay, LSTM"
SPEC = AgentSpec(
    "reactor", ReactorConfig, ReactorAgent, PRESETS, "reactor-classic", DESCRIPTION, dict_obs=True,
)  # fmt: skip

__all__ = ["SPEC", "ReactorAgent", "ReactorConfig"]
