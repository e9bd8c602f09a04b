"""What the agents share: the parts an agent is made of (`parts`: `AgentParts`), what acting
records (`rollout`), pure actors (`actors`), learner helpers and the one trace batch type
(`learning`), the off-policy agents' common build (`offpolicy`), curiosity (`rnd`, `icm`),
observation statistics (`normalization`), user hooks (`hooks`), device-mesh helpers
(`parallel`), config checks (`config`) and the registry of agents (`registry`). The engine
that runs an agent's parts (the iteration program, populations, evolution, the decoupled
actor) is `engine/`; the top of `agents/` holds the agent folders and the public losses
(`agents.losses`)."""
