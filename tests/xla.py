"""XLA_FLAGS for the training processes the tests start."""

import os


def subprocess_xla_flags(devices: int | None = None) -> str:
    """The tests' XLA_FLAGS (tests/conftest.py: fast compilation) without the 4 fake host
    devices, so a subprocess sees one device as a plain command line does, or `devices`."""
    flags = [
        f for f in os.environ.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f
    ]
    if devices:
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    return " ".join(flags)
