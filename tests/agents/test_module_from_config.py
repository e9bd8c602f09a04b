"""`agents.core.config.module_from_config`: a network built from its config's fields of the
same name (how every agent's `make_network` passes its settings)."""

from __future__ import annotations

from dataclasses import dataclass

import flax.linen as nn
import pytest

from agents.core.config import module_from_config


def test_module_from_config_reads_the_shared_fields_and_keeps_the_given():
    class Net(nn.Module):
        obs_spec: tuple
        hidden: tuple = (8,)
        lstm_size: int = 0
        dueling: bool = False

    @dataclass(frozen=True)
    class Cfg:
        hidden: tuple = (64, 64)
        lstm_size: int = 16
        lr: float = 1e-3  # not a field of the network: not passed

    net = module_from_config(Net, Cfg(), obs_spec=(4,), lstm_size=3)
    # given wins over the config; the config's hidden is read; dueling keeps its default
    assert (net.obs_spec, net.hidden, net.lstm_size, net.dueling) == ((4,), (64, 64), 3, False)
    with pytest.raises(TypeError):  # a required field nobody gives stays an error
        module_from_config(Net, Cfg())
