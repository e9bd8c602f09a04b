"""Flax linen modules: torsos (Nature CNN, MLP), cores (LSTM with episode resets), heads."""

from networks.cores import ResetLSTM
from networks.heads import ACERNetwork, PolicyQHead
from networks.torsos import MLP, NatureCNN, make_torso

__all__ = ["MLP", "ACERNetwork", "NatureCNN", "PolicyQHead", "ResetLSTM", "make_torso"]
