"""Benchmarks: throughput against envpool's raw steps/s and the peer programs, the losses
against rlax, replay, scaling, populations, the defaults over many seeds, and the agents'
compute-bound cost models (`benchmarks.costs`). Each prints ratios measured side by side in
one run; nothing in the library imports this package."""
