"""Figures for a paper, drawn with matplotlib: axis labels with units,
legends outside the data, error bars of a 95% confidence interval over
seeds, and PDF, PNG or SVG output."""

import math
import os

from tessel import _tessel

# Student's t, two-sided 95%, by degrees of freedom (n - 1 seeds); the normal
# value beyond.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
_FORMATS = (".pdf", ".png", ".svg")


def confidence_95(values):
    """Half the width of the 95% confidence interval of the mean of
    `values` (Student's t); 0 for fewer than two."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = _T95[n - 2] if n - 2 < len(_T95) else 1.960
    return t * sd / math.sqrt(n)


def _figure_title(metric):
    titles = dict(_tessel.figures())
    if metric not in titles:
        raise _tessel.Error(f"unknown metric '{metric}' (valid: {', '.join(titles)})")
    return titles[metric]


def _time_scale(title, values):
    """Seconds, or hours when the values run to hours, and the title to match."""
    if title.endswith("(s)") and values and max(abs(v) for v in values) >= 3 * 3600:
        return 1 / 3600, title[:-3] + "(h)"
    return 1, title


def _new_axes(ax):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt  # without a display, matplotlib draws with Agg

    _, ax = plt.subplots(figsize=(6, 3.5))
    return ax


def _finish(ax, output):
    ax.grid(True, alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    if handles:  # outside the data, to the right
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
    if output is not None:
        output = os.fspath(output)
        if os.path.splitext(output)[1].lower() not in _FORMATS:
            raise _tessel.Error(f"{output}: plots are written as {', '.join(_FORMATS)}")
        ax.figure.savefig(output, bbox_inches="tight")
    return ax


def _run_name(row):
    axes = " ".join(f"{name.split('.')[-1]}={row[name]}" for name in row["_axes"])
    label = row["label"] or f"run {row['id']}"
    return f"{label} {axes}".strip()


def plot_cdf(results, output=None, ax=None):
    jobs = results.jobs
    runs = results.runs
    axis_names = [c for c in runs.columns if "." in c or c == "seed"]
    runs["_axes"] = [[n for n in axis_names if row[n] is not None and row[n] == row[n]] for _, row in runs.iterrows()]
    finished = jobs[jobs["status"] == "finished"].dropna(subset=["jct_s"])
    finished = finished[finished["tracked"] == 1]
    scale, xlabel = _time_scale("JCT (s)", list(finished["jct_s"]))
    ax = _new_axes(ax)
    for _, run in runs.iterrows():
        jct = sorted(finished.loc[finished["run_id"] == run["id"], "jct_s"] * scale)
        if not jct:
            continue
        ax.step(jct, [(i + 1) / len(jct) for i in range(len(jct))], where="post", label=_run_name(run))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    return _finish(ax, output)


def plot_metric(results, by, metric="avg_jct_s", over=(), output=None, ax=None):
    title = _figure_title(metric)
    grouped = results.report(by=by, over=over)
    grouped[metric] = grouped[metric].astype(float)  # a figure over no jobs (null) is NaN: no point
    per_run = results.report().set_index("run")[metric].astype(float)
    if grouped[metric].isna().all():
        raise _tessel.Error(f"{metric} has no value in the chosen runs: none of their tracked jobs finished "
                            "(or, for queueing, started)")
    scale, ylabel = _time_scale(title, list(grouped[metric].dropna()))
    ax = _new_axes(ax)
    for series, rows in grouped.groupby("series", sort=False):
        x, y, err = [], [], []
        for _, row in rows.iterrows():
            values = [per_run[r] * scale for r in row["run_ids"]]
            x.append(row[by])
            y.append(row[metric] * scale)
            err.append(confidence_95(values))
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=series)
    values = sorted(set(grouped[by]), key=str)
    if len(values) <= 12 and all(isinstance(v, (int, float)) for v in values):
        ax.set_xticks(sorted(values))  # the sweep's points, not a tick every 0.25
    ax.set_xlabel(by.split(".")[-1].replace("_", " "))
    ax.set_ylabel(ylabel)
    return _finish(ax, output)
