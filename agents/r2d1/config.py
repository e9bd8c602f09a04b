"""R2D1 configuration and presets: the command line of `--agent r2d1`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agents.core.config import (
    ReplayWindow,
    check_floats_finite,
    check_only_with,
    check_positive_int,
    check_q_learning,
    check_sequence_window,
    check_trace_replay,
)
from agents.core.hooks import check_hooks


@dataclass(frozen=True)
class R2D1Config(ReplayWindow):
    """R2D1: R2D2 (Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed
    Reinforcement Learning", ICLR) without the distributed actors, as rlpyt's R2D1. The
    defaults are the r2d1-classic preset (CartPole-v1, sized for a 2-core CPU).

    Replay layout: every env writes traces of `trace_len` steps (the period at which
    sequences start: R2D2's overlap). A sampled sequence starts at a trace; it learns
    `seq_len` steps after a burn-in of `burn_in` steps taken from the traces before it, and
    reads `n_step - 1` more steps for its last n-step targets. The LSTM state stored with the
    burn-in's first trace starts the unroll (R2D2's "stored state" with burn-in)."""

    num_envs: int = 8
    """Parallel environments (envpool batch; over all processes)."""
    trace_len: int = 10
    """Steps per rollout and per replay trace; consecutive sequences start this many steps
    apart (R2D2: sequences of 80 overlapping by 40 → 40)."""
    seq_len: int = 20
    """Steps learnt per sequence (R2D2: 80); a multiple of --trace-len."""
    burn_in: int = 10
    """Steps unrolled before the learnt ones to refresh the stored LSTM state, with no
    gradient (R2D2: 40); a multiple of --trace-len."""
    batch_size: int = 16
    """Sequences per update (R2D2: 64)."""
    buffer_size: int = 50_000
    """Replay capacity in transitions over all envs (rounded down to whole traces)."""
    start_train_at: int = 2_000
    """Env steps before learning starts."""
    replay_ratio: float = 32.0
    """Transitions learnt per env step (as rlpyt's replay_ratio: updates per env step =
    replay_ratio / (batch_size * seq_len); rlpyt's R2D1: 1)."""
    discount: float = 0.99
    """Discount factor γ (R2D2: 0.997)."""
    n_step: int = 5
    """Steps of the return before bootstrapping (R2D2: 5)."""
    double: bool = True
    """Double Q-learning targets (R2D2: yes)."""
    dueling: bool = True
    """Dueling head (R2D2: yes)."""
    value_rescale: bool = True
    """Learn h(Q) with h(x) = sign(x)(√(|x|+1) − 1) + 1e-3·x (R2D2: yes)."""
    huber_delta: float = 0.0
    """Huber threshold on the TD error (0: squared error, as R2D2)."""
    prioritized: bool = True
    """Prioritized sequence replay (R2D2: yes)."""
    priority_exponent: float = 0.9
    """α: a sequence's priority is p^α (R2D2: 0.9)."""
    importance_exponent: float = 0.6
    """β of the importance weights (R2D2: 0.6)."""
    importance_exponent_steps: int = 0
    """Env steps over which β rises linearly to 1 (0: β is held, as in R2D2)."""
    priority_eta: float = 0.9
    """η: a sequence's p = η·max_t |δ_t| + (1 − η)·mean_t |δ_t| (R2D2: 0.9)."""
    td_error_min: float = 0.0
    """Prioritized replay: the |δ| a priority is made from is raised to at least this (the
    Advanced-SAC seed's td_error_min; 0: no floor)."""
    td_error_max: float | None = None
    """Prioritized replay: the |δ| a priority is made from is cut at this (the seed's
    td_error_max; none by default)."""
    target_update_period: int = 200
    """Updates between copies of the online network to the target network (R2D2: 2500)."""
    lr: float = 5e-4
    """Adam learning rate (R2D2: 1e-4)."""
    anneal_steps: int = 0
    """Decay the learning rate linearly to 0 over this many env steps, counted in updates
    from --start-train-at (0: constant, as R2D2)."""
    adam_eps: float = 1e-5
    """Adam ε (R2D2: 1e-3)."""
    max_grad_norm: float = 40.0
    """Clip gradients to this global L2 norm (rlpyt's R2D1: 80)."""
    apex_epsilon: bool = False
    """Fixed per-env exploration ε_i = 0.4^(1 + 7 i/(N − 1)) (Ape-X, R2D2); otherwise ε decays
    linearly from --eps-start to --eps-end over --eps-decay-steps."""
    eps_start: float = 1.0
    """Exploration rate ε at env step 0 (linear schedule)."""
    eps_end: float = 0.02
    """Exploration rate after --eps-decay-steps (linear schedule)."""
    eps_decay_steps: int = 10_000
    """Env steps over which ε decays linearly."""
    eps_decay_start: int = 0
    """Env step at which ε starts to decay (--eps-start before it)."""
    eval_epsilon: float = 0.001
    """ε of the sampled evaluation (the greedy one uses 0)."""
    hidden: tuple[int, ...] = (64,)
    """MLP torso widths for vector or dict observations (images: a CNN of fixed widths; refused
    for them and with --network)."""
    lstm_size: int = 64
    """LSTM size (R2D2: 512)."""
    microbatch_traces: int = 0
    """Sequences per gradient chunk inside an update (0: no split)."""
    network: str | None = None
    """Hook `module:function`: function(obs_spec) -> a flax module mapping a batch of
    observations to features [B, F], the torso before the LSTM (its T·B observations as one
    batch) in place of the built-in MLP or CNN; checked before anything compiles. Recorded
    in config.json, never imported from a run folder: --resume and evaluate need it again."""

    # The hook fields and the arguments each is called with (agents.core.hooks).
    HOOKS: ClassVar[dict[str, tuple[str, ...]]] = {"network": ("obs_spec",)}
    # Flags of one kind of env only (engine.preflight.check_env_only).
    ENV_ONLY: ClassVar[dict[str, str]] = {"hidden": "mlp"}
    # The built-in torso's flags, refused beside --network (engine.preflight.check_torso_fields).
    TORSO_FIELDS: ClassVar[tuple[str, ...]] = ("hidden",)
    # Flags that do nothing without their switch (agents.core.config.check_only_with).
    ONLY_WITH: ClassVar[dict[str, str]] = {
        **dict.fromkeys(
            ("priority_exponent", "importance_exponent", "importance_exponent_steps",
             "priority_eta", "td_error_min", "td_error_max"),
            "prioritized",
        ),
        **dict.fromkeys(
            ("eps_start", "eps_end", "eps_decay_steps", "eps_decay_start"), "!apex_epsilon"
        ),
    }  # fmt: skip

    def __post_init__(self):
        check_positive_int(
            self, "num_envs", "trace_len", "seq_len", "batch_size", "buffer_size", "n_step",
            "target_update_period", "lstm_size",
        )  # fmt: skip
        check_floats_finite(self)
        check_sequence_window(self)
        check_q_learning(self)
        sizes = f", seq_len={self.seq_len}, burn_in={self.burn_in}"
        check_trace_replay(self, self.min_traces_per_env, sizes=sizes)
        check_only_with(self)  # last: a value out of range is named as such first
        if self.network is not None:  # --network (agents.core.hooks)
            check_hooks(self)

    # The replay window (agents.core.config.ReplayWindow): burn-in before the sampled trace, the
    # rest of the learnt sequence and the n-step look-ahead after it.
    @property
    def learn_len(self) -> int:
        return self.seq_len

    @property
    def lookback(self) -> int:
        return self.burn_in


PRESETS: dict[str, dict] = {
    # CartPole-v1 (and its partially observed variants): the config defaults, our choices for
    # a 2-core CPU: sequences of 20 starting every 10 steps after a burn-in of 10, LSTM 64,
    # γ = 0.99, a linearly decaying ε, and dqn-classic's learning rate (5e-4, Adam ε 1e-5,
    # decayed linearly to 0 over the run's 200k steps), replay ratio (32) and target period
    # (200), and uniform replay (as dqn-classic); the rest as R2D2. Over seeds 0-9 as a
    # population (docs/results/defaults-10-seeds): 10 solved with uniform replay, against 9
    # with R2D2's prioritized replay (α 0.9), 8 with it and a 200k replay, 7 with a constant
    # rate over 100k steps and 7 with the decay over 150k.
    "r2d1-classic": {"total_steps": 200_000, "anneal_steps": 200_000, "prioritized": False},
    # rlpyt's R2D1 Atari settings (Kapturowski et al. 2019, Table 2): sequences of 80 steps
    # overlapping by 40 (trace_len 40), burn-in 40, n = 5, γ = 0.997, value rescaling, double
    # + dueling, squared loss, priorities with η = 0.9, α = 0.9, β = 0.6, Adam lr 1e-4 and
    # ε 1e-3, target copy every 2,500 updates, Ape-X ε per env (0.4^(1 + 7 i/(N − 1))), no
    # reward clipping in R2D2 (--reward-clip remains the run default here), LSTM 512 on the
    # Nature CNN. Scaled for this machine: 8 envs (R2D2: 256 actors), 8 sequences per update
    # (R2D2: 64) in chunks of 1, replay 200k transitions (R2D2: 1M sequences), replay ratio
    # 1 transition per env step as rlpyt (R2D2's actors ran faster than its learner).
    "r2d1-atari": {
        "env": "Pong-v5",
        "total_steps": 10_000_000,
        "num_envs": 8,
        "trace_len": 40,
        "seq_len": 80,
        "burn_in": 40,
        "batch_size": 8,
        "buffer_size": 200_000,
        "start_train_at": 50_000,
        "replay_ratio": 1.0,
        "discount": 0.997,
        "n_step": 5,
        "value_rescale": True,
        "huber_delta": 0.0,
        "priority_exponent": 0.9,
        "importance_exponent": 0.6,
        "priority_eta": 0.9,
        "lr": 1e-4,
        "adam_eps": 1e-3,
        "max_grad_norm": 80.0,
        "target_update_period": 2_500,
        "apex_epsilon": True,
        "lstm_size": 512,
        "microbatch_traces": 1,
        "checkpoint_every": 200_000,
        "return_window": 10,
    },
}
