#!/usr/bin/python3
"""Checks every reproduction against its published figures.

Runs each experiment of experiments/reproductions.toml (its full
configuration) once into a scratch database, reads its figures with
`tessel report --by AXIS --format json`, and prints one table: experiment,
figure, published, ours, tolerance, verdict. Exits 1 when any row FAILs
(or tessel fails, a bug), 2 on a usage error (the arguments, the checks
table, or a run that tessel refuses as the user's error), 130 on Ctrl-C,
else 0.

  /usr/bin/python3 scripts/check_reproductions.py                 # everything (tens of minutes on 2 cores)
  /usr/bin/python3 scripts/check_reproductions.py --only fgd -j 2  # one experiment
  /usr/bin/python3 scripts/check_reproductions.py --reduced        # the CI-sized runs: checks the machinery,
                                                                   # not the reproductions

An experiment whose files under ../shared/data are absent gives SKIP rows.
Standard library only.
"""

import argparse
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
DEFAULT_CHECKS = EXPERIMENTS / "reproductions.toml"

# The units a published value may be given in, as multiples of the figure's
# own (seconds, or a fraction for "%").
UNITS = {"s": 1.0, "h": 1 / 3600, "%": 100.0, "TFLOP/s": 1e-12}
TOLERANCES = ("relative", "absolute", "direction")


class UsageError(Exception):
    """The user's mistake: arguments, the checks table, a failed run's config. Exit 2."""


class RunFailed(Exception):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


@dataclass
class RowSelector:
    series: str
    at: object  # the --by axis' value, as the report's JSON gives it


@dataclass
class Check:
    name: str
    published: float | None  # None: no published figure to compare with
    source: str
    figure: str = ""
    by: str = ""
    over: list = field(default_factory=list)
    row: RowSelector | None = None
    divided_by: RowSelector | None = None
    unit: str = "s"
    tolerance: str = ""  # one of TOLERANCES
    bound: object = None  # the tolerance's value: a number, or "above" / "below"


@dataclass
class Run:
    file: str
    set: list
    reduced: list
    price: bool = False  # `tessel price FILE`: rows by "case", no simulation


@dataclass
class Experiment:
    name: str
    runs: list
    data: list
    checks: list


# --- the checks table -------------------------------------------------------


def take(table, key, kind, where, default=None):
    """table[key] checked against kind; `where` names it in the error."""
    if key not in table:
        if default is not None:
            return default
        raise UsageError(f"{where}: missing key '{key}'")
    value = table[key]
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise UsageError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def refuse_unknown(table, known, where):
    for key in table:
        if key not in known:
            raise UsageError(f"{where}: unknown key '{key}' (known: {', '.join(known)})")


def string_list(table, key, where):
    values = take(table, key, list, where, default=[])
    for value in values:
        if not isinstance(value, str):
            raise UsageError(f"{where}.{key}: expected strings, got {value!r}")
    return values


def parse_selector(table, where):
    refuse_unknown(table, ("series", "at"), where)
    return RowSelector(take(table, "series", str, where), take(table, "at", (str, int, float, dict), where))


def parse_check(table, where):
    refuse_unknown(table, ("name", "figure", "by", "over", "row", "divided_by", "unit", "published", "source")
                   + TOLERANCES, where)
    name = take(table, "name", str, where)
    source = take(table, "source", str, where)
    published = take(table, "published", (int, float, str), where)
    if isinstance(published, str):
        if published != "none":
            raise UsageError(f"{where}.published: a number, or \"none\" when there is no figure to compare")
        extra = [key for key in table if key not in ("name", "published", "source")]
        if extra:
            raise UsageError(f"{where}: published = \"none\" checks nothing, yet it sets {', '.join(extra)}")
        return Check(name, None, source)
    check = Check(name, float(published), source,
                  figure=take(table, "figure", str, where),
                  by=take(table, "by", str, where),
                  over=string_list(table, "over", where),
                  row=parse_selector(take(table, "row", dict, where), f"{where}.row"),
                  unit=take(table, "unit", str, where, default="s"))
    if "divided_by" in table:
        check.divided_by = parse_selector(take(table, "divided_by", dict, where), f"{where}.divided_by")
    if check.unit not in UNITS:
        raise UsageError(f"{where}.unit: '{check.unit}' is not one of {', '.join(UNITS)}")
    if check.divided_by and "unit" in table:
        raise UsageError(f"{where}: a ratio has no unit, yet unit = '{check.unit}'")
    given = [key for key in TOLERANCES if key in table]
    if len(given) != 1:
        raise UsageError(f"{where}: needs exactly one tolerance of {', '.join(TOLERANCES)}; has "
                         f"{', '.join(given) or 'none'}")
    check.tolerance = given[0]
    if check.tolerance == "direction":
        check.bound = take(table, "direction", str, where)
        if check.bound not in ("above", "below"):
            raise UsageError(f"{where}.direction: \"above\" or \"below\", got '{check.bound}'")
    else:
        check.bound = float(take(table, check.tolerance, (int, float), where))
        if check.bound < 0:
            raise UsageError(f"{where}.{check.tolerance}: a tolerance cannot be negative")
        if check.tolerance == "relative" and check.published == 0:
            raise UsageError(f"{where}: a relative tolerance of a published 0 allows nothing; use absolute")
    return check


