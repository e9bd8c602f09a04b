"""experiments.plot_population: first-reached steps of the best and median member."""

import numpy as np


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
