"""The distribution (pyproject.toml, docs/install.md): what `pip install reactor-jax` declares
and ships, and, in the slow tier, a real install into a fresh virtual environment outside the
clone whose losses agree with rlax."""

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest
import rlax
from packaging.requirements import Requirement

import agents
from benchmarks import bench_losses as bench

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LIBRARY_PACKAGES = {"agents", "networks", "replay", "envs", "engine", "experiments"}
# benchmarks/ stays in the repository: it measures against the peers in ../shared/peers.
# The light install (the losses, networks and replay) must not pull these.
HEAVY = {"envpool", "gymnasium", "gymnax", "minatar", "minigrid", "tyro", "rliable"}


def pins(path: Path) -> dict[str, str]:
    """`name -> version` of the `name==version` lines of a requirements file."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            req = Requirement(line)
            out[req.name.lower()] = next(iter(req.specifier)).version
    return out


def declared() -> dict[str, Requirement]:
    reqs = PROJECT["dependencies"] + PROJECT["optional-dependencies"]["experiments"]
    return {Requirement(r).name.lower(): Requirement(r) for r in reqs}


def test_every_pinned_requirement_is_declared_and_its_pin_is_in_range():
    """requirements.txt (the exact versions the experiments were measured with) and the
    distribution's ranges name the same packages, and every pin satisfies its range: the
    two cannot drift apart."""
    pinned, ranges = pins(ROOT / "requirements.txt"), declared()
    assert set(pinned) == set(ranges), set(pinned) ^ set(ranges)
    for name, version in pinned.items():
        assert ranges[name].specifier.contains(version), (name, version, str(ranges[name]))


def test_the_light_install_leaves_out_the_env_backends():
    light = {Requirement(r).name.lower() for r in PROJECT["dependencies"]}
    assert light >= {"jax", "jaxlib", "numpy"}
    assert not light & HEAVY, light & HEAVY


def test_the_cuda_extra_pins_the_same_jax_as_the_cpu_install():
    (cuda,) = PROJECT["optional-dependencies"]["cuda12"]
    req = Requirement(cuda)
    assert req.name == "jax" and req.extras == {"cuda12"}
    assert req.specifier.contains(pins(ROOT / "requirements.txt")["jax"])


def test_the_version_is_the_changelogs_latest_entry():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    first = next(line for line in changelog.splitlines() if line.startswith("## "))
    assert first.startswith(f"## {agents.__version__} "), (first, agents.__version__)


def test_library_imports_without_the_env_backends():
    """`agents.losses`, `networks` and `replay` import with none of the env backends loaded
    (the light install has none of them)."""
    code = (
        "import sys, agents.losses, networks, replay\n"
        f"heavy = [m for m in {sorted(HEAVY)!r} if m.replace('-', '_') in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


# ------------------------------------------------------------------ slow: a real install

AGREE = {  # ours (from the installed copy) vs rlax, with the benchmark's hyper-parameters
    "retrace_targets": {"lambda_": bench.LAMBDA},
    "vtrace": {},
    "lambda_returns": {"lambda_": bench.LAMBDA},
    "categorical_projection": {},
}

INSTALLED_SCRIPT = """
import importlib.util, sys
from pathlib import Path
import numpy as np
from agents import losses
import agents, networks, replay
here, venv = Path(sys.argv[1]), Path(sys.prefix)
assert Path(losses.__file__).resolve().is_relative_to(venv.resolve()), losses.__file__
for name in ("envpool", "gymnasium", "gymnax", "tests"):
    assert importlib.util.find_spec(name) is None, name
kwargs = {kwargs!r}
args = np.load(here / "args.npz")
outs = {{}}
for name, kw in kwargs.items():
    n = sum(1 for k in args.files if k.startswith(name + "/"))
    out = getattr(losses, name)(*(args[f"{{name}}/{{i}}"] for i in range(n)), **kw)
    for i, leaf in enumerate(out if isinstance(out, tuple) else (out,)):
        outs[f"{{name}}/{{i}}"] = np.asarray(leaf)
np.savez(here / "outs.npz", **outs)
print(agents.__version__)
"""


def copy_sources(dest: Path) -> Path:
    """The files a `pip install` of the clone reads, copied (so that the build writes
    nothing into the clone)."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md"):
        shutil.copy(ROOT / name, dest / name)
    for pkg in sorted(LIBRARY_PACKAGES):
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@pytest.mark.slow
def test_pip_install_in_a_fresh_venv_gives_losses_that_agree_with_rlax(tmp_path):
    src = copy_sources(tmp_path / "src")
    wheel_dir = tmp_path / "wheel"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", wheel_dir, src], check=True)
    (wheel,) = wheel_dir.glob("reactor_jax-*.whl")
    tops = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert tops - LIBRARY_PACKAGES == {f"reactor_jax-{agents.__version__}.dist-info"}, tops

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    vpy = venv / "bin" / "python"
    subprocess.run([vpy, "-m", "pip", "install", "-q", src], check=True, cwd=tmp_path)
    listed = subprocess.run(
        [vpy, "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True
    ).stdout.lower()
    assert not any(f"{h}==" in listed for h in HEAVY), listed

    x = bench.make_inputs(
        bench.Args(batch_sizes=(4,), trace_len=7, num_actions=3, num_atoms=11, seed=5),
        4,
        with_dist=False,
        p_terminal=0.4,
    )
    pairs = {ours.name: (ours, ref) for ours, ref in bench.rlax_pairs(x, bench.make_rlax_fns(rlax))}
    assert set(pairs) == set(AGREE)
    np.savez(
        tmp_path / "args.npz",
        **{f"{n}/{i}": np.asarray(a) for n, (ours, _) in pairs.items()
           for i, a in enumerate(ours.args)},
    )  # fmt: skip
    script = INSTALLED_SCRIPT.format(kwargs=AGREE)
    done = subprocess.run(
        [vpy, "-c", script, tmp_path], check=True, capture_output=True, text=True, cwd=tmp_path
    )
    assert done.stdout.strip() == agents.__version__
    outs = np.load(tmp_path / "outs.npz")
    for name, (_, ref) in pairs.items():
        ours = [outs[k] for k in sorted(outs.files) if k.startswith(name + "/")]
        assert bench.check_agreement(name, ours, ref.fn(*ref.args)) < 1e-4, name


def test_a_run_names_its_backend_and_devices():
    """What a GPU user checks first (docs/install.md): the line every run prints."""
    import types

    import jax

    from engine.runner import devices_line

    line = devices_line(types.SimpleNamespace(mesh=None))
    assert line.startswith(f"jax {jax.__version__} on {jax.default_backend()}: 1 device(s) (")
