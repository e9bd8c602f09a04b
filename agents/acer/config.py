"""ACER configuration and presets: the command line of `--agent acer`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from agents.core.config import (
    Config,
    check,
    check_choices,
    check_floats_finite,
    check_only_with,
    check_positive_int,
    check_trace_replay,
)
from agents.core.hooks import check_hooks

DEFAULT_SDN_SAMPLES = 5  # ACER §5.1
DEFAULT_LOG_STD_INIT = math.log(0.5)
CONTINUOUS_ONLY = ("sdn_samples", "log_std_init")  # flags that are None with discrete actions


@dataclass(frozen=True)
class ACERConfig(Config):
    """ACER (Wang et al. 2017, "Sample Efficient Actor-Critic with Experience Replay",
    arXiv:1611.01224): discrete (§3) or, when the env's actions are continuous, continuous
    ACER (§5: a diagonal Gaussian policy and a stochastic dueling network critic). The
    defaults are the acer-classic preset (CartPole-v1, Pendulum-v1). The continuous-only
    flags default to None and are an error with a discrete env (and --lstm-size with a
    continuous one)."""

    # Replay traces per env that leave one sampleable (engine/driver.py `_make_replay`).
    min_traces_per_env: ClassVar[int] = 3

    num_envs: int = 16
    """Parallel environments (envpool batch; over all processes)."""
    trace_len: int = 20
    """Trace length T (steps per trace; stored traces hold T+1 observations)."""
    batch_size: int = 16
    """Traces per off-policy (replay) update."""
    replay_ratio: float = 4.0
    """Mean number of off-policy updates per on-policy update (Poisson, ACER §4)."""
    replay_draw: Literal["seed", "shared"] = "seed"
    """Whose Poisson counts of replay updates a run follows: "seed" draws them from the run's
    seed and the iteration; "shared" from the iteration alone, so every seed replays as many
    traces in a given iteration, and a population's members (--num-seeds) update in lock step
    instead of each waiting, masked, for the member that drew the most."""
    buffer_size: int = 50_000
    """Replay capacity in transitions over all envs (rounded down to whole traces)."""
    start_train_at: int = 0
    """Env steps before off-policy training starts (on-policy updates always run)."""
    discount: float = 0.99
    """Discount factor γ."""
    c: float = 10.0
    """Truncation c of the policy importance weight (ACER eq. 9). The truncation of the
    Retrace traces, which REACTOR-torch (the PyTorch ACER-to-Reactor port this project
    descends from) calls --c, is --retrace-c-max here."""
    retrace_c_max: float = 1.0
    """Truncation of the Retrace trace coefficients c_t = λ·min(c_max, ρ_t) (ACER eq. 5)."""
    retrace_lambda: float = 1.0
    """Retrace λ."""
    trust_region: bool = True
    """Use ACER's efficient trust region against the averaged policy (§3.3)."""
    trust_region_delta: float = 1.0
    """Trust-region threshold δ (ACER eq. 12)."""
    tau: float = 0.99
    """Averaged-policy decay: θ_a ← τ·θ_a + (1 − τ)·θ (ACER's α)."""
    lr: float = 2e-3
    """Adam learning rate."""
    adam_eps: float = 1e-5
    """Adam ε."""
    max_grad_norm: float = 40.0
    """Clip gradients to this global L2 norm."""
    entropy_weight: float = 1e-3
    """Entropy regularisation weight."""
    value_weight: float = 0.5
    """Weight of the critic loss."""
    hidden: tuple[int, ...] = (64, 64)
    """MLP torso widths for vector or dict observations (images: a CNN of fixed widths, --cnn
    for frame stacks; refused for them and with --network)."""
    cnn: Literal["nature", "data-efficient"] = "nature"
    """The torso of frame stacks (Atari): the Nature CNN (with its 512 units), or
    data-efficient Rainbow's two 5x5 stride-5 convolutions (networks.DataEfficientCNN)
    followed by one shared ReLU layer of 256 units, for the small-data regime (Atari 100k)."""
    lstm_size: int = 0
    """LSTM core size after the torso (0: feed-forward)."""
    microbatch_traces: int = 0
    """Traces per gradient chunk inside one update (0: no split). On XLA:CPU chunks of
    about 32 frames are fastest."""
    sdn_samples: int | None = None
    """Continuous actions only: n, the actions u_i ~ π whose mean advantage the stochastic
    dueling network subtracts, Q̃ = V + A(a) − (1/n) Σ_i A(u_i) (ACER §5.1; None: 5, the
    paper's)."""
    log_std_init: float | None = None
    """Continuous actions only: the initial state-independent log σ of the Gaussian policy,
    in normalised action units ([−1, 1] spans the env's bounds; None: log 0.5, σ = 0.5)."""
    network: str | None = None
    """Discrete actions: hook `module:function`: function(obs_spec) -> a flax module mapping
    a batch of observations to features [B, F], the torso under the LSTM (with
    --lstm-size) and the policy and Q heads, in place of the built-in MLP or CNN; checked
    before anything compiles. Recorded in config.json, never imported from a run folder:
    --resume and evaluate need it again."""

    # Flags that do nothing without their switch (agents.core.config.check_only_with): the
    # averaged policy serves the trust region alone; replay batches need replay updates.
    # The hook fields and the arguments each is called with (agents.core.hooks).
    HOOKS: ClassVar[dict[str, tuple[str, ...]]] = {"network": ("obs_spec",)}
    # Flags of one kind of env only (engine.preflight.check_env_only).
    ENV_ONLY: ClassVar[dict[str, str]] = {"cnn": "frames", "hidden": "mlp"}
    # The built-in torso's flags, refused beside --network (engine.preflight.check_torso_fields).
    TORSO_FIELDS: ClassVar[tuple[str, ...]] = ("hidden", "cnn")
    ONLY_WITH: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("trust_region_delta", "tau"), "trust_region"),
        **dict.fromkeys(("batch_size", "start_train_at", "replay_draw"), "replay_ratio>0"),
    }

    def __post_init__(self):
        check_positive_int(self, "num_envs", "trace_len", "batch_size", "buffer_size")
        check_choices(self)
        check_floats_finite(self)
        check(self.replay_ratio >= 0, "replay_ratio", self.replay_ratio, "finite and >= 0")
        check(self.start_train_at >= 0, "start_train_at", self.start_train_at, ">= 0")
        check(0.0 < self.discount <= 1.0, "discount", self.discount, "in (0, 1]")
        check(self.c > 0, "c", self.c, "> 0")
        check(self.retrace_c_max > 0, "retrace_c_max", self.retrace_c_max, "> 0")
        check(0.0 <= self.retrace_lambda <= 1.0, "retrace_lambda", self.retrace_lambda, "in [0, 1]")
        check(self.trust_region_delta > 0, "trust_region_delta", self.trust_region_delta, "> 0")
        check(0.0 <= self.tau < 1.0, "tau", self.tau, "in [0, 1)")
        check(self.lr > 0, "lr", self.lr, "> 0")
        check(self.adam_eps > 0, "adam_eps", self.adam_eps, "> 0")
        check(self.max_grad_norm > 0, "max_grad_norm", self.max_grad_norm, "> 0")
        check(self.entropy_weight >= 0, "entropy_weight", self.entropy_weight, ">= 0")
        check(self.value_weight > 0, "value_weight", self.value_weight, "> 0")
        check(self.lstm_size >= 0, "lstm_size", self.lstm_size, ">= 0")
        check(all(h >= 1 for h in self.hidden), "hidden", self.hidden, "widths >= 1")
        check(
            self.sdn_samples is None or self.sdn_samples >= 1,
            "sdn_samples",
            self.sdn_samples,
            "an integer >= 1 (or None)",
        )
        check_trace_replay(self, 3, divisible=("num_envs", "batch_size"))
        check_only_with(self)  # last: a value out of range is named as such first
        if self.network is not None:  # --network (agents.core.hooks)
            check_hooks(self)

    @property
    def sdn_n(self) -> int:
        """n of the stochastic dueling network (continuous actions)."""
        return DEFAULT_SDN_SAMPLES if self.sdn_samples is None else self.sdn_samples

    @property
    def initial_log_std(self) -> float:
        """The Gaussian policy's initial log σ (continuous actions)."""
        return DEFAULT_LOG_STD_INIT if self.log_std_init is None else self.log_std_init


