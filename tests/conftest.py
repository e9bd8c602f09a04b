"""Shared pytest setup.

Tests run on CPU. Four fake host devices are requested before JAX initialises so that the
sharded code paths can be exercised on a machine with no accelerator.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=4").strip()
