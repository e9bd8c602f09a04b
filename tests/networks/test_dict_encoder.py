"""The dict-observation torso: torso selection, torch-ac's MiniGrid conv and the mission GRU
against NumPy written from their definitions, and the errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import ArraySpec
from networks import ACERNetwork
from networks.torsos import (
    MLP,
    DictEncoder,
    GridCNN,
    MinAtarCNN,
    NatureCNN,
    TokenGRU,
    make_torso,
)

SPEC = {
    "image": ArraySpec((7, 7, 3), np.uint8),
    "direction": ArraySpec((), np.int32, num_values=4),
    "mission": ArraySpec((6,), np.int32, num_values=20, tokens=True),
}


def _params(module, *args, seed=0):
    """Random parameters of the module's shapes (no init compile: the orthogonal
    initialiser's QR is the slowest thing to compile here, and any values will do)."""
    rng = np.random.default_rng(seed)
    shapes = jax.eval_shape(module.init, jax.random.PRNGKey(0), *args)
    return jax.tree.map(lambda s: (0.3 * rng.normal(size=s.shape)).astype(s.dtype), shapes)


def _obs(lead, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "image": rng.integers(0, 11, (*lead, 7, 7, 3)).astype(np.uint8),
        "direction": rng.integers(0, 4, lead).astype(np.int32),
        "mission": np.concatenate(
            [rng.integers(1, 20, (*lead, 4)), np.zeros((*lead, 2), np.int64)], axis=-1
        ).astype(np.int32),
    }


def test_make_torso_is_the_one_selection():
    assert isinstance(make_torso((4, 84, 84)), NatureCNN)
    assert isinstance(make_torso(ArraySpec((4,), np.float32)), MLP)
    assert isinstance(make_torso(jax.ShapeDtypeStruct((5,), jnp.float32)), MLP)
    enc = make_torso(SPEC, (32,), text=True)
    assert isinstance(enc, DictEncoder) and enc.text and tuple(enc.hidden) == (32,)
    assert isinstance(make_torso(ArraySpec((10, 10, 4), np.bool_)), MinAtarCNN)
    with pytest.raises(ValueError, match=r"no torso for observations of shape \(2, 3\)"):
        make_torso((2, 3))
    with pytest.raises(ValueError, match=r"no torso for observations of shape \(4, 84, 20\)"):
        make_torso((4, 84, 20))


def _conv_valid(x, kernel, bias):
    """2-D cross-correlation, stride 1, no padding: x [H, W, Cin], kernel [kh, kw, Cin, Cout]."""
    kh, kw = kernel.shape[:2]
    h, w = x.shape[0] - kh + 1, x.shape[1] - kw + 1
    out = np.zeros((h, w, kernel.shape[-1]), np.float64)
    for i in range(h):
        for j in range(w):
            patch = x[i : i + kh, j : j + kw, :]
            out[i, j] = np.tensordot(patch, kernel, axes=([0, 1, 2], [0, 1, 2])) + bias
    return out


def _maxpool2(x):
    h, w = x.shape[0] // 2, x.shape[1] // 2
    return x[: 2 * h, : 2 * w].reshape(h, 2, w, 2, -1).max(axis=(1, 3))


def test_grid_cnn_is_torch_ac_conv():
    """Conv(16, 2x2) → ReLU → MaxPool 2x2 → Conv(32, 2x2) → ReLU → Conv(64, 2x2) → ReLU on the
    raw (unscaled) MiniGrid values: 7x7 → 6x6 → 3x3 → 2x2 → 1x1x64."""
    image = _obs((2,))["image"]
    net = GridCNN()
    params = _params(net, image)
    out = np.asarray(jax.jit(net.apply)(params, image))
    assert out.shape == (2, 64)
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params["params"])
    for b in range(2):
        x = image[b].astype(np.float64)
        x = _maxpool2(np.maximum(_conv_valid(x, p["Conv_0"]["kernel"], p["Conv_0"]["bias"]), 0))
        x = np.maximum(_conv_valid(x, p["Conv_1"]["kernel"], p["Conv_1"]["bias"]), 0)
        x = np.maximum(_conv_valid(x, p["Conv_2"]["kernel"], p["Conv_2"]["bias"]), 0)
        assert np.abs(x).max() > 0.1
        np.testing.assert_allclose(out[b], x.reshape(-1), rtol=1e-4, atol=1e-4)