PRESETS: dict[str, dict] = {
    # CartPole-v1 / Acrobot-v1: the config defaults, tuned here for a 2-core CPU (small MLP,
    # short traces). With Pendulum-v1 (continuous ACER) they run but learn slowly; see
    # acer-pendulum.
    "acer-classic": {},
    # Pendulum-v1, continuous ACER: the defaults with 4 envs (4 x 20 steps per iteration),
    # replay ratio 8 and c = 1, tuned here on one seed (c = 10 and 16 envs learn too, later).
    # Eval about -230 after 100,000 env steps (docs/results-overview.md).
    "acer-pendulum": {
        "env": "Pendulum-v1",
        "total_steps": 100_000,
        "num_envs": 4,
        "replay_ratio": 8.0,
        "c": 1.0,
    },
    # Wang et al. 2017, §5 (Atari): c = 10, δ = 1, α = 0.99, T = 20 (k in the paper), replay
    # ratio 4, entropy 0.001, γ = 0.99, 16 actors. The paper keeps a replay per thread; we
    # default to one shared replay of 200,000 transitions (about 1.4 GB with frames stored
    # once; raise --buffer-size on a larger machine). Reward clipping and episodic life are
    # on for training only (envs/). Adam replaces the paper's RMSProp; lr is our choice.
    "acer-atari": {
        "env": "Pong-v5",
        "total_steps": 10_000_000,
        "num_envs": 16,
        "trace_len": 20,
        "batch_size": 16,
        "replay_ratio": 4.0,
        "buffer_size": 200_000,
        "discount": 0.99,
        "c": 10.0,
        "trust_region": True,
        "trust_region_delta": 1.0,
        "tau": 0.99,
        "lr": 2.5e-4,
        "entropy_weight": 1e-3,
        "max_grad_norm": 40.0,
        "microbatch_traces": 2,
        "checkpoint_every": 200_000,
        "return_window": 10,
    },
    # MinAtar at the MinAtar paper's budget (issue 28; docs/results/minatar-5m): ACER's Atari
    # settings (Wang et al. 2017 §5, as acer-atari: 16 envs, T = 20, batches of 16 traces,
    # replay ratio 4, c = 10, δ = 1, α = 0.99, entropy 0.001, γ = 0.99) on the MinAtar CNN the
    # observation shape picks (one 3x3 conv of 16 channels + 128 units, the MinAtar paper's),
    # with the MinAtar paper's replay of 100,000 transitions and its 5M env steps; sticky
    # actions p = 0.1 (the gymnax backend's MinAtar default). Every seed draws the same
    # Poisson replay counts (--replay-draw shared), so the grid's 5-seed programs run no
    # masked updates. lr: Adam's rate, swept once on Breakout at 2M steps over {2.5e-4, 5e-4,
    # 1e-3} × 2 seeds (docs/results/minatar-5m, "The ACER sweep"): 1e-3 scored 15.7 and 15.4,
    # the others 6.3-9.8. It is the top of the range swept; then frozen for all five games.
    "acer-minatar": {
        "env": "gymnax/Breakout-MinAtar",
        "total_steps": 5_000_000,
        "num_envs": 16,
        "trace_len": 20,
        "batch_size": 16,
        "replay_ratio": 4.0,
        "replay_draw": "shared",
        "buffer_size": 100_000,
        "discount": 0.99,
        "c": 10.0,
        "trust_region": True,
        "trust_region_delta": 1.0,
        "tau": 0.99,
        "lr": 1e-3,
        "entropy_weight": 1e-3,
        "max_grad_norm": 40.0,
        "checkpoint_every": 1_000_000,
        "eval_episodes": 100,
        "return_window": 100,
    },
    # Continuous ACER on MuJoCo (Wang et al. 2017, arXiv:1611.01224, §5). From §5: the
    # stochastic dueling network with n = 5 samples, Retrace traces c_t = min(1, ρ_t^{1/d})
    # (the defaults λ = 1, c_max = 1), Q_opc in the policy gradient, the sampled bias
    # correction and the trust region on the Gaussian's statistics; from the Atari settings
    # (acer-atari) where §5 keeps them: δ = 1, α = 0.99 (--tau), replay ratio 4, γ = 0.99,
    # entropy 0.001. The paper searched its continuous-control hyperparameters per task
    # (appendix); we did not check our reading of it against the original code, so the rest
    # is ours, scaled to this 2-core machine: 8 envs (not one replay per thread of 16), traces
    # of T = 50 steps (MuJoCo episodes are 1,000 steps), batches of 16 traces, one shared
    # replay of 400,000 transitions (vector observations: about 60 MB), 256-256 MLPs and
    # Adam 3e-4 (the SAC/TD3 presets' networks and rate; the paper used RMSProp),
    # c = 5 (between Atari's 10 and the c = 1 that learnt Pendulum fastest here), and the
    # Gaussian's log-std learnt from σ ≈ 0.3 (log σ = −1.2; the paper fixes the covariance).
    "acer-mujoco": {
        "env": "HalfCheetah-v4",
        "total_steps": 1_000_000,
        "num_envs": 8,
        "trace_len": 50,
        "batch_size": 16,
        "replay_ratio": 4.0,
        "buffer_size": 400_000,
        "discount": 0.99,
        "c": 5.0,
        "trust_region": True,
        "trust_region_delta": 1.0,
        "tau": 0.99,
        "lr": 3e-4,
        "entropy_weight": 1e-3,
        "max_grad_norm": 40.0,
        "hidden": (256, 256),
        "sdn_samples": 5,
        "log_std_init": -1.2,
        "checkpoint_every": 100_000,
        "eval_episodes": 10,
        "return_window": 10,
    },
}
