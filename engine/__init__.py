"""The training engine: the run's arguments (`engine.args`), the loop that drives an agent
through its training protocol (`engine.runner`), checkpoints (`engine.checkpoint`), run
folders and their untrusted-data checks (`engine.runfolder`), metrics logs (`engine.runlog`)
and the checks made before a run compiles anything (`engine.preflight`). The scripts a user
runs (`experiments/`) and the benchmarks (`benchmarks/`) are built on it; it imports neither."""
