"""Observation torsos: Nature CNN for Atari frames, an MLP for vector observations, and for
pytree (dict) observations one encoder per key, concatenated (`DictEncoder`).

`make_torso(obs_spec, hidden, text=...)` is the one place that picks a torso from an env's
observation spec (`EnvSpec.obs_spec`, or a plain shape for array observations); every
network calls it, so an agent takes dict observations without knowing about them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from envs.core import ArraySpec, as_obs_spec, obs_leaves_with_paths


def frames_nhwc(obs, channels_first: bool = True):
    """uint8 frame stacks `[..., C, H, W]` (envpool's; `[..., H, W, C]` when not
    `channels_first`) as float32 `[N, H, W, C]` in [0, 1], the leading axes flattened: the
    input of the frame torsos, scaled inside so that the replay and the actor keep uint8."""
    x = obs.reshape((-1, *obs.shape[-3:]))
    if channels_first:
        x = jnp.transpose(x, (0, 2, 3, 1))
    return x.astype(jnp.float32) / 255.0


class NatureCNN(nn.Module):
    """The DQN torso (Mnih et al. 2015): 3 convolutions and a dense layer.

    Input: uint8 frames `[..., C, 84, 84]` channel-first, as envpool returns them (C = stack
    of 4). They are scaled to [0, 1] inside the module, so the replay and the actor keep
    uint8 and the host never converts.

    `layer_norm`: a LayerNorm before every ReLU (over the channels of a convolution's
    output, the features of the dense layer), as PQN's networks (Gallici et al. 2024,
    arXiv:2407.04811, §4: normalisation in place of a target network).
    """

    hidden: int = 512
    channels_first: bool = True
    layer_norm: bool = False

    @nn.compact
    def __call__(self, obs):
        lead, x = obs.shape[:-3], frames_nhwc(obs, self.channels_first)
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        act = _normed_relu(self.layer_norm)
        x = act(nn.Conv(32, (8, 8), (4, 4), padding="VALID", kernel_init=init)(x))
        x = act(nn.Conv(64, (4, 4), (2, 2), padding="VALID", kernel_init=init)(x))
        x = act(nn.Conv(64, (3, 3), (1, 1), padding="VALID", kernel_init=init)(x))
        x = x.reshape((x.shape[0], -1))
        x = act(nn.Dense(self.hidden, kernel_init=init)(x))
        return x.reshape((*lead, self.hidden))


class TiledConv(nn.Module):
    """`nn.Conv(features, kernel_size, strides=kernel_size, padding="VALID")` on NHWC images
    (the same `kernel` `[kh, kw, C, F]` and `bias` parameters), computed as what it is when
    the stride equals the kernel: the image cut into non-overlapping tiles (a reshape; the
    last rows and columns that fill no whole tile are dropped, as VALID drops them) times the
    kernel as a matrix. No convolution is left: on XLA:CPU its weight gradient is a matmul,
    which stays fast inside rolled loops (PERF-NOTES)."""

    features: int
    kernel_size: tuple[int, int]
    kernel_init: Any = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, x):
        kh, kw = self.kernel_size
        n, rows, cols, c = x.shape
        h, w = rows // kh, cols // kw
        if not h or not w:
            raise ValueError(f"TiledConv: a {rows}x{cols} image holds no {kh}x{kw} tile")
        kernel = self.param("kernel", self.kernel_init, (kh, kw, c, self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        tiles = x[:, : h * kh, : w * kw, :].reshape((n, h, kh, w, kw, c))
        tiles = jnp.transpose(tiles, (0, 1, 3, 2, 4, 5)).reshape((n, h, w, kh * kw * c))
        return tiles @ kernel.reshape(kh * kw * c, self.features) + bias.reshape((1, 1, 1, -1))


class DataEfficientCNN(nn.Module):
    """Data-efficient Rainbow's torso (van Hasselt et al. 2019, "When to use parametric
    models in reinforcement learning?", arXiv:1906.05243, Appendix; the "data-efficient"
    architecture of Kaixhin/Rainbow): two 5x5 convolutions of stride 5 (32, then 64
    filters, VALID), each followed by a ReLU, flattened: 64·3·3 = 576 features for 84x84
    frames. No dense layer here: DER's 256 hidden units belong to each dueling stream
    (`networks.QHead`'s `head_hidden`).

    Input as `NatureCNN`'s: uint8 frames `[..., C, 84, 84]` channel-first, scaled to [0, 1]
    inside. With stride = kernel the convolutions are `TiledConv` on XLA:CPU (a reshape and
    a matmul, the same parameters and outputs as `nn.Conv`), so this torso is not slow inside
    rolled loops and an agent built on it runs many iterations per device program there."""

    channels_first: bool = True
    filters: tuple[int, ...] = (32, 64)

    @nn.compact
    def __call__(self, obs):
        lead, x = obs.shape[:-3], frames_nhwc(obs, self.channels_first)
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        for i, width in enumerate(self.filters):
            if jax.default_backend() == "cpu":
                conv = TiledConv(width, (5, 5), kernel_init=init, name=f"Conv_{i}")
            else:
                conv = nn.Conv(width, (5, 5), (5, 5), "VALID", kernel_init=init, name=f"Conv_{i}")
            x = nn.relu(conv(x))
        return x.reshape((*lead, -1))


# The torsos of frame-stack observations (`make_torso`'s `cnn`).
FRAME_CNNS = ("nature", "data-efficient")


ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


def _normed_relu(layer_norm: bool, activation: str = "relu"):
    """The activation, after a LayerNorm (flax's: over the last axis, learnt scale and bias)
    when `layer_norm`. Called inside a compact module, so each use makes its own LayerNorm."""
    act = ACTIVATIONS[activation]
    return (lambda x: act(nn.LayerNorm()(x))) if layer_norm else act


class MLP(nn.Module):
    """An MLP torso for vector observations `[..., D]` (ReLU, or tanh as in the PPO papers'
    MuJoCo and classic-control networks); `layer_norm`: Dense → LayerNorm → activation, as
    PQN's (Gallici et al. 2024, arXiv:2407.04811)."""

    hidden: Sequence[int] = (64, 64)
    activation: str = "relu"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, obs):
        x = obs.astype(jnp.float32)
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        act = _normed_relu(self.layer_norm, self.activation)
        for width in self.hidden:
            x = act(nn.Dense(width, kernel_init=init)(x))
        return x


class GridCNN(nn.Module):
    """torch-ac's MiniGrid image encoder (rl-starter-files `ACModel`): Conv(16, 2x2) → ReLU →
    MaxPool(2x2) → Conv(32, 2x2) → ReLU → Conv(64, 2x2) → ReLU, flattened (64 features for
    MiniGrid's 7x7 view).

    Input: `[..., H, W, C]` channel-last, taken as the numbers they are (MiniGrid's image is
    symbolic: object, colour and state indices, not pixels), cast to float32.
    """

    channels: Sequence[int] = (16, 32, 64)

    @nn.compact
    def __call__(self, image):
        lead = image.shape[:-3]
        x = image.reshape((-1, *image.shape[-3:])).astype(jnp.float32)
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        for i, width in enumerate(self.channels):
            x = nn.relu(nn.Conv(width, (2, 2), padding="VALID", kernel_init=init)(x))
            if i == 0:
                x = nn.max_pool(x, (2, 2), strides=(2, 2), padding="VALID")
        return x.reshape((*lead, -1))


class PatchConv(nn.Module):
    """`nn.Conv(features, kernel_size, padding="VALID")` (stride 1, NHWC, the same `kernel`
    `[kh, kw, C, F]` and `bias` parameters) computed as the image's patches `[N, H', W',
    C·kh·kw]` times the kernel as a matrix: on XLA:CPU its weight gradient is a matmul, which
    stays fast inside rolled loops."""

    features: int
    kernel_size: tuple[int, int]
    padding: str = "VALID"
    kernel_init: Any = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, x):
        if self.padding != "VALID":
            raise ValueError(f"PatchConv supports VALID padding only, got {self.padding!r}")
        kh, kw = self.kernel_size
        c = x.shape[-1]
        kernel = self.param("kernel", self.kernel_init, (kh, kw, c, self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        # The patches as kh·kw shifted views side by side on the channel axis, ordered
        # (kh, kw, C) as the kernel's own rows: slicing is a copy, where
        # `lax.conv_general_dilated_patches` is a convolution with a one-hot kernel, which
        # XLA:CPU ran at about half the time of a whole MinAtar DQN update
        # (docs/results/zen5-remeasure). Views placed whole (C innermost), not interleaved
        # channel by channel, make the copy contiguous runs: MinAtar DQN, 5 members, 1.80
        # against 2.12 ms an iteration (docs/results/population-lockstep).
        h, w = x.shape[-3] - kh + 1, x.shape[-2] - kw + 1
        views = [x[..., i : i + h, j : j + w, :] for i in range(kh) for j in range(kw)]
        patches = jnp.concatenate(views, axis=-1)
        return patches @ kernel.reshape(kh * kw * c, self.features) + bias.reshape((1, 1, 1, -1))


class MinAtarCNN(nn.Module):
    """The MinAtar network (Young & Tian 2019, "MinAtar: An Atari-Inspired Testbed for
    Thorough and Reproducible Reinforcement Learning Experiments", §4): one 3x3 convolution
    with 16 filters, stride 1 (VALID), ReLU, flattened, then a dense layer of 128, ReLU.

    Input: `[..., H, W, C]` channel-last, as MinAtar and gymnasium hand out small images
    (MinAtar: 10x10, one boolean channel per object kind); cast to float32 unscaled.

    On XLA:CPU the convolution is computed as image patches times the kernel matrix
    (`PatchConv`, the same parameters as `nn.Conv`): inside a rolled loop (the iteration
    program's scan, a `fori_loop` of updates) XLA:CPU's convolution weight-gradient is slow
    (PERF-NOTES), and the patch form keeps this torso out of that trap, so agents on MinAtar
    run many iterations per program and populations vmap it. Other backends use `nn.Conv`.

    `layer_norm`: a LayerNorm before each ReLU (over the conv's 16 channels at every pixel,
    then over the 128 features), PQN's MinAtar network (Gallici et al. 2024).
    """

    filters: int = 16
    hidden: int = 128
    layer_norm: bool = False

    @nn.compact
    def __call__(self, image):
        lead = image.shape[:-3]
        x = image.reshape((-1, *image.shape[-3:])).astype(jnp.float32)
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        conv = PatchConv if jax.default_backend() == "cpu" else nn.Conv
        act = _normed_relu(self.layer_norm)
        x = act(conv(self.filters, (3, 3), padding="VALID", kernel_init=init, name="Conv_0")(x))
        x = x.reshape((x.shape[0], -1))
        x = act(nn.Dense(self.hidden, kernel_init=init)(x))
        return x.reshape((*lead, self.hidden))


class TokenGRU(nn.Module):
    """torch-ac's `--text` encoder: word embeddings (32) and a GRU (128) over a mission's word
    ids `[..., L]` (0 = padding, `envs.text`); returns the GRU state after the last real word
    `[..., hidden]` (padding leaves the state unchanged, so the result does not depend on
    `L`; torch-ac also runs over its padding)."""

    vocab_size: int
    embed_dim: int = 32
    hidden: int = 128

    @nn.compact
    def __call__(self, tokens):
        lead, length = tokens.shape[:-1], tokens.shape[-1]
        ids = tokens.reshape((-1, length)).astype(jnp.int32)
        words = nn.Embed(self.vocab_size, self.embed_dim, name="embed")(ids)  # [N, L, E]
        cell = nn.GRUCell(self.hidden, name="gru")
        carry = jnp.zeros((ids.shape[0], self.hidden), jnp.float32)

        def step(cell, carry, inputs):
            x_t, real_t = inputs
            new, _ = cell(carry, x_t)
            carry = jnp.where(real_t[:, None], new, carry)
            return carry, None

        scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False})
        carry, _ = scan(cell, carry, (jnp.swapaxes(words, 0, 1), (ids != 0).T))
        return carry.reshape((*lead, self.hidden))


