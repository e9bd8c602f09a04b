"""The Reactor (Gruslys et al. 2018): config, learner and agent; `--agent reactor`."""

from agents.reactor.agent import ReactorAgent
from agents.reactor.config import PRESETS, ReactorConfig
from agents.registry import AgentSpec

SPEC = AgentSpec(
    name="reactor",
    config_cls=ReactorConfig,
    agent_cls=ReactorAgent,
    presets=PRESETS,
    default_preset="reactor-classic",
    description="Reactor: distributional Retrace, β-LOO, prioritized sequence replay, LSTM",
)

__all__ = ["SPEC", "ReactorAgent", "ReactorConfig"]
