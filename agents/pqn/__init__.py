"""PQN (Gallici et al. 2024, arXiv:2407.04811): Q(λ) over parallel envs with a LayerNorm
network, no replay and no target network; `--agent pqn`. An agent written as pure functions
(`make` in agents/pqn/agent.py, agents/core/parts.py)."""

from agents.core.parts import parts_agent
from agents.core.registry import AgentSpec
from agents.pqn.agent import make
from agents.pqn.config import PRESETS, PQNConfig

PQNAgent = parts_agent(
    "pqn", make, tunable={"lr": (1e-7, 1.0), "td_lambda": (0.0, 1.0), "discount": (0.5, 1.0)}
)
DESCRIPTION = "PQN: Q(λ) over parallel envs, LayerNorm, no replay or target network"
SPEC = AgentSpec("pqn", PQNConfig, PQNAgent, PRESETS, "pqn-cartpole", DESCRIPTION)

__all__ = ["SPEC", "PQNAgent", "PQNConfig", "make"]