def test_minatar_cnn_is_young_and_tian_network():
    """Conv(16, 3x3, stride 1, VALID) → ReLU → flatten → Dense(128) → ReLU on MinAtar's boolean
    10x10xC grid taken as 0/1 floats: 10x10 → 8x8x16 = 1024 → 128 (Young & Tian 2019, §4)."""
    rng = np.random.default_rng(0)
    grid = rng.random((3, 2, 10, 10, 4)) < 0.3  # [T, B, H, W, C] bool
    net = MinAtarCNN()
    params = net.init(jax.random.key(1), grid)
    out = np.asarray(jax.jit(net.apply)(params, grid))
    assert out.shape == (3, 2, 128)
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params["params"])
    for t in range(3):
        for b in range(2):
            x = np.maximum(_conv_valid(grid[t, b].astype(np.float64), **p["Conv_0"]), 0)
            assert x.shape == (8, 8, 16)
            x = np.maximum(x.reshape(-1) @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"], 0)
            assert np.abs(x).max() > 0.1
            np.testing.assert_allclose(out[t, b], x, rtol=1e-4, atol=1e-4)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_token_gru_matches_the_gru_equations_and_ignores_padding():
    """GRU (Cho et al. 2014, arXiv:1406.1078, in the cuDNN/PyTorch form):
    r = σ(W_ir x + b_ir + W_hr h), z = σ(W_iz x + b_iz + W_hz h),
    n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)), h' = (1 − z) ⊙ n + z ⊙ h,
    over the embedded words, stopping at the padding (id 0)."""
    tokens = np.array([[3, 7, 1, 0, 0, 0], [5, 0, 0, 0, 0, 0]], np.int32)
    net = TokenGRU(vocab_size=20, embed_dim=5, hidden=4)
    params = _params(net, tokens)
    apply = jax.jit(net.apply)
    out = np.asarray(apply(params, tokens))
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params["params"])
    g, table = p["gru"], p["embed"]["embedding"]

    def dense(name, x):
        return x @ g[name]["kernel"] + g[name].get("bias", 0.0)

    for b in range(2):
        h = np.zeros(4)
        for tok in tokens[b]:
            if tok == 0:
                continue
            x = table[tok]
            r = _sigmoid(dense("ir", x) + dense("hr", h))
            z = _sigmoid(dense("iz", x) + dense("hz", h))
            n = np.tanh(dense("in", x) + r * dense("hn", h))
            h = (1 - z) * n + z * h
        np.testing.assert_allclose(out[b], h, rtol=1e-5, atol=1e-5)
    # Padding to another length changes nothing.
    longer = np.concatenate([tokens, np.zeros((2, 5), np.int32)], axis=1)
    np.testing.assert_allclose(apply(params, longer), out, rtol=1e-6, atol=1e-6)


def test_dict_encoder_keys():
    obs = _obs((3, 2))
    plain = make_torso(SPEC, (16,))
    params = _params(plain, obs)
    assert set(params["params"]) == {"image", "direction", "Dense_0"}  # no text: no GRU
    apply = jax.jit(plain.apply)
    out = apply(params, obs)
    assert out.shape == (3, 2, 16)
    # Without text the mission is not read; the direction is (an embedding row per value).
    other = {**obs, "mission": obs["mission"][..., ::-1]}
    np.testing.assert_array_equal(apply(params, other), out)
    turned = {**obs, "direction": (obs["direction"] + 1) % 4}
    assert not np.allclose(apply(params, turned), out)
    # With text the mission changes the features.
    text = make_torso(SPEC, (16,), text=True)
    tparams = _params(text, obs)
    assert "mission" in tparams["params"]
    tapply = jax.jit(text.apply)
    assert not np.allclose(tapply(tparams, other), tapply(tparams, obs))


def test_dict_encoder_errors():
    enc = make_torso(SPEC, (8,))
    obs = _obs((2,))
    params = jax.eval_shape(enc.init, jax.random.PRNGKey(0), obs)
    bad = {k: v for k, v in obs.items() if k != "direction"} | {"heading": obs["direction"]}
    with pytest.raises(
        ValueError, match=r"missing obs\['direction'\]; unexpected obs\['heading'\]"
    ):
        jax.eval_shape(enc.apply, params, bad)
    with pytest.raises(ValueError, match=r"obs\['image'\] has shape \(2, 5, 5, 3\)"):
        jax.eval_shape(enc.apply, params, {**obs, "image": obs["image"][:, :5, :5]})
    with pytest.raises(ValueError, match="nothing to encode"):
        only_text = {"mission": SPEC["mission"]}
        jax.eval_shape(
            make_torso(only_text).init, jax.random.PRNGKey(0), {"mission": obs["mission"]}
        )


def test_acer_network_takes_dict_observations():
    """The existing ACER network, recurrent, on time-major dict observations [T, B, ...]."""
    net = ACERNetwork(SPEC, 7, (16,), lstm_size=8)
    obs = _obs((3, 2))
    first = np.zeros((3, 2), bool)
    params = jax.eval_shape(net.init, jax.random.PRNGKey(0), obs, first, net.initial_state(2))
    (logits, q), state = jax.eval_shape(net.apply, params, obs, first, net.initial_state(2))
    assert logits.shape == q.shape == (3, 2, 7) and state[0].shape == (2, 8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_patch_conv_is_nn_conv_values_and_gradients(seed):
    """PatchConv (the MinAtar CNN's convolution on CPU) takes nn.Conv's parameters and gives
    its outputs and its gradients with respect to the input, kernel and bias, for random
    image and channel sizes."""
    import flax.linen as nn

    from networks.torsos import PatchConv

    rng = np.random.default_rng(seed)
    h, w, c, f = (int(v) for v in rng.integers(3, 9, 4))
    x = jnp.asarray(rng.normal(size=(2, h, w, c)), jnp.float32)
    conv = nn.Conv(f, (3, 3), padding="VALID")
    params = conv.init(jax.random.key(seed), x)
    params = jax.tree.map(lambda p: p + 0.1, params)  # a non-zero bias too
    patch = PatchConv(f, (3, 3))
    assert jax.tree.map(jnp.shape, patch.init(jax.random.key(0), x)) == jax.tree.map(
        jnp.shape, params
    )

    def loss(module, p, x):
        return jnp.sum(jnp.sin(module.apply(p, x)))

    @jax.jit  # one program, not op by op
    def outputs_and_gradients(params, x):
        return [
            (m.apply(params, x), jax.grad(loss, 1)(m, params, x), jax.grad(loss, 2)(m, params, x))
            for m in (patch, conv)
        ]

    mine, theirs = outputs_and_gradients(params, x)
    np.testing.assert_allclose(mine[0], theirs[0], 1e-5, 1e-5)
    for g_patch, g_conv in zip(mine[1:], theirs[1:], strict=True):  # parameters, input
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, 1e-4, 1e-4), g_patch, g_conv)
