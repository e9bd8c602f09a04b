"""Flax linen modules: torsos (Nature CNN, MLP), cores (LSTM with episode resets), heads, the
Reactor network, the on-policy actor-critic and continuous ACER's Gaussian policy with a
stochastic dueling network."""

from networks.actor_critic import ActorCriticNetwork
from networks.cores import ActionRewardLSTM, ActionRewardState, ResetLSTM
from networks.heads import (
    ACERNetwork,
    PolicyQHead,
    QHead,
    QNetwork,
    QOutput,
    RecurrentQNetwork,
    RecurrentQState,
)
from networks.reactor import (
    DuelingDistributionalHead,
    ReactorNetwork,
    ReactorOutput,
    ReactorState,
)
from networks.sdn import GaussianSDNNetwork
from networks.torsos import MLP, DataEfficientCNN, NatureCNN, TiledConv, make_torso

__all__ = [
    "MLP",
    "ACERNetwork",
    "ActionRewardLSTM",
    "ActionRewardState",
    "ActorCriticNetwork",
    "DataEfficientCNN",
    "DuelingDistributionalHead",
    "GaussianSDNNetwork",
    "NatureCNN",
    "PolicyQHead",
    "QHead",
    "QNetwork",
    "QOutput",
    "ReactorNetwork",
    "ReactorOutput",
    "ReactorState",
    "RecurrentQNetwork",
    "RecurrentQState",
    "ResetLSTM",
    "TiledConv",
    "make_torso",
]
