"""PPO configuration and presets: the command line of `--agent ppo`.

`OnPolicyConfig` holds what A2C and PPO share (the rollout, the network, the advantage
estimator, normalisation and hooks); `PPOConfig` adds the epochs × minibatches loop and the
clipping. agents/a2c/config.py derives A2C's config from the same base.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from agents.core.config import (
    Config,
    check,
    check_choices,
    check_floats_finite,
    check_only_with,
    check_positive_int,
)
from agents.core.hooks import check_hooks
from agents.core.icm import ICM_ONLY_WITH, check_icm


@dataclass(frozen=True)
class OnPolicyConfig(Config):
    """The fields every on-policy agent has (see PPOConfig and A2CConfig)."""

    num_envs: int = 8
    """Parallel environments (envpool batch; over all processes)."""
    trace_len: int = 32
    """Rollout length T: steps per env per iteration (CleanRL's num_steps)."""
    discount: float = 0.99
    """Discount factor γ."""
    gae_lambda: float = 0.95
    """GAE λ (Schulman et al. 2016, arXiv:1506.02438); 1 gives the Monte-Carlo return
    bootstrapped at the end of the rollout."""
    lr: float = 2.5e-3
    """Learning rate."""
    anneal_steps: int = 50_000
    """Decay the learning rate linearly to 0 over this many env steps (set it to
    --total-steps, as the presets do); 0: constant."""
    max_grad_norm: float = 0.5
    """Clip gradients to this global L2 norm."""
    entropy_weight: float = 0.0
    """Entropy bonus weight."""
    value_weight: float = 0.5
    """Weight of the value loss."""
    hidden: tuple[int, ...] = (64, 64)
    """MLP torso widths for vector or dict observations, and of ICM's networks (images: a CNN
    of fixed widths; refused for them)."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation of the MLP torso of vector observations (refused for others and with
    --network)."""
    shared_torso: bool = False
    """One torso for policy and value (always for images and with an LSTM); False gives
    them separate MLPs, as the PPO paper's MuJoCo network."""
    lstm_size: int = 0
    """LSTM core size after the torso (0: feed-forward)."""
    recurrence: int = 0
    """Recurrent only: BPTT length, in steps; the rollout is cut into chunks of this many
    steps, each starting from the LSTM state stored at acting time (torch-ac's
    --recurrence). 0: the whole rollout (--trace-len)."""
    refresh_memories: bool = True
    """Recurrent only: before every epoch after the first, recompute the chunks' initial
    LSTM states with the current parameters (one forward pass over the rollout). False:
    keep the states stored at acting time, as torch-ac and rlpyt do."""
    prev_action_reward: bool = False
    """Recurrent only: also feed the LSTM the previous action (one-hot, or the raw vector of a
    continuous action) and the previous reward, zeroed at episode starts (rlpyt's
    AtariLstmModel; R2D1's core, `networks.cores.ActionRewardLSTM`). The reward is the env's
    (after --reward-clip), before --reshape-reward and --normalize-reward."""
    text: bool = False
    """Dict observations with a mission (MiniGrid): encode its words with a GRU (torch-ac's
    --text); off, the mission is left out."""
    log_std_init: float = 0.0
    """Continuous actions: initial state-independent log standard deviation."""
    normalize_obs: bool = False
    """Normalise vector observations with running mean and variance (learner state,
    checkpointed), clipped to ±--obs-clip."""
    obs_clip: float = 10.0
    """Clip normalised observations to this magnitude."""
    normalize_reward: bool = False
    """Scale rewards by the running standard deviation of the discounted return
    (gymnasium's NormalizeReward; learner state, checkpointed), clipped to
    ±--scaled-reward-clip."""
    scaled_reward_clip: float = 10.0
    """Clip scaled rewards to this magnitude."""
    update_loop: Literal["auto", "scan", "unroll", "dispatch"] = "auto"
    """How the epochs x minibatches loop runs: scan (nested lax.scan in one program), unroll
    (a Python loop inside one program), or dispatch (one program per minibatch update,
    called from the host; no loop is compiled). auto: dispatch for image observations on
    CPU (a convolution's weight gradient inside a rolled loop is 13-100x slower on XLA:CPU,
    and unrolling 16 CNN updates compiles for minutes), scan otherwise."""
    microbatch_traces: int = 0
    """Samples (sequences, when recurrent) per gradient chunk inside one minibatch update
    (0: no split). On XLA:CPU chunks of about 32 frames are fastest."""
    reshape_reward: str | None = None
    """Hook `module:function` (torch-ac's reshape_reward): reshape_reward(obs, action,
    reward, done) -> reward, applied to the rollout before the advantages, with obs the
    next observations x_{t+1} [T, B, ...], action [T, B, ...], reward [T, B] and done
    [T, B] (True where the episode terminated). Must be jittable."""
    preprocess_obs: str | None = None
    """Hook `module:function`: preprocess_obs(obs) -> obs, applied to every observation
    batch before the network (acting and learning; before --normalize-obs). Must be
    jittable and keep the leading batch dimensions."""
    network: str | None = None
    """Hook `module:function`: function(obs_spec) -> a flax module mapping a batch of
    (--preprocess-obs'd) observations to features [B, F], the torso under the policy and
    value heads (one instance each without --shared-torso) in place of the built-in MLP,
    CNN or dict encoder; checked before anything compiles. Recorded in config.json, never
    imported from a run folder: --resume and evaluate need the flag again."""
    icm_coef: float = 0.0
    """Curiosity by the intrinsic curiosity module (Pathak et al. 2017, arXiv:1705.05363):
    the weight of ICM's intrinsic reward (its forward model's error on each transition,
    divided by a running standard deviation of the errors) added to the env's reward after
    --reshape-reward and before --normalize-reward and the advantages (0: off;
    agents/core/icm.py). Vector observations only."""
    icm_beta: float = 0.2
    """With --icm-coef: β of ICM's loss (1 − β)·inverse + β·forward (the paper's 0.2)."""
    icm_lr: float = 1e-3
    """With --icm-coef: Adam learning rate of ICM's encoder, inverse and forward models, one
    step per rollout on all its transitions (the paper's 1e-3)."""
    icm_features: int = 64
    """With --icm-coef: size of ICM's feature embedding φ(s) (the paper's 288 after its
    convolutions on pixels)."""

    # The hook fields and the positional arguments the learner calls each with (agents.core.hooks
    # checks a hook's signature against them; a run folder's hooks are never imported).
    HOOKS: ClassVar[dict[str, tuple[str, ...]]] = {
        "reshape_reward": ("obs", "action", "reward", "done"),
        "preprocess_obs": ("obs",),
        "network": ("obs_spec",),
    }

    # Flags that do nothing without their switch (agents.core.config.check_only_with); PPO and A2C
    # extend the table.
    ONLY_WITH: ClassVar[dict[str, str]] = {
        **dict.fromkeys(("recurrence", "refresh_memories", "prev_action_reward"), "lstm_size>0"),
        "obs_clip": "normalize_obs",
        "scaled_reward_clip": "normalize_reward",
        **ICM_ONLY_WITH,
    }
    # Flags of one kind of env only (engine.preflight.check_env_only).
    ENV_ONLY: ClassVar[dict[str, str]] = {
        "log_std_init": "continuous",
        "text": "text",
        "hidden": "mlp",
        "activation": "vectors",
    }
    # The built-in torso's flags, refused beside --network (engine.preflight.check_torso_fields;
    # --hidden also sizes ICM's networks, so it stays).
    TORSO_FIELDS: ClassVar[tuple[str, ...]] = ("activation",)

    # Constants of the agent (a subclass sets them; the learner reads them).
    epochs: ClassVar[int] = 1
    num_minibatches: ClassVar[int] = 1
    clip_eps: ClassVar[float | None] = None
    clip_value: ClassVar[bool] = False
    anneal_clip: ClassVar[bool] = False
    normalize_advantages: ClassVar[bool] = False
    n_step: ClassVar[int] = 0

    def __post_init__(self):
        check_positive_int(self, "num_envs", "trace_len")
        check_choices(self)
        check_floats_finite(self)
        check(0.0 < self.discount <= 1.0, "discount", self.discount, "in (0, 1]")
        check(0.0 <= self.gae_lambda <= 1.0, "gae_lambda", self.gae_lambda, "in [0, 1]")
        check(self.lr > 0, "lr", self.lr, "> 0")
        check(self.anneal_steps >= 0, "anneal_steps", self.anneal_steps, ">= 0")
        check(self.max_grad_norm > 0, "max_grad_norm", self.max_grad_norm, "> 0")
        check(self.entropy_weight >= 0, "entropy_weight", self.entropy_weight, ">= 0")
        check(self.value_weight > 0, "value_weight", self.value_weight, "> 0")
        check(all(h >= 1 for h in self.hidden), "hidden", self.hidden, "widths >= 1")
        check(self.lstm_size >= 0, "lstm_size", self.lstm_size, ">= 0")
        check(self.recurrence >= 0, "recurrence", self.recurrence, ">= 0")
        if self.recurrence:
            check(
                self.trace_len % self.recurrence == 0,
                "recurrence",
                self.recurrence,
                f"a divisor of --trace-len {self.trace_len}",
            )
        check(self.obs_clip > 0, "obs_clip", self.obs_clip, "> 0")
        check(self.scaled_reward_clip > 0, "scaled_reward_clip", self.scaled_reward_clip, "> 0")
        check(self.microbatch_traces >= 0, "microbatch_traces", self.microbatch_traces, ">= 0")
        if self.microbatch_traces:
            per_minibatch = self.minibatch_sequences
            check(
                per_minibatch % self.microbatch_traces == 0,
                "microbatch_traces",
                self.microbatch_traces,
                f"a divisor of the {per_minibatch} samples of a minibatch",
            )
        check_icm(self)
        if any(getattr(self, name) is not None for name in self.HOOKS):  # agents.core.hooks
            check_hooks(self)
        check_only_with(self)  # last: a value out of range is named as such first

    @property
    def bptt(self) -> int:
        """The BPTT chunk length of a recurrent learner."""
        return self.recurrence or self.trace_len

    @property
    def minibatch_sequences(self) -> int:
        """Sequences per minibatch (over all devices): chunks of `bptt` steps when
        recurrent, single steps otherwise."""
        if self.lstm_size:
            return self.num_envs * (self.trace_len // self.bptt) // self.num_minibatches
        return self.num_envs * self.trace_len // self.num_minibatches


@dataclass(frozen=True)
class PPOConfig(OnPolicyConfig):
    """PPO (Schulman et al. 2017, "Proximal Policy Optimization Algorithms",
    arXiv:1707.06347): clipped surrogate, GAE, epochs × minibatches over each rollout. The
    defaults are the ppo-classic preset (CartPole-v1)."""

    epochs: int = 4
    """Passes over each rollout (K in the paper)."""
    num_minibatches: int = 4
    """Minibatches per epoch. Feed-forward: over the T·B steps, shuffled; recurrent: over
    the envs (each minibatch holds whole env streams, cut into --recurrence chunks)."""
    clip_eps: float = 0.2
    """Clipping range ε of the probability ratio (eq. 7)."""
    clip_value: bool = False
    """Clip the value loss as well (baselines ppo2, CleanRL, torch-ac), with --clip-eps.
    Off by default: with unscaled returns (CartPole's reach 100) a value that may move only
    ε per update learns too slowly (measured: 2 of 2 seeds solve CartPole in 50k steps
    without it, 0 of 1 with it)."""
    anneal_clip: bool = False
    """Decay ε linearly to 0 with the learning rate over --anneal-steps (rlpyt; baselines
    ppo2's Atari setting)."""
    normalize_advantages: bool = True
    """Normalise advantages to mean 0, std 1 per minibatch (over all devices)."""
    adam_eps: float = 1e-5
    """Adam ε."""

    ONLY_WITH: ClassVar[dict[str, str]] = {
        **OnPolicyConfig.ONLY_WITH,
        "anneal_clip": "anneal_steps>0",  # ε decays with the learning rate
    }

    def __post_init__(self):
        check_positive_int(self, "epochs", "num_minibatches")
        check(0.0 < self.clip_eps, "clip_eps", self.clip_eps, "> 0")
        check(self.adam_eps > 0, "adam_eps", self.adam_eps, "> 0")
        if self.lstm_size:
            check(
                self.num_envs % self.num_minibatches == 0,
                "num_minibatches",
                self.num_minibatches,
                f"a divisor of --num-envs {self.num_envs} (recurrent minibatches split envs)",
            )
        else:
            steps = self.num_envs * self.trace_len
            check(
                steps % self.num_minibatches == 0,
                "num_minibatches",
                self.num_minibatches,
                f"a divisor of --num-envs x --trace-len = {steps}",
            )
        super().__post_init__()


PRESETS: dict[str, dict] = {
    # CartPole-v1 / Acrobot-v1: the config defaults. CleanRL's ppo.py network and update
    # (separate tanh MLPs 64-64, 4 epochs x 4 minibatches, clip 0.2, GAE λ 0.95, lr annealed
    # to 0), with 8 envs x 32 steps, lr 2.5e-3 and no entropy bonus, so that CartPole is
    # solved in 50k steps, a few seconds of a 2-core CPU (docs/results/ppo-classic); 8
    # minibatches per epoch instead of 4 (issue 65): over 30 seeds the 4 solved 27, lr 2e-3 26,
    # lr 1.5e-3 27, CleanRL's entropy bonus 0.01 29, 8 epochs 30 (with 1.9x the training
    # time), 8 minibatches 30, the whole command's time unchanged (8.3 / 8.3 s against
    # 8.3 / 8.0 s, alternated; docs/results/defaults-30-seeds).
    "ppo-classic": {"total_steps": 50_000, "num_minibatches": 8},
    # CleanRL ppo_atari_envpool.py = baselines ppo2 Atari settings (Schulman et al. 2017,
    # Table 5): 8 envs x 128 steps, 4 epochs x 4 minibatches (256 frames), lr 2.5e-4 and
    # clip 0.1 annealed linearly, entropy 0.01, value 0.5, γ 0.99, λ 0.95, grad norm 0.5,
    # Nature CNN, 10M steps (40M frames). Reward clipping and episodic life: envs/.
    "ppo-atari": {
        "env": "Pong-v5",
        "total_steps": 10_000_000,
        "num_envs": 8,
        "trace_len": 128,
        "epochs": 4,
        "num_minibatches": 4,
        "lr": 2.5e-4,
        "anneal_steps": 10_000_000,
        "clip_eps": 0.1,
        "anneal_clip": True,
        "clip_value": True,
        "entropy_weight": 0.01,
        "value_weight": 0.5,
        "max_grad_norm": 0.5,
        "microbatch_traces": 32,
        "checkpoint_every": 500_000,
        "return_window": 10,
    },
    # torch-ac / rl-starter-files defaults (scripts/train.py): 16 procs x 128 frames, lr 1e-3,
    # 4 epochs, batch 256 (8 minibatches), clip 0.2 (ratio and value), entropy 0.01, γ 0.99,
    # λ 0.95, value 0.5, grad norm 0.5, Adam ε 1e-8, no lr annealing, and no advantage
    # normalisation (torch-ac has none; with it, DoorKey-5x5 never left 0 in 166k frames:
    # while every reward is 0 it scales value noise up to unit-variance advantages, and the
    # policy drifts off the rare successes; docs/results "MiniGrid"). Network: torch-ac's
    # MiniGrid conv on the image (networks.torsos.GridCNN) with the direction embedded, one
    # 64-wide layer, tanh-free heads; --text adds the mission GRU.
    "ppo-minigrid": {
        "env": "MiniGrid-DoorKey-5x5-v0",
        "total_steps": 200_000,
        "num_envs": 16,
        "trace_len": 128,
        "epochs": 4,
        "num_minibatches": 8,
        "lr": 1e-3,
        "anneal_steps": 0,
        "adam_eps": 1e-8,
        "clip_eps": 0.2,
        "clip_value": True,
        "entropy_weight": 0.01,
        "value_weight": 0.5,
        "max_grad_norm": 0.5,
        "gae_lambda": 0.95,
        "normalize_advantages": False,
        "hidden": (64,),
        "shared_torso": True,
        "checkpoint_every": 50_000,
        "eval_episodes": 100,
        "return_window": 100,
    },
    # MinAtar at the MinAtar paper's budget (issue 28; docs/results/minatar-5m): gymnax-blines'
    # PPO for its MinAtar games (RobertTLange/gymnax-blines agents/<Game>-MinAtar/ppo.yaml
    # @ 15b76af): 64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-4 constant, clip 0.2,
    # γ 0.999, λ 0.95, entropy 0.01, value 0.5, grad norm 0.5, separate ReLU MLPs 256-256 on
    # the flattened observation; without its 5% lr warm-up. Frozen for all five games after
    # one sweep on Breakout (5 seeds or 2, evaluation means): lr 2.5e-4 / 5e-4 / 1e-3 with
    # tanh 64-64 at 2M steps 6.0 / 6.4 / 6.3; tanh 64-64 at 5M 6.8 (it stays near 6-7 from
    # 1M on) against ReLU 256-256 at 2M 9.4 (12.3 and 6.4), at 4.3x the compute (5 seeds:
    # 10,062 against 43,367 aggregate env steps/s here). 5M env steps; sticky actions p = 0.1
    # (the gymnax backend's MinAtar default). Other games: --env gymnax/<Game>-MinAtar.
    "ppo-minatar": {
        "env": "gymnax/Breakout-MinAtar",
        "flatten_obs": True,
        "total_steps": 5_000_000,
        "num_envs": 64,
        "trace_len": 128,
        "epochs": 4,
        "num_minibatches": 8,
        "lr": 5e-4,
        "anneal_steps": 0,
        "clip_eps": 0.2,
        "discount": 0.999,
        "gae_lambda": 0.95,
        "entropy_weight": 0.01,
        "value_weight": 0.5,
        "max_grad_norm": 0.5,
        "hidden": (256, 256),
        "activation": "relu",
        "checkpoint_every": 1_000_000,
        "eval_episodes": 100,
        "return_window": 100,
    },
    # CleanRL ppo_continuous_action.py = baselines ppo2 MuJoCo 1M settings (Table 3): 2048
    # steps per update, 10 epochs x 32 minibatches (64 steps), lr 3e-4 annealed, clip 0.2,
    # γ 0.99, λ 0.95, no entropy bonus, separate tanh MLPs 64-64, state-independent
    # log-std, observation normalisation and reward scaling (here learner state). One
    # difference: the 2048 steps come from 8 envs x 256 steps, not 1 env x 2048 (a
    # 2048-step sequential rollout of one env ran 4-8x slower on this shared CPU).
    "ppo-mujoco": {
        "env": "HalfCheetah-v4",
        "total_steps": 1_000_000,
        "num_envs": 8,
        "trace_len": 256,
        "epochs": 10,
        "num_minibatches": 32,
        "lr": 3e-4,
        "anneal_steps": 1_000_000,
        "clip_eps": 0.2,
        "clip_value": True,
        "entropy_weight": 0.0,
        "value_weight": 0.5,
        "max_grad_norm": 0.5,
        "normalize_obs": True,
        "normalize_reward": True,
        "checkpoint_every": 100_000,
        "return_window": 10,
    },
}
