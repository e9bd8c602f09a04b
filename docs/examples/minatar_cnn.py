"""A custom CNN for MinAtar, as a `--network` plug-in (docs/agents/sac.md, "Your own network"):

    python -m experiments.train --agent sac --env gymnax/Breakout-MinAtar \\
        --network docs.examples.minatar_cnn:two_convs

`two_convs(obs_spec)` returns a flax module that maps a batch of MinAtar images
`[B, 10, 10, C]` to features `[B, 256]`; SAC's actor and critics put their MLPs on it (one
instance for the actor, one the critics share). Run from the repository root (the module is
imported by name); a run folder records the name, and `--resume` and `evaluate` need the
flag again."""

import flax.linen as nn
import jax.numpy as jnp


class TwoConvs(nn.Module):
    """Two 3x3 convolutions (16 and 32 filters, SAME padding), a 2x2 max-pool between them,
    then a dense layer of `features`."""

    features: int = 256

    @nn.compact
    def __call__(self, image):
        lead = image.shape[:-3]
        x = image.reshape((-1, *image.shape[-3:])).astype(jnp.float32)
        x = nn.relu(nn.Conv(16, (3, 3), padding="SAME")(x))
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(32, (3, 3), padding="SAME")(x))
        x = nn.relu(nn.Dense(self.features)(x.reshape((x.shape[0], -1))))
        return x.reshape((*lead, self.features))


def two_convs(obs_spec):
    """The plug-in: the env's observation spec (here an `envs.ArraySpec` of shape
    `[10, 10, C]`) in, the module out."""
    return TwoConvs()
