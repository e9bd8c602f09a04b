"""Command-line arguments of `python -m experiments.train`, and the paper presets.

Every field's docstring becomes its `--help` text (tyro). A preset replaces the defaults;
flags given explicitly on the command line override the preset.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Literal

import tyro

from agents.acer.config import ACERConfig


@dataclass(frozen=True)
class TrainArgs:
    """Train an off-policy actor-critic agent on an envpool (or gymnasium) environment.

    Outputs go to the run folder: config.json, metrics.csv, TensorBoard events,
    checkpoints/ and summary.json.
    """

    agent: Literal["acer"] = "acer"
    """Which agent to train."""
    preset: str | None = None
    """Named hyper-parameter preset (acer-classic, acer-atari); explicit flags override it."""
    env: str = "CartPole-v1"
    """Environment id: envpool ids (Pong-v5, CartPole-v1, Acrobot-v1, HalfCheetah-v5, ...) or
    any gymnasium id envpool lacks."""
    total_steps: int = 100_000
    """Environment steps to train for (agent steps over all envs; one Atari step = 4 frames)."""
    seed: int = 0
    """Random seed for parameters, actions, replay sampling and the environments."""
    num_envs: int = 16
    """Parallel environments (envpool batch)."""
    num_threads: int = 0
    """envpool worker threads (0: envpool's default)."""
    run_dir: str | None = None
    """Run folder; default runs/<exp-name>."""
    exp_name: str | None = None
    """Name of the experiment (the run folder's name); default <agent>-<env>-seed<seed>."""
    resume: str | None = None
    """Resume the run in this folder from its latest complete checkpoint (other flags are read
    from its config.json; only --total-steps may be raised)."""

    # Data parallelism (replaces Hogwild threads).
    num_devices: int | None = None
    """Devices per process for data parallelism (default: all local devices). Envs, replay
    and batches are split evenly over the devices; gradients are averaged with lax.pmean."""
    coordinator_address: str | None = None
    """Multi-host: HOST:PORT of process 0 for jax.distributed.initialize."""
    num_processes: int = 1
    """Multi-host: number of processes (each runs its own envpool on num_envs / P envs)."""
    process_id: int = 0
    """Multi-host: this process's index; only process 0 writes logs and summary.json."""

    # ACER / REACTOR-torch hyper-parameters.
    trace_len: int = 20
    """Trace length T (steps per trace; stored traces hold T+1 observations)."""
    batch_size: int = 16
    """Traces per off-policy (replay) update."""
    replay_ratio: float = 4.0
    """Mean number of off-policy updates per on-policy update (Poisson, ACER §4)."""
    buffer_size: int = 50_000
    """Replay capacity in transitions over all envs (rounded down to whole traces)."""
    start_train_at: int = 0
    """Env steps before off-policy training starts (on-policy updates always run)."""
    discount: float = 0.99
    """Discount factor γ."""
    c: float = 10.0
    """Truncation c of the policy importance weight (ACER eq. 9). REACTOR-torch's --c
    truncated Retrace; here that is --retrace-c-max."""
    retrace_c_max: float = 1.0
    """Truncation of the Retrace trace coefficients c_t = λ·min(c_max, ρ_t) (ACER eq. 5)."""
    retrace_lambda: float = 1.0
    """Retrace λ."""
    trust_region: bool = True
    """Use ACER's efficient trust region against the averaged policy (§3.3)."""
    trust_region_threshold: float = 1.0
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
    reward_clip: bool | None = None
    """Clip training rewards to [-1, 1] (default: on for Atari, off otherwise). Evaluation
    always uses raw rewards."""
    hidden: tuple[int, ...] = (64, 64)
    """MLP torso widths for vector observations (Atari uses the Nature CNN)."""
    lstm_size: int = 0
    """LSTM core size after the torso (0: feed-forward)."""
    microbatch_traces: int = 0
    """Traces per gradient chunk inside one update (0: no split). On CPU, chunks of about 32
    frames are fastest (see PERF-NOTES.md)."""

    # Logging, evaluation, checkpoints.
    eval_episodes: int = 20
    """Full episodes (no life loss, no reward clipping) to evaluate at the end."""
    eval_greedy: bool = False
    """Evaluate the greedy (argmax) policy instead of sampling from π."""
    checkpoint_every: int = 50_000
    """Write a checkpoint every this many env steps (and at the end)."""
    keep_checkpoints: int = 3
    """How many recent checkpoints to keep."""
    return_window: int = 20
    """Episodes in the moving window of the logged mean return."""
    progress: bool = True
    """Show a live progress bar."""
    debug: bool = False
    """Debug mode: jax_debug_nans on, no TensorBoard."""

    def acer_config(self) -> ACERConfig:
        return ACERConfig(
            num_envs=self.num_envs,
            trace_len=self.trace_len,
            batch_size=self.batch_size,
            replay_ratio=self.replay_ratio,
            buffer_size=self.buffer_size,
            start_train_at=self.start_train_at,
            discount=self.discount,
            c=self.c,
            retrace_c_max=self.retrace_c_max,
            retrace_lambda=self.retrace_lambda,
            trust_region=self.trust_region,
            trust_region_delta=self.trust_region_threshold,
            tau=self.tau,
            lr=self.lr,
            adam_eps=self.adam_eps,
            max_grad_norm=self.max_grad_norm,
            entropy_weight=self.entropy_weight,
            value_weight=self.value_weight,
            hidden=tuple(self.hidden),
            lstm_size=self.lstm_size,
            microbatch_traces=self.microbatch_traces,
        )


PRESETS: dict[str, dict] = {
    # CartPole-v1 / Acrobot-v1. Tuned here for a 2-core CPU: small MLP, short traces.
    "acer-classic": {},
    # Wang et al. 2017, "Sample Efficient Actor-Critic with Experience Replay", §5 (Atari):
    # c = 10, δ = 1, α = 0.99, T = 20 (k in the paper), replay ratio 4, entropy 0.001,
    # γ = 0.99, 16 actors. The paper keeps a replay per thread; we default to one shared
    # replay of 200,000 transitions (about 1.4 GB with frames stored once; raise
    # --buffer-size on a larger machine). Reward clipping and episodic life are on for
    # training only (envs/). Adam replaces the paper's RMSProp; lr is our choice.
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
        "trust_region_threshold": 1.0,
        "tau": 0.99,
        "lr": 2.5e-4,
        "entropy_weight": 1e-3,
        "max_grad_norm": 40.0,
        "microbatch_traces": 2,
        "checkpoint_every": 200_000,
        "return_window": 10,
    },
}


def _preset_name(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--preset" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--preset="):
            return arg.split("=", 1)[1]
    return None


def parse_train_args(argv: list[str] | None = None) -> TrainArgs:
    """Parse the CLI: preset values become the defaults, explicit flags override them."""
    argv = list(sys.argv[1:] if argv is None else argv)
    name = _preset_name(argv)
    default = TrainArgs()
    if name is not None:
        if name not in PRESETS:
            raise SystemExit(f"error: unknown preset {name!r}; choose from {', '.join(PRESETS)}")
        default = dataclasses.replace(default, preset=name, **PRESETS[name])
    return tyro.cli(TrainArgs, default=default, args=argv)
