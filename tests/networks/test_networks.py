"""Networks: shapes, uint8 scaling, and LSTM resets at episode starts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from networks import ACERNetwork, NatureCNN, ResetLSTM


def _nature_cnn_by_hand(params, frames):
    """The Nature CNN written out with lax convolutions, for float frames `[N, C, 84, 84]`
    already in [0, 1]: no scaling here, so it checks the module's own uint8 → [0, 1]."""
    p = params["params"]
    x = jnp.transpose(frames, (0, 2, 3, 1))  # NHWC
    for i, stride in enumerate((4, 2, 1)):
        conv = p[f"Conv_{i}"]
        x = jax.lax.conv_general_dilated(
            x,
            conv["kernel"],
            (stride, stride),
            "VALID",
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            precision=jax.lax.Precision.HIGHEST,
        )
        x = jax.nn.relu(x + conv["bias"][None, None, None, :])
    x = x.reshape((x.shape[0], -1))
    dense = p["Dense_0"]
    return jax.nn.relu(x @ dense["kernel"] + dense["bias"][None, :])


def test_nature_cnn_shapes_and_uint8_input():
    net = NatureCNN()
    obs = jax.random.randint(jax.random.PRNGKey(0), (3, 2, 4, 84, 84), 0, 256).astype(jnp.uint8)
    params = net.init(jax.random.PRNGKey(1), obs[0])
    out = net.apply(params, obs)
    assert out.shape == (3, 2, 512)
    # Expected output built independently: the same parameters applied by hand to obs / 255.
    # Fails if the module drops the scaling (inputs up to 255) or scales by anything else.
    frames = np.asarray(obs, np.float32).reshape((6, 4, 84, 84)) / np.float32(255.0)
    want = _nature_cnn_by_hand(params, jnp.asarray(frames)).reshape((3, 2, 512))
    assert float(jnp.max(jnp.abs(want))) > 0.1  # not a vacuous all-zero comparison
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_acer_network_rejects_wrong_obs_shape():
    net = ACERNetwork((4,), 2)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))
    with pytest.raises(ValueError, match="obs_shape"):
        net.apply(params, jnp.zeros((1, 5)))


def test_lstm_resets_state_at_episode_start():
    """Outputs after a `first` flag equal those of a fresh sequence started there."""
    T, B, D = 8, 3, 5
    core = ResetLSTM(16)
    x = jax.random.normal(jax.random.PRNGKey(0), (T, B, D))
    first = np.zeros((T, B), bool)
    first[0] = True
    first[5, 1] = True  # env 1 starts a new episode at t = 5
    state = (jnp.ones((B, 16)), jnp.ones((B, 16)))  # non-zero: must be dropped at t = 0
    params = core.init(jax.random.PRNGKey(1), x, jnp.asarray(first), state)
    ys, _ = core.apply(params, x, jnp.asarray(first), state)
    zero = core.initial_state(B)
    fresh, _ = core.apply(params, x, jnp.asarray(first), zero)
    np.testing.assert_allclose(ys, fresh, rtol=1e-6)  # reset at t = 0 ignores the given state
    tail, _ = core.apply(params, x[5:], jnp.ones((T - 5, B), bool).at[1:].set(False), zero)
    np.testing.assert_allclose(ys[5:, 1], tail[:, 1], rtol=1e-5, atol=1e-6)
    # env 0 had no reset at t = 5: its outputs differ from a fresh start there
    assert not np.allclose(ys[5:, 0], tail[:, 0])


