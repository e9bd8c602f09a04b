"""ACER (Wang et al. 2017): config, actor, learner and agent; registered as `--agent acer`."""

from agents.acer.agent import ACERAgent
from agents.acer.config import PRESETS, ACERConfig
from agents.registry import AgentSpec

SPEC = AgentSpec(
    name="acer",
    config_cls=ACERConfig,
    agent_cls=ACERAgent,
    presets=PRESETS,
    default_preset="acer-classic",
    description="ACER: Retrace critic, truncated IS with bias correction, trust region",
)

__all__ = ["SPEC", "ACERAgent", "ACERConfig"]
