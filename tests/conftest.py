"""Shared pytest setup.

Tests run on CPU. Four fake host devices are requested before JAX initialises so that the
sharded code paths can be exercised on a machine with no accelerator.

Implicit rank promotion is an error in every test (`jax_numpy_rank_promotion = "raise"`):
`[T, B] + [T, B, 1]` must be written out (`x[..., None]`), never broadcast silently. Setting
it through the environment, before any test imports JAX, covers code that reads the config at
import time too; the `jax.config.update` below makes sure it holds even if JAX was already
imported by a plugin.

The tests' programs are tiny and run a few times each, so compiling them dominates: XLA's
CPU backend compiles them without LLVM's optimisation passes
(`--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true`; the
HLO-level passes still run). The SAC and Reactor test files took 104 s instead of 138 s on 2
workers. The training subprocesses the tests start get the same flags with their own device
count (tests/xla.py). Set an optimisation level in XLA_FLAGS yourself to test with others.

Compiled programs go to JAX's persistent compilation cache, one directory per test run
shared by the xdist workers and every subprocess they start (train, resume, evaluate): a
program compiled once is loaded, not recompiled, by the next process that needs it. Tracing
still happens (the no-recompile tests count traces), and results are bit-identical; it
halves the wall time of a tiny subprocess run (R2D1 train: 21.5 s → 11.0 s).
"""

import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["JAX_NUMPY_RANK_PROMOTION"] = "raise"
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    _flags += " --xla_force_host_platform_device_count=4"
if "xla_backend_optimization_level" not in _flags:  # see the module docstring
    _flags += " --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
os.environ["XLA_FLAGS"] = _flags.strip()

# The process that sets the directory (pytest itself, or xdist's controller, whose workers
# inherit the variable) owns it and removes it when the session ends.
_run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
_cache = os.path.join(tempfile.gettempdir(), f"reactor-jax-test-jit-cache-{_run_id}")
_owned = "JAX_COMPILATION_CACHE_DIR" not in os.environ
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _cache)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import jax  # noqa: E402  (after the environment above)

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_sessionfinish(session, exitstatus):
    if _owned:
        shutil.rmtree(_cache, ignore_errors=True)
