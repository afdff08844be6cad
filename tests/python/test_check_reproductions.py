"""scripts/check_reproductions.py: its table, verdicts and exit codes, on
reduced runs of the Tenplex experiment (no ../shared/data needed, under a
second), through checks tables written for the test and the real one."""

import importlib.util
import json
import subprocess
import sys

from conftest import ROOT, TESSEL, cli

SCRIPT = ROOT / "scripts" / "check_reproductions.py"
HEADER = ["experiment", "figure", "published", "ours", "tolerance", "verdict"]


def check_reproductions(*args):
    return subprocess.run([sys.executable, str(SCRIPT), "--tessel", TESSEL, *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def table(stdout):
    """The table's rows as cell lists, split on runs of two or more spaces."""
    import re

    lines = stdout.split("\n\n")[0].splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines]


# Fig. 9's schedule, reduced as CI runs it (it is small already): tenplex
# finishes 16% before tenplex-dp (experiments/tenplex/README.md).
FIG9 = """\
[tenplex]
runs = [{ file = "tenplex/fig9.toml", reduced = [] }]
data = []
"""


def fig9_check(name, **tolerance):
    lines = [
        "[[tenplex.check]]",
        f'name = "{name}"',
        'figure = "avg_jct_s"',
        'by = "scheduler.elasticity"',
        'row = { series = "fig9", at = "tenplex" }',
        'divided_by = { series = "fig9", at = "tenplex-dp" }',
        f"published = {tolerance.pop('published')}",
        'source = "a test"',
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in tolerance.items()]
    return "\n".join(lines) + "\n"


def test_checks_that_hold_pass_and_exit_0(write):
    checks = write("checks.toml", FIG9 + fig9_check("within 20% of tenplex-dp", published=1, relative=0.2)
                   + fig9_check("faster than tenplex-dp", published=1, direction="below"))
    result = check_reproductions("--checks", checks, "--reduced")
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    assert rows[0] == HEADER
    assert rows[1][:3] == ["tenplex", "within 20% of tenplex-dp", "1.00×"]
    assert rows[1][4:] == ["±20%", "PASS"]
    assert rows[2][2:] == ["< 1.00×", rows[2][3], "direction", "PASS"]
    ours = float(rows[1][3].rstrip("×"))
    assert 0.8 <= ours < 1
    assert "2 PASS, 0 FAIL" in result.stdout


def test_a_figure_outside_its_tolerance_fails_and_exits_1(write):
    checks = write("checks.toml", FIG9 + fig9_check("within 20% of tenplex-dp", published=1, relative=0.2)
                   + fig9_check("impossible", published=0.01, relative=0.01))
    result = check_reproductions("--checks", checks, "--reduced")
    assert result.returncode == 1, result.stderr
    verdicts = {row[1]: row[-1] for row in table(result.stdout)[1:]}
    assert verdicts == {"within 20% of tenplex-dp": "PASS", "impossible": "FAIL"}


def test_absent_data_skips_and_runs_nothing(write, tmp_path):
    checks = write("checks.toml", FIG9.replace("data = []", 'data = ["no-such-trace/jobs.csv"]')
                   + fig9_check("impossible", published=0.01, relative=0.01))
    result = check_reproductions("--checks", checks, "--reduced", "--scratch", tmp_path / "scratch")
    assert result.returncode == 0, result.stderr
    assert table(result.stdout)[1][-1] == "SKIP"
    assert "no-such-trace/jobs.csv absent" in result.stdout
    assert not list((tmp_path / "scratch").iterdir())


def test_a_row_the_full_run_lacks_is_a_usage_error(write):
    checks = write("checks.toml", FIG9 + fig9_check("typo", published=1, relative=0.05).replace(
        'at = "tenplex-dp"', 'at = "tenplex_dp"'))
    result = check_reproductions("--checks", checks)
    assert result.returncode == 2
    assert "typo: no row 'fig9' at scheduler.elasticity = \"tenplex_dp\"" in result.stderr
    assert 'fig9 at "tenplex-dp"' in result.stderr  # what the report has


def test_mistakes_in_the_arguments_or_the_table_exit_2(write):
    result = check_reproductions("--only", "no-such-experiment")
    assert result.returncode == 2
    assert "--only no-such-experiment: no such experiment" in result.stderr
    mistakes = {
        "relativ = 0.05": "unknown key 'relativ'",
        "relative = 0.05\nabsolute = 1": "needs exactly one tolerance of relative, absolute, direction; has "
                                         "relative, absolute",
        'direction = "sideways"': "direction: \"above\" or \"below\", got 'sideways'",
    }
    for tolerance, message in mistakes.items():
        checks = write("bad.toml", FIG9 + fig9_check("bad", published=1) + tolerance + "\n")
        result = check_reproductions("--checks", checks, "--reduced")
        assert result.returncode == 2, tolerance
        assert message in result.stderr
    checks = write("broken.toml", "[tenplex\n")
    result = check_reproductions("--checks", checks)
    assert result.returncode == 2
    assert "broken.toml: " in result.stderr and "line 1" in result.stderr


def test_the_published_tenplex_gains_are_reported_as_met_or_missed():
    """The real table: Fig. 9's 24%, as plotted, is met within 15%; 298
    against 576 min is not, and the table says so; the failure sweep, which
    the paper does not have, is held to no published figure."""
    result = check_reproductions("--only", "tenplex", "--reduced")
    assert result.returncode == 1, result.stderr
    rows = table(result.stdout)
    assert rows[0] == HEADER
    assert [row[-1] for row in rows[1:]] == ["PASS", "FAIL", "N/A"]
    assert [row[2] for row in rows[1:]] == ["0.76×", "0.52×", "none"]
    assert [row[4] for row in rows[1:]] == ["±15%", "±15%", "-"]


def test_every_check_of_the_real_table_names_a_figure_of_report(tmp_path):
    spec = importlib.util.spec_from_file_location("check_reproductions", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    experiments = script.load_checks(script.DEFAULT_CHECKS)
    database = tmp_path / "fig9.db"
    assert cli("run", ROOT / "experiments" / "tenplex" / "fig9.toml", "--db", database, "-q").returncode == 0
    report = cli("report", database, "--format", "json")
    assert report.returncode == 0, report.stderr
    figures = set(json.loads(report.stdout)[0]) - {"run", "label", "axes", "status", "seed", "note"}
    assert "avg_jct_s" in figures
    checked = [check for experiment in experiments for check in experiment.checks if check.published is not None]
    assert checked
    # Checks by "case" read the rows of `tessel price` runs.
    priced = set()
    for run in (run for experiment in experiments for run in experiment.runs if run.price):
        result = cli("price", ROOT / "experiments" / run.file, "--format", "json")
        assert result.returncode == 0, result.stderr
        priced |= set(json.loads(result.stdout)[0]) - {"series", "case"}
    for check in checked:
        assert check.figure in (priced if check.by == "case" else figures), check.name
    # Every experiment folder with a README is in the table (quickstart.toml has no published figure).
    folders = {path.parent.name for path in (ROOT / "experiments").glob("*/README.md")}
    assert folders == {experiment.name for experiment in experiments}


def test_a_database_already_in_scratch_is_left_alone(write, tmp_path):
    checks = write("checks.toml", FIG9 + fig9_check("within 20% of tenplex-dp", published=1, relative=0.2))
    scratch = tmp_path / "scratch"
    assert check_reproductions("--checks", checks, "--reduced", "--scratch", scratch).returncode == 0
    database = scratch / "tenplex.db"
    before = database.read_bytes()
    result = check_reproductions("--checks", checks, "--reduced", "--scratch", scratch)
    assert result.returncode == 2
    assert f"{database} exists: remove it, or choose another --scratch" in result.stderr
    assert database.read_bytes() == before


# The 1T row of SC'21 Table 1, priced by `tessel price` (experiments/megatron).
PRICED = """\
[megatron]
runs = [{ price = "megatron/weak_scaling.toml" }]
data = []
"""


def priced_check(name, published, relative):
    return "\n".join([
        "[[megatron.check]]",
        f'name = "{name}"',
        'figure = "flops_per_gpu"',
        'by = "case"',
        'row = { series = "weak_scaling", at = "1T" }',
        'unit = "TFLOP/s"',
        f"published = {published}",
        'source = "a test"',
        f"relative = {relative}",
    ]) + "\n"


def test_a_price_run_is_checked_without_simulating(write, tmp_path):
    checks = write("checks.toml", PRICED + priced_check("near ours", 175, 0.01) + priced_check("far", 100, 0.15))
    scratch = tmp_path / "scratch"
    result = check_reproductions("--checks", checks, "--scratch", scratch)
    assert result.returncode == 1, result.stderr
    rows = table(result.stdout)
    assert rows[1][1:] == ["near ours", "175.00 TFLOP/s", rows[1][3], "±1%", "PASS"]
    assert rows[2][1:] == ["far", "100.00 TFLOP/s", rows[1][3], "±15%", "FAIL"]
    assert not (scratch / "megatron.db").exists()  # nothing was simulated


def test_a_price_run_takes_no_overrides(write):
    checks = write("checks.toml", PRICED.replace('{ price = "megatron/weak_scaling.toml" }',
                                                 '{ price = "megatron/weak_scaling.toml", set = ["a=1"] }')
                   + priced_check("near ours", 175, 0.01))
    result = check_reproductions("--checks", checks)
    assert result.returncode == 2
    assert "runs[0]: unknown key 'set' (known: price)" in result.stderr