def _module_name(path: str) -> str:
    """A submodule name for a leaf path (`['image']` → `image`)."""
    return re.sub(r"[^0-9A-Za-z_]+", "_", path).strip("_") or "obs"


def _match_obs(obs: Any, leaves) -> tuple[dict[str, Any], tuple[int, ...]]:
    """`obs`'s leaves by path and their common leading axes, after checking them against
    `leaves` (`(path, ArraySpec)` pairs); a one-line ValueError names a missing or unexpected
    key, or a leaf of the wrong shape."""
    flat, _ = jax.tree_util.tree_flatten_with_path(obs)
    given = {jax.tree_util.keystr(path): x for path, x in flat}
    want = [path for path, _ in leaves]
    missing = [p for p in want if p not in given]
    extra = [p for p in given if p not in want]
    if missing or extra:
        raise ValueError(
            f"observation does not match the network's obs_spec: missing "
            f"{', '.join('obs' + p for p in missing) or 'nothing'}; unexpected "
            f"{', '.join('obs' + p for p in extra) or 'nothing'}"
        )
    lead = None
    for path, spec in leaves:
        x, n = given[path], len(spec.shape)
        if x.ndim < n or tuple(x.shape[x.ndim - n :]) != spec.shape:
            raise ValueError(
                f"observation leaf obs{path} has shape {x.shape}, expected [..., "
                f"{', '.join(map(str, spec.shape))}]"
            )
        this = tuple(x.shape[: x.ndim - n])
        if lead is not None and this != lead:
            raise ValueError(f"observation leaf obs{path} has leading axes {this}, others {lead}")
        lead = this
    assert lead is not None
    return given, lead


