"""Reactor configuration (Gruslys et al. 2018, "The Reactor", arXiv:1704.04651)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ReactorConfig:
    """Hyper-parameters of the Reactor. Paper values are marked; the rest are our choices,
    tuned on these 2-core CPUs where the paper is silent."""

    num_envs: int = 16
    trace_len: int = 32  # paper: sequences of 33 observations overlapping on 32-step cells
    batch_size: int = 8  # sequences per learner update (paper's Atari runs: 4, §3.4)
    buffer_size: int = 50_000  # replay capacity in transitions, all envs together
    start_train_at: int = 2_000  # env steps before learning starts
    discount: float = 0.99
    retrace_lambda: float = 1.0  # paper: λ = 1
    beta_loo_c: float = 1.0  # paper: c = 1 (β-LOO with β = min(c, 1/μ(A)); 1 is plain LOO)
    entropy_weight: float = 0.01  # our choice (the paper does not give it)
    distributional: bool = True  # False: "Reactor ND", scalar Retrace critic
    num_atoms: int = 51  # paper: 51 atoms on a fixed support
    v_min: float = -10.0
    v_max: float = 10.0
    uniform_mix: float = 0.01  # ε of the policy's uniform component (our choice)
    target_update_period: int = 1000  # paper: T_update = 1000 learner steps
    lr: float = 5e-5  # paper: Adam, lr 5e-5
    adam_b1: float = 0.0  # paper: β1 = 0
    adam_b2: float = 0.999
    adam_eps: float = 1e-6
    max_grad_norm: float = 40.0
    value_weight: float = 1.0
    hidden: tuple[int, ...] = (128,)  # MLP torso widths (vector observations)
    torso_out: int = 128
    lstm_size: int = 128
    priority_epsilon: float = 0.01  # probability of a uniform draw in prioritized replay
    priority_neighbours: int = 8  # lazy priority initialisation: neighbours considered
    env_steps_per_update: float = 8.0  # acting steps per learning step (paper: 4–6)
    decoupled: bool = True  # acting and learning in concurrent threads; False: lock-step
    microbatch_sequences: int = 0  # sequences per gradient chunk inside an update (0: no split)

    def __post_init__(self):
        def need(cond: bool, msg: str):
            if not cond:
                raise ValueError(f"invalid Reactor config: {msg}")

        for name in ("num_envs", "trace_len", "batch_size", "buffer_size", "num_atoms"):
            value = getattr(self, name)
            need(isinstance(value, int) and value >= 1, f"{name} must be a positive int")
        need(self.num_atoms >= 2, f"num_atoms must be >= 2, got {self.num_atoms}")
        need(self.v_min < self.v_max, f"v_min {self.v_min} must be < v_max {self.v_max}")
        need(0.0 < self.discount <= 1.0, f"discount must be in (0, 1], got {self.discount}")
        need(0.0 <= self.retrace_lambda <= 1.0, "retrace_lambda must be in [0, 1]")
        need(self.beta_loo_c > 0, f"beta_loo_c must be > 0, got {self.beta_loo_c}")
        need(0.0 <= self.uniform_mix < 1.0, "uniform_mix must be in [0, 1)")
        need(self.target_update_period >= 1, "target_update_period must be >= 1")
        need(self.lr > 0, f"lr must be > 0, got {self.lr}")
        need(0.0 <= self.priority_epsilon <= 1.0, "priority_epsilon must be in [0, 1]")
        need(self.env_steps_per_update > 0, "env_steps_per_update must be > 0")
        need(self.start_train_at >= 0, "start_train_at must be >= 0")
        if self.microbatch_sequences:
            need(
                self.batch_size % self.microbatch_sequences == 0,
                f"batch_size={self.batch_size} is not divisible by "
                f"microbatch_sequences={self.microbatch_sequences}",
            )
        per_env = self.buffer_size // (self.num_envs * self.trace_len)
        need(
            per_env >= 3,
            f"buffer_size {self.buffer_size} holds {per_env} sequences per env "
            f"(num_envs={self.num_envs}, trace_len={self.trace_len}); need at least 3",
        )

    def replace(self, **changes) -> ReactorConfig:
        return dataclasses.replace(self, **changes)
