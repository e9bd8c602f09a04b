"""`engine.common.use_compile_cache`: where train keeps its compiled programs between
processes, and the switch that turns it off."""

import jax
import pytest

from engine.common import COMPILE_CACHE_OFF, use_compile_cache

KEYS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_enable_compilation_cache",
)


@pytest.fixture
def jax_cache_config():
    """The process's cache settings (conftest's), put back after the test."""
    saved = {key: getattr(jax.config, key) for key in KEYS}
    yield
    for key, value in saved.items():
        jax.config.update(key, value)


def test_the_default_folder_is_under_the_users_cache(tmp_path, monkeypatch, jax_cache_config):
    for name in ("JAX_COMPILATION_CACHE_DIR", COMPILE_CACHE_OFF,
                 "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = use_compile_cache()
    assert folder == tmp_path / "xdg" / "reactor-jax" / "jax"
    assert jax.config.jax_compilation_cache_dir == str(folder)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
    assert jax.config.jax_enable_compilation_cache


def test_the_users_folder_and_threshold_win(tmp_path, monkeypatch, jax_cache_config):
    monkeypatch.delenv(COMPILE_CACHE_OFF, raising=False)
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "2")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 2.0)
    assert use_compile_cache() == tmp_path / "mine"
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 2.0


@pytest.mark.parametrize("value, on", [("1", False), ("yes", False), ("0", True), ("", True)])
def test_the_switch_turns_it_off(value, on, tmp_path, monkeypatch, jax_cache_config):
    monkeypatch.setenv(COMPILE_CACHE_OFF, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    assert (use_compile_cache() is not None) == on
    assert jax.config.jax_enable_compilation_cache == on


@pytest.mark.slow
@pytest.mark.parametrize("off", [False, True])
def test_a_train_process_fills_the_cache_unless_switched_off(off, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.xla import subprocess_xla_flags

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT_CACHE")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=str(root), XLA_FLAGS=subprocess_xla_flags(),
               XDG_CACHE_HOME=str(tmp_path / "xdg"))  # fmt: skip
    env[COMPILE_CACHE_OFF] = "1" if off else ""
    argv = ["--num-envs", "2", "--trace-len", "5", "--batch-size", "2", "--buffer-size", "200",
            "--total-steps", "40", "--eval-episodes", "1", "--no-progress",
            "--run-dir", str(tmp_path / "run")]  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "experiments.train", *argv], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "xdg" / "reactor-jax" / "jax"
    kept = [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []
    assert (len(kept) == 0) if off else (len(kept) > 0)
