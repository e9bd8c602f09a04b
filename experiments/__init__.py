"""The scripts a user runs: train, evaluate, plot, plot_population, sweep, report and
random_scores. The training engine they share is the `engine` package; the benchmarks are in
`benchmarks/`."""
