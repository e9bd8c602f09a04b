"""DQN configuration and presets: the command line of `--agent dqn`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from agents.core.config import (
    ReplayWindow,
    check,
    check_choices,
    check_floats_finite,
    check_only_with,
    check_positive_int,
    check_q_learning,
    check_trace_replay,
)
from agents.core.hooks import check_hooks
from agents.core.icm import ICM_ONLY_WITH, check_icm


@dataclass(frozen=True)
class DQNConfig(ReplayWindow):
    """DQN (Mnih et al. 2015, Nature 518) with the switches of its successors: double Q
    (van Hasselt et al. 2016, arXiv:1509.06461), dueling heads (Wang et al. 2016,
    arXiv:1511.06581), prioritized replay (Schaul et al. 2016, arXiv:1511.05952), n-step
    returns, with --distributional categorical DQN (C51, Bellemare et al. 2017,
    arXiv:1707.06887) and with --noisy NoisyNet exploration (Fortunato et al. 2018,
    arXiv:1706.10295). The defaults are the dqn-classic preset (CartPole-v1).

    Replay layout: every env writes traces of `trace_len` steps (frames stored once); a
    sampled trace comes with the `n_step - 1` steps after it, so every one of its
    `trace_len` transitions is learnt with a full n-step target. One update learns
    `batch_size` traces, i.e. `batch_size * trace_len` transitions."""

    num_envs: int = 8
    """Parallel environments (envpool batch; over all processes)."""
    trace_len: int = 4
    """Steps per rollout and per replay trace (transitions learnt per sampled trace)."""
    batch_size: int = 16
    """Traces per update (transitions per update: batch_size * trace_len)."""
    buffer_size: int = 100_000
    """Replay capacity in transitions over all envs (rounded down to whole traces)."""
    start_train_at: int = 2_000
    """Env steps before learning starts (rlpyt's min_steps_learn)."""
    replay_ratio: float = 32.0
    """Transitions learnt per env step, as rlpyt's replay_ratio: updates per env step =
    replay_ratio / (batch_size * trace_len) (Nature DQN: 32 / 4 = 8)."""
    discount: float = 0.99
    """Discount factor γ."""
    n_step: int = 3
    """Steps of the return before bootstrapping (1: DQN's one-step target)."""
    double: bool = True
    """Double Q-learning targets: the online network selects, the target one evaluates."""
    dueling: bool = True
    """Dueling head: Q = V + A − mean A."""
    distributional: bool = False
    """Categorical DQN (C51): a distribution over --num-atoms atoms in [--v-min, --v-max],
    cross-entropy loss on the projected n-step target."""
    num_atoms: int = 51
    """Atoms of the categorical support (C51: 51)."""
    v_min: float = -10.0
    """Lowest atom (C51 on Atari: −10)."""
    v_max: float = 110.0
    """Highest atom (CartPole's discounted returns are at most 100; C51 on Atari: 10)."""
    value_rescale: bool = False
    """Learn h(Q) with R2D2's value rescaling h(x) = sign(x)(√(|x|+1) − 1) + 1e-3·x
    (Pohlen et al. 2018); targets are h(r + γ h⁻¹(Q_target)). Scalar Q only."""
    huber_delta: float = 1.0
    """Huber loss threshold on the TD error (DQN's error clipping; 0: squared error)."""
    prioritized: bool = False
    """Prioritized replay: traces are drawn in proportion to their priority (per
    transition when --trace-len is 1, else per trace); a new trace gets the largest priority
    so far (Schaul et al. 2016), R2D1's its env's recent priorities."""
    priority_exponent: float = 0.6
    """α: a trace's priority is |δ|^α (Schaul et al.: 0.6)."""
    importance_exponent: float = 0.4
    """β at the start: the loss is weighted by (1 / (N·P(i)))^β, normalised by its batch
    maximum (Schaul et al.: 0.4, annealed to 1)."""
    importance_exponent_steps: int = 0
    """Env steps over which β rises linearly to 1 (rlpyt's pri_beta_steps; 0: β is held at
    --importance-exponent, as R2D2 does)."""
    priority_eta: float = 0.0
    """A trace's |δ| = η·max + (1 − η)·mean over its transitions (0: the mean)."""
    td_error_min: float = 0.0
    """Prioritized replay: the |δ| a priority is made from is raised to at least this (the
    Advanced-SAC seed's td_error_min; 0: no floor)."""
    td_error_max: float | None = None
    """Prioritized replay: the |δ| a priority is made from is cut at this (the seed's
    td_error_max; none by default)."""
    target_update_period: int = 200
    """Updates between copies of the online network to the target network."""
    lr: float = 5e-4
    """Learning rate of the optimizer."""
    anneal_steps: int = 0
    """Decay the learning rate linearly to 0 over this many env steps, counted in updates
    from --start-train-at (0: constant, as DQN and Rainbow)."""
    optimizer: Literal["adam", "rmsprop"] = "adam"
    """adam, or rmsprop: centered RMSProp (Graves 2013, arXiv:1308.0850 eq. 38-40, as
    PyTorch's `RMSprop(centered=True)`, which the MinAtar paper's DQN ran: ε is added to the
    root of the centred second moment, the moments start at 0), with optional momentum."""
    adam_eps: float = 1e-5
    """Adam ε (rlpyt/Dopamine on Atari: 0.01 / 32 = 3.125e-4)."""
    rmsprop_decay: float = 0.95
    """RMSProp's decay of its gradient and squared-gradient averages (MinAtar DQN: 0.95)."""
    rmsprop_eps: float = 0.01
    """RMSProp's ε (MinAtar DQN's "minimum squared gradient": 0.01)."""
    rmsprop_momentum: float = 0.95
    """RMSProp's heavy-ball momentum on the scaled gradient (PyTorch's `momentum`). Not the
    "gradient momentum" of DQN's and MinAtar's tables, which is the decay of the centred mean
    (--rmsprop-decay): their code runs none (`dqn-minatar` sets 0)."""
    max_grad_norm: float = 10.0
    """Clip gradients to this global L2 norm (rlpyt: 10)."""
    eps_start: float = 1.0
    """Exploration rate ε at env step 0."""
    eps_end: float = 0.02
    """Exploration rate after --eps-decay-steps."""
    eps_decay_steps: int = 10_000
    """Env steps over which ε decays linearly (Nature DQN: 1M frames = 250k agent steps)."""
    eps_decay_start: int = 0
    """Env step at which ε starts to decay (--eps-start before it; Dopamine and the MinAtar
    paper's DQN: when learning starts)."""
    eval_epsilon: float = 0.001
    """ε of the sampled evaluation (the greedy one uses 0); the Atari protocol's 0.001. With
    --noisy it acts on the noise-free means, as Dopamine's and Kaixhin/Rainbow's
    evaluations of data-efficient Rainbow do."""
    noisy: bool = False
    """NoisyNet exploration (Fortunato et al. 2018, arXiv:1706.10295) instead of ε-greedy:
    the Q head's linear layers get learnt factorised Gaussian noise (σ0 = --noisy-std; the
    torso's layers stay deterministic, where the paper and Rainbow make every linear layer,
    the Nature CNN's 512 units included, noisy; with --head-hidden and --cnn data-efficient
    every linear layer is), drawn anew every acting step (independently per env) and every
    update (online and target networks independently). Training's ε is 0: the --eps-*
    schedule is not used (an error when given with --noisy; presets that set it still
    combine with it). Greedy evaluation uses the noise-free means, sampled evaluation the
    means ε-greedily with --eval-epsilon."""
    noisy_std: float = 0.5
    """NoisyNet's σ0: each noisy layer's σ starts at σ0/√(inputs) (Fortunato et al.: 0.5;
    data-efficient Rainbow: 0.1)."""
    hidden: tuple[int, ...] = (128, 128)
    """MLP torso widths for vector or dict observations, and of ICM's networks (images: a CNN
    of fixed widths, --cnn for frame stacks; refused for them)."""
    cnn: Literal["nature", "data-efficient"] = "nature"
    """The torso of frame-stack observations (Atari): the Nature CNN (3 convolutions and 512
    units), or data-efficient Rainbow's (two 5x5 stride-5 convolutions, networks.DataEfficientCNN;
    van Hasselt et al. 2019, arXiv:1906.05243)."""
    head_hidden: int = 0
    """Units of a hidden layer (ReLU) of the head's own in each stream (the dueling value and
    advantage streams, or the one Q stream) before its output layer; noisy with --noisy
    (data-efficient Rainbow: 256). 0: the streams are single linear layers on the torso's
    features."""
    layer_norm: bool = False
    """A LayerNorm before every ReLU of the torso (networks.make_torso): it keeps Q-learning's
    values from diverging (Gallici et al. 2024, arXiv:2407.04811, §4; PQN relies on it)."""
    microbatch_traces: int = 0
    """Traces per gradient chunk inside an update (0: no split). On XLA:CPU chunks of about
    32 frames are fastest."""
    network: str | None = None
    """Hook `module:function`: function(obs_spec) -> a flax module mapping a batch of
    observations to features [B, F], the torso under the Q head (dueling, noisy or C51 as
    set) in place of the built-in MLP or CNN; checked before anything compiles. Recorded in
    config.json, never imported from a run folder: --resume and evaluate need it again."""
    icm_coef: float = 0.0
    """Curiosity by the intrinsic curiosity module (Pathak et al. 2017, arXiv:1705.05363):
    the weight of ICM's intrinsic reward (its forward model's error on each sampled
    transition, divided by a running standard deviation of the errors) added to the reward
    of every step of the sampled traces before the targets (0: off; agents/core/icm.py).
    Vector observations only."""
    icm_beta: float = 0.2
    """With --icm-coef: β of ICM's loss (1 − β)·inverse + β·forward (the paper's 0.2)."""
    icm_lr: float = 1e-3
    """With --icm-coef: Adam learning rate of ICM's encoder, inverse and forward models, one
    step per update on the learnt transitions (the paper's 1e-3)."""
    icm_features: int = 64
    """With --icm-coef: size of ICM's feature embedding φ(s) (the paper's 288 after its
    convolutions on pixels)."""

    # Flags that do nothing without their switch (agents.core.config.check_only_with). The ε
    # schedule is ε-greedy's: presets that set it still combine with --noisy.
    ONLY_WITH: ClassVar[dict[str, str]] = {
        **dict.fromkeys(
            ("priority_exponent", "importance_exponent", "importance_exponent_steps",
             "priority_eta", "td_error_min", "td_error_max"),
            "prioritized",
        ),
        **dict.fromkeys(("num_atoms", "v_min", "v_max"), "distributional"),
        "huber_delta": "!distributional",  # C51's loss is a cross-entropy
        **dict.fromkeys(
            ("eps_start", "eps_end", "eps_decay_steps", "eps_decay_start"), "!noisy"
        ),
        "noisy_std": "noisy",
        **dict.fromkeys(("rmsprop_decay", "rmsprop_eps", "rmsprop_momentum"), "optimizer=rmsprop"),
        "adam_eps": "optimizer=adam",
        **ICM_ONLY_WITH,
    }  # fmt: skip
    # Flags of one kind of env only (engine.preflight.check_env_only).
    ENV_ONLY: ClassVar[dict[str, str]] = {"cnn": "frames", "hidden": "mlp"}
    # The built-in torso's flags, refused beside --network (engine.preflight.check_torso_fields;
    # --hidden also sizes ICM's networks, so it stays).
    TORSO_FIELDS: ClassVar[tuple[str, ...]] = ("cnn", "layer_norm")
    # The hook fields and the arguments each is called with (agents.core.hooks).
    HOOKS: ClassVar[dict[str, tuple[str, ...]]] = {"network": ("obs_spec",)}

    def __post_init__(self):
        check_positive_int(
            self, "num_envs", "trace_len", "batch_size", "buffer_size", "n_step",
            "target_update_period", "num_atoms",
        )  # fmt: skip
        check(self.head_hidden >= 0, "head_hidden", self.head_hidden, ">= 0")
        check(self.noisy_std > 0, "noisy_std", self.noisy_std, "> 0")
        check_choices(self)
        check_floats_finite(self)
        check_q_learning(self)
        check(self.num_atoms >= 2, "num_atoms", self.num_atoms, ">= 2")
        check(self.v_min < self.v_max, "v_min", self.v_min, f"< --v-max {self.v_max}")
        check(
            not (self.value_rescale and self.distributional),
            "value_rescale", self.value_rescale, "off with --distributional (scalar Q only)",
        )  # fmt: skip
        check(0.0 <= self.rmsprop_decay < 1.0, "rmsprop_decay", self.rmsprop_decay, "in [0, 1)")
        check(self.rmsprop_eps > 0, "rmsprop_eps", self.rmsprop_eps, "> 0")
        check(
            0.0 <= self.rmsprop_momentum < 1.0, "rmsprop_momentum", self.rmsprop_momentum,
            "in [0, 1)",
        )  # fmt: skip
        # the sampled window reaches `lookahead` steps past a trace (ReplayWindow): the
        # replay needs that many more whole traces per env
        check_trace_replay(self, self.min_traces_per_env)
        check_icm(self)
        check_only_with(self)  # last: a value out of range is named as such first
        if self.network is not None:  # --network (agents.core.hooks)
            check_hooks(self)


PRESETS: dict[str, dict] = {
    # CartPole-v1: the config defaults, our choices for a 2-core CPU: double + dueling + 3-step
    # DQN with an MLP of 128x128, 8 envs, 64 transitions per update, one update per 2 env steps
    # (replay ratio 32), Adam 5e-4, ε 1 -> 0.02 over 10k steps, a replay of 100k; 150k steps
    # with the learning rate decayed linearly to 0 over them; the target copied every 500
    # updates (the config's 200 before issue 65, below). Over 10-seed populations
    # (docs/results/defaults-10-seeds), with the copy every 200: 19 of seeds 0-19 solved,
    # against 18 with a constant rate over 100k steps (and 7 of 10 with the decay over 100k,
    # 9 of 10 over 200k, 8 of 10 with lr 1e-3, 9 of 10 with 128-transition batches).
    # Over 30 seeds (issue 65, docs/results/defaults-30-seeds) that default solved 27: in the
    # failing seeds Q diverged (seed 13: mean Q 288 at 100k steps where CartPole's discounted
    # return is at most 100, then the policy collapsed). Copying the target every 500 updates
    # instead of 200 keeps Q under 100 and solves 29 of 30 at no cost; 1,000 solved 16 (too
    # slow to learn in 150k steps), a LayerNorm torso (--layer-norm, PQN's remedy) 29, and
    # lr 2.5e-4 diverged on seed 13 (mean Q 6,376).
    "dqn-classic": {"total_steps": 150_000, "anneal_steps": 150_000, "target_update_period": 500},
    # Nature DQN (Mnih et al. 2015, Extended Data Table 1) with rlpyt's atari_dqn settings
    # and double + dueling + 3-step returns as the issue asks. Nature: 32 transitions per
    # update (here 8 traces x 4 steps), one update per 4 agent steps (rlpyt's replay ratio
    # 8), ε 1 -> 0.01 (Nature: 0.1; rlpyt and Dopamine: 0.01) over 1M frames = 250k agent
    # steps, held at 1 for the first 50k steps, when learning starts (rlpyt's
    # min_steps_learn), as Nature's code and Dopamine's warm-up do (a run that changes
    # --start-train-at sets --eps-decay-start with it), γ = 0.99, error clipping = Huber
    # loss with δ = 1.
    # Target copy every 2,000 updates = 8,000 agent steps (Dopamine's 8,000 training steps;
    # Nature counts 10,000 updates). Optimizer: Adam, lr 2.5e-4 and ε 0.01/32 (rlpyt's
    # choice replacing Nature's RMSProp), gradient norm clipped at 10 (rlpyt). Scaled for
    # this machine: 8 envs and a replay of 200k transitions (Nature: 1M; about 1.4 GB here
    # with frames stored once; --buffer-size 1000000 restores it).
    "dqn-atari": {
        "env": "Pong-v5",
        "total_steps": 2_000_000,
        "num_envs": 8,
        "trace_len": 4,
        "batch_size": 8,
        "buffer_size": 200_000,
        "start_train_at": 50_000,
        "replay_ratio": 8.0,
        "discount": 0.99,
        "n_step": 3,
        "double": True,
        "dueling": True,
        "target_update_period": 2_000,
        "lr": 2.5e-4,
        "adam_eps": 3.125e-4,
        "max_grad_norm": 10.0,
        "huber_delta": 1.0,
        "eps_start": 1.0,
        "eps_end": 0.01,
        "eps_decay_start": 50_000,
        "eps_decay_steps": 250_000,
        "microbatch_traces": 8,
        "checkpoint_every": 200_000,
        "return_window": 10,
    },
    # The MinAtar paper's DQN (Young & Tian 2019, arXiv:1903.03176, §5, with the settings of
    # its repository's examples/dqn.py): its network (one 3x3 conv of 16 filters, 128 hidden
    # units: the MinAtar CNN, picked from the observation shape), batch 32, one update per
    # env step, replay 100k, learning from 5k steps, target copy every 1,000 updates, γ 0.99,
    # Huber loss, one-step targets without double Q or dueling, centered RMSProp without
    # momentum (lr 2.5e-4, ρ 0.95, ε 0.01; the paper's "gradient momentum 0.95" is the decay
    # of the centred mean, as in DQN's Nature table: its script passed no momentum to torch's
    # RMSprop until 2024, kenjyoung/MinAtar PR #37), no gradient clipping, ε-greedy
    # with ε = 1 until learning starts, then linearly to 0.1 over the next 100k frames, and
    # 5M frames (= env steps: MinAtar has no frame skip), sticky actions p = 0.1 (the gymnax
    # backend's default for MinAtar ids). Other games: --env gymnax/<Game>-MinAtar.
    "dqn-minatar": {
        "env": "gymnax/Breakout-MinAtar",
        "total_steps": 5_000_000,
        "num_envs": 1,
        "trace_len": 1,
        "batch_size": 32,
        "replay_ratio": 32.0,
        "buffer_size": 100_000,
        "start_train_at": 5_000,
        "discount": 0.99,
        "n_step": 1,
        "double": False,
        "dueling": False,
        "huber_delta": 1.0,
        "target_update_period": 1_000,
        "optimizer": "rmsprop",
        "lr": 2.5e-4,
        "rmsprop_decay": 0.95,
        "rmsprop_eps": 0.01,
        "rmsprop_momentum": 0.0,
        "max_grad_norm": 1e9,
        "eps_start": 1.0,
        "eps_end": 0.1,
        "eps_decay_steps": 100_000,
        "eps_decay_start": 5_000,
        "checkpoint_every": 250_000,
        "return_window": 100,
        "eval_episodes": 100,  # the grid's `final` (the other agents' MinAtar presets too)
    },
    # Data-efficient Rainbow (DER; van Hasselt et al. 2019, "When to use parametric models in
    # reinforcement learning?", arXiv:1906.05243, Appendix F's table of the changes it makes
    # to Rainbow) under the Atari 100k protocol (--protocol atari100k, envs/protocols.py):
    # Rainbow's parts (double, dueling, C51 with 51 atoms on [−10, 10], prioritized replay
    # with α 0.5 and β 0.4 → 1 over training, NoisyNet without ε) with DER's changes: the
    # data-efficient network (two 5x5 stride-5 convolutions, then 256 noisy hidden units per
    # dueling stream), σ0 0.1, 20-step returns, one update of 32 transitions per env step
    # (replay ratio 32 with 1-step traces), learning from 1,600 steps, the target copied
    # every 2,000 updates, Adam lr 1e-4 with ε 1.5e-4, a replay holding all 100k steps.
    # One env (the protocol's agents act in one). Gradient norm clipped at 10 and the
    # settings DER's table leaves out follow Kaixhin/Rainbow's README for DER (its
    # --norm-clip default is 10). Dopamine's DER.gin uses 10-step returns "as done by SPR";
    # the DER paper, and this preset, use 20. Evaluation: noise-free means, ε 0.001
    # (Dopamine's epsilon_eval), over the protocol's 100 episodes.
    "der": {
        "env": "Pong-v5",
        "protocol": "atari100k",
        "total_steps": 100_000,
        "eval_episodes": 100,
        "num_envs": 1,
        "trace_len": 1,
        "batch_size": 32,
        "replay_ratio": 32.0,
        "buffer_size": 100_000,
        "start_train_at": 1_600,
        "discount": 0.99,
        "n_step": 20,
        "double": True,
        "dueling": True,
        "distributional": True,
        "num_atoms": 51,
        "v_min": -10.0,
        "v_max": 10.0,
        "noisy": True,
        "noisy_std": 0.1,
        "cnn": "data-efficient",
        "head_hidden": 256,
        "prioritized": True,
        "priority_exponent": 0.5,
        "importance_exponent": 0.4,
        "importance_exponent_steps": 100_000,
        "target_update_period": 2_000,
        "lr": 1e-4,
        "adam_eps": 1.5e-4,
        "max_grad_norm": 10.0,
        "eval_epsilon": 0.001,
        "checkpoint_every": 20_000,
        "return_window": 10,
    },
    # C51 (Bellemare et al. 2017, §5): 51 atoms on [−10, 10], Adam lr 2.5e-4 with ε 0.01/32,
    # otherwise the dqn-atari settings above (double selection and dueling as in Rainbow,
    # 3-step as dqn-atari); rlpyt's atari_catdqn config uses the same support and optimizer.
    "c51-atari": {
        "env": "Pong-v5",
        "total_steps": 2_000_000,
        "num_envs": 8,
        "trace_len": 4,
        "batch_size": 8,
        "buffer_size": 200_000,
        "start_train_at": 50_000,
        "replay_ratio": 8.0,
        "discount": 0.99,
        "n_step": 3,
        "double": True,
        "dueling": True,
        "distributional": True,
        "num_atoms": 51,
        "v_min": -10.0,
        "v_max": 10.0,
        "target_update_period": 2_000,
        "lr": 2.5e-4,
        "adam_eps": 3.125e-4,
        "max_grad_norm": 10.0,
        "eps_start": 1.0,
        "eps_end": 0.01,
        "eps_decay_start": 50_000,
        "eps_decay_steps": 250_000,
        "microbatch_traces": 8,
        "checkpoint_every": 200_000,
        "return_window": 10,
    },
}
