"""Thin CLI scripts: training, evaluation, plots and benchmarks. Nothing imports this package
except its own scripts."""