def test_recurrent_acer_network_carries_state():
    net = ACERNetwork((4,), 3, (8,), lstm_size=8)
    state = net.initial_state(2)
    obs = jnp.ones((6, 2, 4))
    first = jnp.zeros((6, 2), bool).at[0].set(True)
    params = net.init(jax.random.PRNGKey(0), obs, first, state)
    (logits, q), _ = net.apply(params, obs, first, state)
    assert logits.shape == q.shape == (6, 2, 3)
    # unrolling in two halves with the carried state gives the same outputs
    (l1, _), mid = net.apply(params, obs[:3], first[:3], state)
    (l2, _), _ = net.apply(params, obs[3:], first[3:], mid)
    np.testing.assert_allclose(jnp.concatenate([l1, l2]), logits, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_atoms", [0, 5])
@pytest.mark.parametrize("dueling", [False, True])
def test_q_head_against_numpy(dueling, num_atoms):
    """QHead from its parameters in NumPy: Q = x W + b, or dueling (Wang et al. 2016, eq. 9)
    Q = V + A − mean_a A; with atoms (C51, dueling on the logits as in Rainbow) the logits
    so combined, Q = softmax(logits) · z."""
    from networks.heads import QHead

    A, K, F = 3, max(num_atoms, 1), 6
    atoms = tuple(np.linspace(-1.0, 2.0, num_atoms)) if num_atoms else ()
    head = QHead(A, dueling=dueling, num_atoms=num_atoms, atoms=atoms)
    x = np.random.default_rng(0).normal(size=(2, 4, F)).astype(np.float32)
    params = head.init(jax.random.PRNGKey(0), jnp.asarray(x))
    p = jax.tree.map(np.asarray, params["params"])
    if dueling:
        adv = (x @ p["advantage"]["kernel"] + p["advantage"]["bias"]).reshape(2, 4, A, K)
        value = (x @ p["value"]["kernel"] + p["value"]["bias"]).reshape(2, 4, 1, K)
        logits = value + adv - adv.mean(axis=2, keepdims=True)
    else:
        logits = (x @ p["q"]["kernel"] + p["q"]["bias"]).reshape(2, 4, A, K)
    out = head.apply(params, jnp.asarray(x))
    if num_atoms:
        e = np.exp(logits - logits.max(-1, keepdims=True))
        want = (e / e.sum(-1, keepdims=True)) @ np.asarray(atoms)
        np.testing.assert_allclose(out.q_logits, logits, rtol=1e-5, atol=1e-5)
    else:
        want = logits[..., 0]
        assert out.q_logits is None
    np.testing.assert_allclose(out.q_values, want, rtol=1e-5, atol=1e-5)


def _strided_conv_np(x, kernel, bias, k):
    """A VALID convolution of stride k = kernel size, written from its definition: output
    pixel (i, j) is the k x k patch at (k·i, k·j) contracted with the kernel [k, k, C, F]."""
    n, rows, cols, _ = x.shape
    h, w = rows // k, cols // k
    out = np.zeros((n, h, w, kernel.shape[-1]), np.float64)
    for i in range(h):
        for j in range(w):
            patch = x[:, k * i : k * i + k, k * j : k * j + k, :].astype(np.float64)
            out[:, i, j] = np.einsum("nabc,abcf->nf", patch, kernel) + bias
    return out


@pytest.mark.parametrize("shape, k", [((2, 13, 11, 3), 5), ((1, 84, 84, 4), 5), ((3, 7, 9, 2), 3)])
def test_tiled_conv_is_the_strided_convolution(shape, k):
    """TiledConv (networks.torsos): the VALID convolution of stride = kernel size as tiles
    times a matrix; rows and columns that fill no whole tile dropped as VALID drops them."""
    from networks import TiledConv

    rng = np.random.default_rng(sum(shape))
    x = rng.normal(size=shape).astype(np.float32)
    conv = TiledConv(6, (k, k))
    params = conv.init(jax.random.PRNGKey(0), x)
    p = params["params"]
    bias = rng.normal(size=6).astype(np.float32)  # a non-zero bias, as after training
    params = {"params": {"kernel": p["kernel"], "bias": jnp.asarray(bias)}}
    got = np.asarray(conv.apply(params, x))
    want = _strided_conv_np(x, np.asarray(p["kernel"], np.float64), bias, k)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_data_efficient_rainbow_network():
    """DER's network (van Hasselt et al. 2019): two 5x5 stride-5 convolutions (32, 64) on
    84x84 frames give 64·3·3 = 576 features; each dueling stream has 256 noisy hidden units;
    σ starts at σ0/√inputs with σ0 = 0.1; C51 logits [.., A, 51]."""
    from networks import QNetwork

    atoms = tuple(np.linspace(-10, 10, 51).tolist())
    net = QNetwork((4, 84, 84), 6, dueling=True, num_atoms=51, atoms=atoms, noisy=True,
                   cnn="data-efficient", head_hidden=256, noisy_std=0.1)  # fmt: skip
    obs = jnp.asarray(np.random.default_rng(0).integers(0, 256, (3, 4, 84, 84)), jnp.uint8)
    params = net.init(jax.random.PRNGKey(0), obs)
    p = params["params"]
    convs = p["DataEfficientCNN_0"]
    assert convs["Conv_0"]["kernel"].shape == (5, 5, 4, 32)
    assert convs["Conv_1"]["kernel"].shape == (5, 5, 32, 64)
    head = p["QHead_0"]
    assert head["advantage_hidden"]["mu_kernel"].shape == (576, 256)
    assert head["value_hidden"]["mu_kernel"].shape == (576, 256)
    assert head["advantage"]["mu_kernel"].shape == (256, 6 * 51)
    assert head["value"]["mu_kernel"].shape == (256, 51)
    np.testing.assert_allclose(head["advantage_hidden"]["sigma_kernel"], 0.1 / np.sqrt(576))
    np.testing.assert_allclose(head["advantage"]["sigma_kernel"], 0.1 / np.sqrt(256))
    out = net.apply(params, obs, noise_key=jax.random.PRNGKey(1))
    assert out.q_values.shape == (3, 6) and out.q_logits.shape == (3, 6, 51)
    # the hidden layers are noisy too: another draw changes Q, the means are deterministic
    other = net.apply(params, obs, noise_key=jax.random.PRNGKey(2)).q_values
    assert not np.allclose(out.q_values, other)
    np.testing.assert_array_equal(net.apply(params, obs).q_values, net.apply(params, obs).q_values)


@pytest.mark.parametrize("name", ["acer", "reactor"])
def test_actor_critic_networks_take_the_data_efficient_torso(name):
    """`cnn="data-efficient"` in ACER's and the Reactor's networks: DER's two convolutions
    (32 then 64 filters, 5x5) give 576 features; ACER's heads read them through one shared
    ReLU layer of 256 units, the Reactor's through its --torso-out layer."""
    from networks import ACERNetwork, ReactorNetwork

    obs = jnp.asarray(np.random.default_rng(0).integers(0, 256, (2, 3, 4, 84, 84)), jnp.uint8)
    if name == "acer":
        net = ACERNetwork((4, 84, 84), 6, cnn="data-efficient")
        params = net.init(jax.random.PRNGKey(0), obs)["params"]
        torso = params["torso"]
        convs, dense = torso["layers_0"], torso["layers_1"]
        assert dense["kernel"].shape == (576, 256)
        assert params["head"]["policy"]["kernel"].shape == (256, 6)
        logits, q = net.apply({"params": params}, obs)
        assert logits.shape == q.shape == (2, 3, 6)
    else:
        net = ReactorNetwork((4, 84, 84), 6, num_atoms=5, torso_out=32, lstm_size=8,
                             cnn="data-efficient")  # fmt: skip
        first = jnp.zeros((2, 3), bool)
        params = net.init(jax.random.PRNGKey(0), obs, first, net.initial_state(3))["params"]
        convs = params["torso"]
        assert params["linear"]["kernel"].shape == (576, 32)
    assert convs["Conv_0"]["kernel"].shape == (5, 5, 4, 32)
    assert convs["Conv_1"]["kernel"].shape == (5, 5, 32, 64)


def test_the_frame_torso_choice_is_refused_for_other_observations():
    from networks import make_torso

    with pytest.raises(ValueError, match="is a torso for frame stacks"):
        make_torso((4,), (8,), cnn="data-efficient")
    with pytest.raises(ValueError, match="cnn must be one of"):
        make_torso((4, 84, 84), cnn="resnet")
