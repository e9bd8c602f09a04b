"""Flax linen modules: torsos (Nature CNN, MLP), cores (LSTM with episode resets), heads, the
Reactor network and the on-policy actor-critic."""

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
from networks.torsos import MLP, NatureCNN, make_torso

__all__ = [
    "MLP",
    "ACERNetwork",
    "ActionRewardLSTM",
    "ActionRewardState",
    "ActorCriticNetwork",
    "DuelingDistributionalHead",
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
    "make_torso",
]