def load_checks(path):
    try:
        with open(path, "rb") as f:
            document = tomllib.load(f)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: {e}") from None
    experiments = []
    for name, table in document.items():
        where = f"{path.name}: [{name}]"
        if not isinstance(table, dict):
            raise UsageError(f"{where}: expected a table of runs and checks")
        refuse_unknown(table, ("runs", "data", "check"), where)
        runs = []
        for i, run in enumerate(take(table, "runs", list, where)):
            run_where = f"{where}.runs[{i}]"
            if not isinstance(run, dict):
                raise UsageError(f"{run_where}: expected {{ file, set, reduced }} or {{ price }}")
            if "price" in run:
                refuse_unknown(run, ("price",), run_where)
                file = take(run, "price", str, run_where)
                if not (EXPERIMENTS / file).is_file():
                    raise UsageError(f"{run_where}.price: no file experiments/{file}")
                runs.append(Run(file, [], [], price=True))
                continue
            refuse_unknown(run, ("file", "set", "reduced", "price"), run_where)
            file = take(run, "file", str, run_where)
            if not (EXPERIMENTS / file).is_file():
                raise UsageError(f"{run_where}.file: no experiment file experiments/{file}")
            runs.append(Run(file, string_list(run, "set", run_where), string_list(run, "reduced", run_where)))
        checks = [parse_check(check, f"{where}.check[{i}]")
                  for i, check in enumerate(take(table, "check", list, where))]
        if not checks:
            raise UsageError(f"{where}: no checks")
        if not runs and any(check.published is not None for check in checks):
            raise UsageError(f"{where}: checks figures but runs nothing")
        experiments.append(Experiment(name, runs, string_list(table, "data", where), checks))
    if not experiments:
        raise UsageError(f"{path}: no experiments")
    return experiments


# --- running and reading ----------------------------------------------------


