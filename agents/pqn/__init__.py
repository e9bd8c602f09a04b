"""PQN (Gallici et al. 2024, arXiv:2407.04811), `--agent pqn`: an agent written as pure
functions (agents/pqn/agent.py `make`; agents/core/parts.py)."""

from agents.core.registry import AgentSpec
from agents.pqn.agent import make
from agents.pqn.config import PRESETS, PQNConfig

TUNABLE = {"lr": (1e-7, 1.0), "td_lambda": (0.0, 1.0), "discount": (0.5, 1.0)}
DESCRIPTION = "PQN: Q(λ) over parallel envs, LayerNorm, no replay or target network"
SPEC = AgentSpec("pqn", PQNConfig, make, PRESETS, "pqn-cartpole", DESCRIPTION, tunable=TUNABLE)