def convolves_in_loops_slowly(obs_spec: Any, cnn: str = "nature") -> bool:
    """Whether the torso `make_torso` builds for `obs_spec` has a convolution whose weight
    gradient XLA:CPU runs slowly inside a rolled loop (PERF-NOTES): the Nature CNN and the
    dict encoder's GridCNN (`nn.Conv`); not the MinAtar CNN (`PatchConv` on CPU). The agents
    keep such torsos out of rolled loops on CPU (`convolves_on_cpu`).
    `cnn`: `make_torso`'s; the data-efficient CNN's convolutions are `TiledConv`s there."""
    shape = _array_shape(obs_spec)
    if shape is not None:
        return len(shape) == 3 and min(shape[1:]) >= 36 and cnn == "nature"
    leaves = obs_leaves_with_paths(as_obs_spec(obs_spec, "obs_spec"))
    return any(len(s.shape) == 3 and s.num_values is None for _, s in leaves)


def convolves_on_cpu(spec, config) -> bool:
    """Whether an agent's torso has a convolution that XLA:CPU runs slowly inside a rolled
    loop or vmapped into a grouped convolution (PERF-NOTES; the Nature CNN and MiniGrid's
    conv, not the MinAtar CNN: `convolves_in_loops_slowly`) and XLA runs on the CPU;
    PPO's `update_loop="auto"`, a population's member loop and the one-iteration path avoid
    those loops. `spec`: the env's `EnvSpec`; the torso is the frame torso `config.cnn`
    picks, where it has one."""
    slow = convolves_in_loops_slowly(spec.obs_spec, getattr(config, "cnn", "nature"))
    return slow and jax.default_backend() == "cpu"


