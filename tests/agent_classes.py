"""The built-in agents' classes, as the engine builds them from their registered `make`
(`engine.driver.agent_class`), for tests that build an agent directly."""

from agents.core.registry import get_agent
from engine.driver import agent_class

A2CAgent = agent_class(get_agent("a2c"))
ACERAgent = agent_class(get_agent("acer"))
DQNAgent = agent_class(get_agent("dqn"))
PPOAgent = agent_class(get_agent("ppo"))
PQNAgent = agent_class(get_agent("pqn"))
R2D1Agent = agent_class(get_agent("r2d1"))
ReactorAgent = agent_class(get_agent("reactor"))
SACAgent = agent_class(get_agent("sac"))
TD3Agent = agent_class(get_agent("td3"))
