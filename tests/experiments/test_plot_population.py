"""experiments.plot_population: first-reached steps of the best and median member."""

import numpy as np
import pytest


def test_plot_population_first_reached_best_and_median(tmp_path):
    """experiments.plot_population on a hand-made population of 3 members."""
    from experiments import plot_population

    curves = {0: [10, 480, 500], 1: [10, 20, 490], 2: [10, 20, 30]}  # never, for member 2
    for i, returns in curves.items():
        folder = tmp_path / "pop" / f"member-{i}"
        folder.mkdir(parents=True)
        lines = ["env_steps,return_mean,wall_s,hp_lr"]
        lines += [f"{100 * (k + 1)},{r},{k},{1e-3 * (i + 1)}" for k, r in enumerate(returns)]
        (folder / "metrics.csv").write_text("\n".join(lines) + "\n")
    s = plot_population.summary(tmp_path / "pop", 475.0)
    assert s["first"][:2] == [200.0, 300.0] and np.isnan(s["first"][2])
    assert s["best"] == 200.0 and s["median"] == 300.0  # the middle of 200, 300, never
    out = tmp_path / "pop.png"
    plot_population.main([str(tmp_path / "pop"), "--out", str(out), "--threshold", "475"])
    assert out.stat().st_size > 0


def _member(root, i, text: str | bytes):
    folder = root / f"member-{i}"
    folder.mkdir(parents=True)
    data = text.encode() if isinstance(text, str) else text
    (folder / "metrics.csv").write_bytes(data)


GOOD = "env_steps,return_mean,wall_s,hp_lr\n10,1,0.1,0.001\n20,2,0.2,0.001\n"


@pytest.mark.parametrize(
    "members, expected",
    [
        ({}, "has no member-<i>/ folders"),
        ({0: "env_steps,return_mean,wall_s\n"}, "has no rows yet"),
        ({0: ""}, "is empty"),
        ({0: b"env_steps,return_mean\n\xff\xfe,1\n"}, "cannot be read"),
        ({0: GOOD, 1: "a,b\n1,2\n"}, "has no column env_steps"),
        ({0: "env_steps,return_mean,wall_s\ninf,1,0.1\n-inf,2,0.2\n"}, "has no rows yet"),
    ],
    ids=["not-a-population", "header-only", "empty", "not-utf8", "no-columns", "inf-steps"],
)
def test_plot_population_damaged_runs_are_one_line_errors(tmp_path, members, expected, capsys):
    """A folder that is not a population, or a member's damaged metrics.csv: one line on
    stderr naming it, no figure."""
    from experiments import plot_population

    run = tmp_path / "pop"
    run.mkdir()
    for i, text in members.items():
        _member(run, i, text)
    out = tmp_path / "pop.png"
    with pytest.raises(SystemExit) as err:
        plot_population.main([str(run), "--out", str(out)])
    message = str(err.value)
    assert message.startswith("error: ") and "\n" not in message and expected in message
    assert not out.exists() and capsys.readouterr().err == ""


def test_plot_population_missing_run_and_foreign_member_entries(tmp_path):
    """A run folder that does not exist is one line; a `member-x` folder or a `member-1`
    file beside the members is not a member (no int() of its name, no traceback)."""
    from experiments import plot_population

    with pytest.raises(SystemExit, match=r"^error: .*nope does not exist$"):
        plot_population.main([str(tmp_path / "nope"), "--out", str(tmp_path / "a.png")])
    run = tmp_path / "pop"
    _member(run, 0, GOOD)
    (run / "member-x").mkdir()
    (run / "member-1").write_text("not a folder")
    out = tmp_path / "a.png"
    plot_population.main([str(run), "--out", str(out)])
    assert out.stat().st_size > 0


def test_plot_population_out_link_refused_before_drawing(tmp_path):
    from experiments import plot_population

    run = tmp_path / "pop"
    _member(run, 0, GOOD)
    target = tmp_path / "precious.png"
    target.write_bytes(b"precious")
    (tmp_path / "link.png").symlink_to(target)
    with pytest.raises(SystemExit, match=r"^error: refusing to write .*link\.png: it is a symb"):
        plot_population.main([str(run), "--out", str(tmp_path / "link.png")])
    assert target.read_bytes() == b"precious"


def test_plot_population_quiet_on_unfinished_and_nonpositive_members(tmp_path, capfd):
    """No episode finished yet (all-NaN returns) and hyper-parameters <= 0 (a linear scale
    then, not a log one) draw without warnings on stderr; --out's folder is made."""
    from experiments import plot_population

    run = tmp_path / "pop"
    _member(run, 0, "env_steps,return_mean,wall_s,hp_lr\n10,nan,1,0\n20,,2,-1\n")
    _member(run, 1, "env_steps,return_mean,wall_s,hp_lr\n10,nan,1,0\n20,,2,-1\n")
    out = tmp_path / "new" / "pop.png"
    plot_population.main([str(run), "--out", str(out), "--threshold", "1"])
    assert out.stat().st_size > 0 and capfd.readouterr().err == ""


def test_names_that_look_like_mathtext_are_drawn_as_text(tmp_path):
    """A run folder named with a pair of `$` (and a hyper-parameter column likewise) is a
    name, not mathtext that fails to parse: plot and plot_population draw it."""
    from experiments import plot, plot_population

    run = tmp_path / "a$\\frac{$b"
    _member(run, 0, "env_steps,return_mean,wall_s,hp_$\\frac{$\n10,1,0.1,0.5\n20,2,0.2,0.5\n")
    plot_population.main([str(run), "--out", str(tmp_path / "pop.png")])
    assert (tmp_path / "pop.png").stat().st_size > 0
    single = tmp_path / "c$\\frac{$d"
    single.mkdir()
    (single / "metrics.csv").write_text(GOOD)
    plot.main([str(single), "--out", str(tmp_path / "p.png")])
    assert (tmp_path / "p.png").stat().st_size > 0
