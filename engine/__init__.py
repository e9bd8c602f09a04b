"""The training engine: the run's arguments (`engine.args`), the loop that drives an agent
through its training protocol (`engine.runner`, over `engine.protocol`), the driver that runs an
agent's pure functions as compiled programs (`engine.driver`, with `engine.programs`,
`engine.rollout` and `engine.actor_thread`), populations and their evolution
(`engine.population`, `engine.evolution`), checkpoints (`engine.checkpoint`), run folders and
their untrusted-data checks (`engine.runfolder`), metrics logs (`engine.runlog`) and the checks
made before a run compiles anything (`engine.preflight`). The scripts a user runs
(`experiments/`) and the benchmarks (`benchmarks/`) are built on it; it imports neither. An
agent's folder imports nothing of it: the registry carries the agent's `make`, and
`engine.driver.agent_class` gives it the training protocol."""
