"""The machinery every agent shares: the parts' protocols (`protocol`), the base the agents
build on (`base`, `offpolicy`, `actors`, `learning`, `rollout`), the iteration program
(`programs`), populations and evolution (`population`, `evolution`), data parallelism
(`parallel`), configs (`config`) and the registry of agents (`registry`). The top of `agents/`
holds the agent folders and the public losses (`agents.losses`)."""