def _is_large_image(spec: ArraySpec) -> bool:
    # The Nature CNN's first 8x8 stride-4 convolution needs at least 36x36 pixels.
    return len(spec.shape) == 3 and min(spec.shape[:2]) >= 36


class DictEncoder(nn.Module):
    """One encoder per leaf of a pytree observation, concatenated, then an MLP.

    Per leaf (`envs.ArraySpec`):
    - word ids (`tokens`): `TokenGRU` when `text` is on, else left out (torch-ac reads the
      mission only with `--text`);
    - an integer category (`num_values`, shape `()`, e.g. MiniGrid's `direction`): an
      embedding of `embed_dim`;
    - integer categories with a shape (MultiDiscrete): one-hot, flattened;
    - an image `[H, W, C]`: `GridCNN` (torch-ac's MiniGrid conv) below 36x36, the Nature CNN
      (channel-last, scaled from uint8) from 36x36 on;
    - anything else (vectors, scalars): flattened to float32; all such leaves are
      concatenated.
    The concatenation goes through `MLP(hidden)` (nothing when `hidden` is empty).

    `leaves` is `envs.obs_leaves_with_paths(obs_spec)` (what `make_torso` passes). The
    observation must have exactly these leaves, with any leading axes; a missing or extra
    key raises a ValueError naming it.
    """

    leaves: tuple[tuple[str, ArraySpec], ...]
    hidden: Sequence[int] = (64,)
    text: bool = False
    embed_dim: int = 8

    @nn.compact
    def __call__(self, obs):
        given, lead = _match_obs(obs, self.leaves)
        features, vectors = [], []
        for path, spec in self.leaves:
            x, n = given[path], len(spec.shape)
            name = _module_name(path)
            if spec.tokens:
                if self.text:
                    features.append(TokenGRU(spec.num_values, name=name)(x))
            elif spec.num_values is not None and n == 0:
                features.append(nn.Embed(spec.num_values, self.embed_dim, name=name)(x))
            elif spec.num_values is not None:
                one_hot = jax.nn.one_hot(x, spec.num_values, dtype=jnp.float32)
                vectors.append(one_hot.reshape((*lead, -1)))
            elif n == 3 and _is_large_image(spec):
                features.append(NatureCNN(channels_first=False, name=name)(x))
            elif n == 3:
                features.append(GridCNN(name=name)(x))
            else:
                vectors.append(x.astype(jnp.float32).reshape((*lead, int(np.prod(spec.shape)))))
        if not features and not vectors:
            raise ValueError(
                "every observation leaf was left out (word ids without text=True); nothing "
                "to encode"
            )
        x = jnp.concatenate(features + vectors, axis=-1)
        init = nn.initializers.orthogonal(jnp.sqrt(2.0))
        for width in self.hidden:
            x = nn.relu(nn.Dense(width, kernel_init=init)(x))
        return x


