"""reactor-jax: off-policy actor-critic reinforcement learning in JAX.

`agents.losses` is the loss library (pure, jitted, time-major); the agents live in
`agents/<name>/`, built on `agents.core`. The version below is the distribution's
(`pip install reactor-jax`); CHANGELOG.md says what changed between versions.
"""

__version__ = "0.3.0.dev0"
