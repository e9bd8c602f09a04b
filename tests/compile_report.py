"""Where the test suite's time goes: a pytest plugin that charges JAX's tracing, lowering and
XLA compilation (and the persistent cache's loads) to the test that caused them.

    python -m pytest -p tests.compile_report -m "not slow" -n 2 --dist worksteal \
        --compile-report /tmp/compile.json

Each test's record: its wall seconds (setup, call and teardown together) and, from
`jax.monitoring`'s duration events in this process, the seconds spent tracing to jaxprs
(`jaxpr_trace_duration`), lowering to MLIR (`jaxpr_to_mlir_module_duration`), compiling
(`backend_compile_duration`) and loading from the compilation cache, with how many of each;
and of the compilations, those of single primitives (`eager_n`, `eager_s`: JAX code run op by
op outside `jit`, each new shape of each op compiled on its own, the usual cause of a test
that compiles hundreds of times; read from `jax_log_compiles`' messages).
Work in the training subprocesses a test starts is in its wall seconds only. With xdist each
worker writes `PATH.<worker>`; then `python -m tests.compile_report PATH...` prints the totals
and the tests that cost most.
"""

from __future__ import annotations

import collections
import gc
import json
import logging
import os
import re
import sys
import time

import pytest

EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
    "/jax/compilation_cache/cache_retrieval_time_sec": "cache_load",
}


_FINISHED = re.compile(r"Finished XLA compilation of jit\((.+)\) in ([0-9.e-]+) sec")


class _Recorder(logging.Handler):
    def __init__(self, path: str):
        super().__init__(logging.DEBUG)
        self.path, self.current = path, None
        self.tests: dict[str, dict] = {}
        self.started = 0.0
        from jax._src import core

        self.primitives = {o.name for o in gc.get_objects() if isinstance(o, core.Primitive)}

    def emit(self, record: logging.LogRecord) -> None:
        match = _FINISHED.match(record.getMessage())
        if match and self.current is not None and match.group(1) in self.primitives:
            self.tests[self.current]["eager_n"] += 1
            self.tests[self.current]["eager_s"] += float(match.group(2))

    def listen(self, event: str, duration: float, **_) -> None:
        kind = EVENTS.get(event)
        if kind is None or self.current is None:
            return
        record = self.tests[self.current]
        record[f"{kind}_s"] += duration
        record[f"{kind}_n"] += 1

    def start(self, nodeid: str) -> None:
        self.current = nodeid
        self.tests.setdefault(nodeid, collections.defaultdict(float))
        self.started = time.perf_counter()

    def stop(self) -> None:
        if self.current is not None:
            self.tests[self.current]["wall_s"] += time.perf_counter() - self.started
        self.current = None

    def write(self) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        path = f"{self.path}.{worker}" if worker else self.path
        with open(path, "w") as f:
            json.dump({k: dict(v) for k, v in self.tests.items()}, f, indent=0)


def pytest_addoption(parser):
    parser.addoption("--compile-report", default=None, help="write per-test JAX compile costs")


def pytest_configure(config):
    path = config.getoption("--compile-report")
    if not path or (os.environ.get("PYTEST_XDIST_WORKER") is None and _xdist_on(config)):
        return  # xdist's controller runs no test: its workers record
    import jax

    recorder = _Recorder(path)
    jax.monitoring.register_event_duration_secs_listener(recorder.listen)
    jax.config.update("jax_log_compiles", True)  # its messages go to the recorder alone
    for name in ("jax._src.dispatch", "jax._src.interpreters.pxla"):
        logger = logging.getLogger(name)
        logger.addHandler(recorder)
        logger.propagate = False
    config._compile_recorder = recorder


def _xdist_on(config) -> bool:
    return bool(getattr(config.option, "numprocesses", None))


def _recorder(item):
    return getattr(item.config, "_compile_recorder", None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The test's setup, call and teardown, charged to it."""
    recorder = _recorder(item)
    if recorder is not None:
        recorder.start(item.nodeid)
    yield
    if recorder is not None:
        recorder.stop()


def pytest_unconfigure(config):
    recorder = getattr(config, "_compile_recorder", None)
    if recorder is not None:
        recorder.write()


def summary(paths: list[str], top: int = 30) -> str:
    tests: dict[str, dict] = {}
    for path in paths:
        with open(path) as f:
            tests.update(json.load(f))
    keys = ("wall_s", "trace_s", "lower_s", "compile_s", "cache_load_s", "eager_s")
    total = {k: sum(t.get(k, 0.0) for t in tests.values()) for k in keys}
    counts = {k: sum(t.get(k, 0) for t in tests.values()) for k in
              ("trace_n", "compile_n", "cache_load_n", "eager_n")}  # fmt: skip
    lines = [
        f"{len(tests)} tests: " + ", ".join(f"{k} {v:.1f}" for k, v in total.items()),
        "  " + ", ".join(f"{k} {v:.0f}" for k, v in counts.items()),
        "",
        f"the {top} tests (with their fixtures' setup) that cost most wall time:",
        "  wall_s  trace_s lower_s compile_s load_s  #trace #compile #eager  test",
    ]
    for name, t in sorted(tests.items(), key=lambda kv: -kv[1].get("wall_s", 0.0))[:top]:
        lines.append(
            f"  {t.get('wall_s', 0):6.1f} {t.get('trace_s', 0):7.1f} {t.get('lower_s', 0):7.1f} "
            f"{t.get('compile_s', 0):9.1f} {t.get('cache_load_s', 0):6.1f} "
            f"{int(t.get('trace_n', 0)):7d} {int(t.get('compile_n', 0)):8d} "
            f"{int(t.get('eager_n', 0)):6d}  {name}"
        )
    by_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for name, t in tests.items():
        by_file[name.split("::")[0]].update({k: t.get(k, 0.0) for k in keys})
    lines += ["", f"the {top} files that cost most wall time:",
              "  wall_s  trace_s lower_s compile_s load_s eager_s  file"]  # fmt: skip
    for name, t in sorted(by_file.items(), key=lambda kv: -kv[1]["wall_s"])[:top]:
        lines.append(
            f"  {t['wall_s']:6.1f} {t['trace_s']:7.1f} {t['lower_s']:7.1f} "
            f"{t['compile_s']:9.1f} {t['cache_load_s']:6.1f} {t['eager_s']:7.1f}  {name}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1:]))