def _array_shape(obs_spec: Any) -> tuple[int, ...] | None:
    """The shape of an array observation spec (a shape tuple, an ArraySpec or a
    ShapeDtypeStruct-like leaf); None for a pytree."""
    if isinstance(obs_spec, tuple) and all(isinstance(d, int | np.integer) for d in obs_spec):
        return tuple(int(d) for d in obs_spec)
    spec = as_obs_spec(obs_spec, "obs_spec")
    return spec.shape if isinstance(spec, ArraySpec) else None


def make_torso(
    obs_spec: Any,
    hidden: Sequence[int] = (64, 64),
    *,
    text: bool = False,
    activation: str = "relu",
    layer_norm: bool = False,
    cnn: str = "nature",
) -> nn.Module:
    """The torso for an observation spec: the Nature CNN for frame stacks `[C, H, W]` of at
    least 36x36 pixels (envpool's Atari: `[4, 84, 84]`), the MinAtar CNN for smaller images
    `[H, W, C]` (channel-last, as gymnasium's MinAtar gives them: `[10, 10, C]`), an MLP for
    vectors `[D]`, a `DictEncoder` (one encoder per key) for a pytree of `ArraySpec`s.

    Args:
      obs_spec: `EnvSpec.obs_spec`, or an array observation's shape tuple.
      hidden: MLP widths (for vectors; for a pytree, after the concatenation).
      text: encode word-id leaves (MiniGrid's mission) with a GRU; off, they are left out.
      activation: the vector MLP's activation ("relu" or "tanh").
      layer_norm: a LayerNorm before every activation of the torso (array observations).
      cnn: the torso of frame stacks: "nature" (`NatureCNN`) or "data-efficient"
        (`DataEfficientCNN`, data-efficient Rainbow's); an error for other observations
        when not "nature".
    """
    if cnn not in FRAME_CNNS:
        raise ValueError(f"cnn must be one of {', '.join(FRAME_CNNS)}, got {cnn!r}")
    shape = _array_shape(obs_spec)
    frames = shape is not None and len(shape) == 3 and min(shape[1:]) >= 36
    if cnn != "nature" and not frames:
        raise ValueError(
            f"cnn={cnn!r} is a torso for frame stacks [C, H, W] (Atari's); the observations "
            f"here are {'a pytree' if shape is None else f'of shape {shape}'}"
        )
    if cnn == "data-efficient":
        if layer_norm:
            raise ValueError("layer_norm is not available for the data-efficient CNN")
        return DataEfficientCNN()
    if shape is None:
        if layer_norm:
            raise ValueError("layer_norm is not available for dict observations' encoders")
        leaves = tuple(obs_leaves_with_paths(as_obs_spec(obs_spec, "obs_spec")))
        return DictEncoder(leaves, tuple(hidden), text=text)
    if len(shape) == 3 and min(shape[1:]) >= 36:
        return NatureCNN(layer_norm=layer_norm)
    if len(shape) == 3 and max(shape[:2]) < 36:
        return MinAtarCNN(layer_norm=layer_norm)
    if len(shape) == 1:
        return MLP(tuple(hidden), activation, layer_norm)
    raise ValueError(
        f"no torso for observations of shape {shape}: expected a frame stack [C, H, W] with "
        "H, W >= 36, a small image [H, W, C] with H, W < 36, or a vector [D]"
    )


def check_obs(obs: Any, obs_spec: Any, lead: int | None = None) -> tuple[int, ...]:
    """The leading axes of `obs` (`lead` of them when given) after checking it against the
    network's `obs_spec` (a shape tuple or an observation spec); a one-line ValueError
    otherwise. Pytree observations are checked leaf by leaf by `DictEncoder`."""
    shape = _array_shape(obs_spec)
    if shape is None:
        _, got = _match_obs(obs, obs_leaves_with_paths(as_obs_spec(obs_spec)))
    else:
        if not hasattr(obs, "shape"):
            raise ValueError(f"the network takes array observations of shape {shape}, got {obs!r}")
        n = len(shape)
        if obs.ndim < n or tuple(obs.shape[obs.ndim - n :]) != shape:
            raise ValueError(
                f"observation shape {obs.shape} does not end with the network's obs_shape {shape}"
            )
        got = tuple(obs.shape[: obs.ndim - n])
    if lead is not None and len(got) != lead:
        what = "obs_spec leaves" if shape is None else f"obs_shape {shape}"
        raise ValueError(
            f"observation has leading axes {got}, expected {lead} before the network's "
            f"{what} (time-major [T, B, *obs_shape])"
        )
    return got
