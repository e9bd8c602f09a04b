"""ACER configuration: a frozen dataclass that validates its own fields."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ACERConfig:
    """Hyper-parameters of discrete ACER (Wang et al. 2017, arXiv:1611.01224)."""

    num_envs: int = 16
    trace_len: int = 20  # T: steps per trace; a stored trace holds T+1 observations
    batch_size: int = 16  # traces per off-policy update
    replay_ratio: float = 4.0  # mean of the Poisson number of off-policy updates per iteration
    buffer_size: int = 50_000  # replay capacity in transitions (all envs together)
    start_train_at: int = 0  # env steps before off-policy updates start (0: once sampleable)
    discount: float = 0.99
    c: float = 10.0  # truncation of the policy importance weight (ACER eq. 9)
    retrace_c_max: float = 1.0  # truncation of the Retrace trace coefficients (ACER eq. 5)
    retrace_lambda: float = 1.0
    trust_region: bool = True
    trust_region_delta: float = 1.0  # δ in ACER eq. 12
    tau: float = 0.99  # average policy: θ_a ← τ·θ_a + (1 − τ)·θ (ACER's α)
    lr: float = 2e-3
    adam_eps: float = 1e-5
    max_grad_norm: float = 40.0
    entropy_weight: float = 1e-3
    value_weight: float = 0.5
    hidden: tuple[int, ...] = (64, 64)  # MLP torso widths (vector observations)
    lstm_size: int = 0  # 0: feed-forward; > 0: an LSTM core after the torso
    microbatch_traces: int = 0  # traces per gradient chunk inside one update (0: no split)

    def __post_init__(self):
        def need(cond: bool, msg: str):
            if not cond:
                raise ValueError(f"invalid ACER config: {msg}")

        for name in ("num_envs", "trace_len", "batch_size", "buffer_size"):
            value = getattr(self, name)
            need(
                isinstance(value, int) and value >= 1,
                f"{name} must be a positive int, got {value!r}",
            )
        need(self.replay_ratio >= 0, f"replay_ratio must be >= 0, got {self.replay_ratio}")
        need(self.start_train_at >= 0, f"start_train_at must be >= 0, got {self.start_train_at}")
        need(0.0 < self.discount <= 1.0, f"discount must be in (0, 1], got {self.discount}")
        need(self.c > 0, f"c must be > 0, got {self.c}")
        need(self.retrace_c_max > 0, f"retrace_c_max must be > 0, got {self.retrace_c_max}")
        need(
            0.0 <= self.retrace_lambda <= 1.0,
            f"retrace_lambda must be in [0, 1], got {self.retrace_lambda}",
        )
        need(
            self.trust_region_delta > 0,
            f"trust_region_delta must be > 0, got {self.trust_region_delta}",
        )
        need(0.0 <= self.tau < 1.0, f"tau must be in [0, 1), got {self.tau}")
        need(self.lr > 0, f"lr must be > 0, got {self.lr}")
        need(self.max_grad_norm > 0, f"max_grad_norm must be > 0, got {self.max_grad_norm}")
        need(self.entropy_weight >= 0, f"entropy_weight must be >= 0, got {self.entropy_weight}")
        need(self.value_weight > 0, f"value_weight must be > 0, got {self.value_weight}")
        need(self.lstm_size >= 0, f"lstm_size must be >= 0, got {self.lstm_size}")
        need(all(h >= 1 for h in self.hidden), f"hidden widths must be >= 1, got {self.hidden}")
        per_env = self.buffer_size // (self.num_envs * self.trace_len)
        need(
            per_env >= 3,
            f"buffer_size {self.buffer_size} holds {per_env} traces per env "
            f"(num_envs={self.num_envs}, trace_len={self.trace_len}); need at least 3",
        )
        if self.microbatch_traces:
            for name in ("num_envs", "batch_size"):
                need(
                    getattr(self, name) % self.microbatch_traces == 0,
                    f"{name}={getattr(self, name)} is not divisible by "
                    f"microbatch_traces={self.microbatch_traces}",
                )

    def replace(self, **changes) -> ACERConfig:
        return dataclasses.replace(self, **changes)