def tessel_command(tessel, *args, what):
    result = subprocess.run([str(tessel), *map(str, args)], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise RunFailed(f"{what} failed (exit {result.returncode}): {result.stderr.strip()}", result.returncode)
    return result.stdout


def same_value(reported, wanted):
    """Whether a report's axis value is the one wanted. The store keeps a
    table-valued axis (a whole stage, say) as its TOML text."""
    if isinstance(wanted, dict) and isinstance(reported, str):
        try:
            return tomllib.loads(f"value = {reported}")["value"] == wanted
        except tomllib.TOMLDecodeError:
            return False
    return reported == wanted


class Reports:
    """`tessel report --by --over --format json` of one database, each asked once;
    with the rows of `tessel price` runs, which are by "case"."""

    def __init__(self, tessel, database, priced=()):
        self.tessel, self.database, self.cache = tessel, database, {}
        if priced:
            self.cache[("case", ())] = list(priced)

    def rows(self, by, over):
        key = (by, tuple(over))
        if key not in self.cache:
            args = ["report", self.database, "--by", by, "--format", "json"]
            for axis in over:
                args += ["--over", axis]
            self.cache[key] = json.loads(tessel_command(self.tessel, *args, what=f"tessel report --by {by}"))
        return self.cache[key]

    def figure(self, check, selector):
        """The figure of the row that selector names, or None when the report has no such row."""
        for row in self.rows(check.by, check.over):
            if row["series"] == selector.series and same_value(row[check.by], selector.at):
                if check.figure not in row:
                    known = [k for k in row if k not in ("series", check.by, "runs", "run_ids")]
                    raise UsageError(f"{check.name}: no figure '{check.figure}' (figures: {', '.join(known)})")
                value = row[check.figure]
                return math.nan if value is None else float(value)  # null: a figure over no jobs
        return None

    def available(self, check):
        return "; ".join(f"{row['series']} at {json.dumps(row[check.by])}" for row in self.rows(check.by, check.over))


@dataclass
class Result:
    experiment: str
    check: Check
    ours: float | None = None
    verdict: str = ""
    note: str = ""


def verdict(check, ours):
    if check.tolerance == "relative":
        passes = abs(ours / check.published - 1) <= check.bound
    elif check.tolerance == "absolute":
        passes = abs(ours - check.published) <= check.bound
    else:
        passes = ours > check.published if check.bound == "above" else ours < check.published
    return "PASS" if passes else "FAIL"


def measure(check, reports, reduced):
    """Ours, in the published value's unit; None (with why) when the run has no such row."""
    values = []
    for selector in (check.row, check.divided_by):
        if selector is None:
            continue
        value = reports.figure(check, selector)
        if value is None:
            missing = f"no row '{selector.series}' at {check.by} = {json.dumps(selector.at)}"
            if reduced:
                return None, f"{missing} in the reduced run"
            raise UsageError(f"{check.name}: {missing} (the report has: {reports.available(check)})")
        if math.isnan(value):
            return None, f"'{selector.series}' has no {check.figure} at {check.by} = {json.dumps(selector.at)}: " \
                         "a figure over no jobs"
        values.append(value)
    if len(values) == 2:
        if values[1] == 0:
            return None, f"'{check.divided_by.series}' is 0 there: no ratio"
        return values[0] / values[1], ""
    return values[0] * UNITS[check.unit], ""


def check_experiment(experiment, tessel, shared_data, scratch, jobs, reduced):
    results = [Result(experiment.name, check) for check in experiment.checks]
    for result in results:
        if result.check.published is None:
            result.verdict, result.note = "N/A", result.check.source
    pending = [r for r in results if not r.verdict]
    if not pending:
        return results
    absent = [f"../shared/data/{path}" for path in experiment.data if not (shared_data / path).is_file()]
    if absent:
        for result in pending:
            result.verdict, result.note = "SKIP", f"{', '.join(absent)} absent"
        return results
    database = scratch / f"{experiment.name}.db"
    priced = []
    for run in experiment.runs:
        if run.price:
            priced += json.loads(tessel_command(tessel, "price", EXPERIMENTS / run.file, "--format", "json",
                                                what=f"tessel price experiments/{run.file}"))
    if database.exists():
        # Its runs would be averaged with the new ones; and it may be someone's results.
        raise UsageError(f"{database} exists: remove it, or choose another --scratch")
    for run in (run for run in experiment.runs if not run.price):
        args = ["run", EXPERIMENTS / run.file, "--db", database, "-q"]
        if jobs:
            args += ["-j", jobs]
        for override in run.set + (run.reduced if reduced else []):
            args += ["--set", override]
        started = time.monotonic()
        print(f"running experiments/{run.file}{' (reduced)' if reduced else ''} ...", file=sys.stderr, flush=True)
        tessel_command(tessel, *args, what=f"tessel run experiments/{run.file}")
        print(f"  done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    reports = Reports(tessel, database, priced)
    for result in pending:
        result.ours, why = measure(result.check, reports, reduced)
        if result.ours is None:
            result.verdict, result.note = "SKIP", why
        else:
            result.verdict = verdict(result.check, result.ours)
    return results


# --- the table --------------------------------------------------------------


def shown(check, value):
    """A value in the unit its check is published in: ratios and fractions to 2 places, seconds whole."""
    if check.divided_by:
        return f"{value:.2f}×"
    return f"{value:.0f} s" if check.unit == "s" else f"{value:.2f} {check.unit}"


def published_text(check):
    if check.published is None:
        return "none"
    text = shown(check, check.published)
    return ({"above": "> ", "below": "< "}[check.bound] + text) if check.tolerance == "direction" else text


def tolerance_text(check):
    if check.published is None:
        return "-"
    if check.tolerance == "relative":
        return f"±{check.bound * 100:g}%"
    if check.tolerance == "absolute":
        return f"±{check.bound:g}" + ("" if check.divided_by else {"s": " s", "h": " h", "%": " points"}[check.unit])
    return "direction"


def table_lines(results, markdown):
    header = ["experiment", "figure", "published", "ours", "tolerance", "verdict"] + (["source"] if markdown else [])
    rows = []
    for r in results:
        ours = "-" if r.ours is None else shown(r.check, r.ours)
        rows.append([r.experiment, r.check.name, published_text(r.check), ours, tolerance_text(r.check), r.verdict]
                    + ([r.check.source] if markdown else []))
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    widths = [max(len(row[c]) for row in [header] + rows) for c in range(len(header))]
    right = {2, 3, 4}  # numbers
    return ["  ".join(cell.rjust(w) if c in right else cell.ljust(w) for c, (cell, w) in enumerate(zip(row, widths)))
            .rstrip() for row in [header] + rows]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", metavar="NAME", default=[],
                        help="check only this experiment (repeatable); names are the tables of the checks file")
    parser.add_argument("-j", "--jobs", type=int, metavar="N", help="runs at a time, passed to `tessel run -j`")
    parser.add_argument("--reduced", action="store_true",
                        help="run each experiment reduced, as tests/test_experiments.cpp does: tests this "
                             "script, not the reproductions; rows the reduced run lacks are SKIPs")
    parser.add_argument("--checks", type=pathlib.Path, default=DEFAULT_CHECKS, metavar="FILE",
                        help="the table of checks (default: experiments/reproductions.toml)")
    parser.add_argument("--tessel", metavar="PATH", help="the tessel command (default: $TESSEL, else "
                        "build/runners/cli/tessel)")
    parser.add_argument("--scratch", type=pathlib.Path, metavar="DIR",
                        help="keep the run databases here (default: a temporary directory, removed)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown, with sources")
    args = parser.parse_args(argv)
    try:
        if args.jobs is not None and args.jobs < 1:
            raise UsageError("--jobs: at least 1")
        tessel = pathlib.Path(args.tessel or os.environ.get("TESSEL") or ROOT / "build" / "runners" / "cli" / "tessel")
        if not (tessel.is_file() and os.access(tessel, os.X_OK)):
            raise UsageError(f"no tessel command at {tessel}: build it (meson compile -C build) or give --tessel PATH")
        experiments = load_checks(args.checks.resolve())
        names = [e.name for e in experiments]
        for name in args.only:
            if name not in names:
                raise UsageError(f"--only {name}: no such experiment in {args.checks} ({', '.join(names)})")
        chosen = [e for e in experiments if not args.only or e.name in args.only]
        shared_data = pathlib.Path(os.environ.get("TESSEL_SHARED_DATA") or ROOT.parent / "shared" / "data")
        scratch = args.scratch or pathlib.Path(tempfile.mkdtemp(prefix="tessel-reproductions-"))
        scratch.mkdir(parents=True, exist_ok=True)
        # Refused before anything runs, so that a full run is never thrown away.
        for experiment in chosen:
            if (scratch / f"{experiment.name}.db").exists():
                raise UsageError(f"{scratch / f'{experiment.name}.db'} exists: remove it, or choose another --scratch")
        try:
            results = []
            for experiment in chosen:
                results += check_experiment(experiment, tessel, shared_data, scratch.resolve(), args.jobs,
                                            args.reduced)
        finally:
            if args.scratch is None:
                shutil.rmtree(scratch, ignore_errors=True)
    except UsageError as e:
        print(f"check_reproductions: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"check_reproductions: {e}", file=sys.stderr)
        return 2 if e.code == 2 else 1
    except KeyboardInterrupt:
        print("check_reproductions: interrupted", file=sys.stderr)
        return 130
    print("\n".join(table_lines(results, args.markdown)))
    # Why a row was skipped or has nothing to compare (a Markdown table shows the latter as its source).
    notes = [f"{r.experiment}, {r.check.name}: {r.verdict}, {r.note}" for r in results
             if r.note and not (args.markdown and r.note == r.check.source)]
    if notes:
        print("\n" + "\n".join(notes))
    failed = sum(r.verdict == "FAIL" for r in results)
    counts = {v: sum(r.verdict == v for r in results) for v in ("PASS", "FAIL", "SKIP", "N/A")}
    print("\n" + ", ".join(f"{n} {v}" for v, n in counts.items()) + (" (reduced runs)" if args.reduced else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
