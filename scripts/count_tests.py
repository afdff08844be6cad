#!/usr/bin/env python3
"""Prints "N passed, N failed" from meson's test log.

Usage: count_tests.py TESTLOG_JSON EXIT_STATUS

Counts doctest test cases where a suite printed doctest's summary, pytest
cases where it printed pytest's, and whole suites otherwise. A suite that failed without a failed test case (a
crash, a timeout) counts as one failure, and so does a non-zero exit status
with nothing failed (set-up or build broke before any test ran).
"""
import json
import re
import sys

SUMMARY = re.compile(r"\[doctest\] test cases:\s*\d+\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")
# pytest's last line: "3 failed, 40 passed, 2 skipped in 9.81s" (any order, any subset).
PYTEST = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s", re.MULTILINE)


def counts(stdout):
    """(passed, failed) from a doctest or pytest summary, or None."""
    match = SUMMARY.search(stdout)
    if match:
        return int(match[1]), int(match[2])
    matches = PYTEST.findall(stdout)
    if matches:
        found = dict((word, int(n)) for n, word in re.findall(r"(\d+) (\w+)", matches[-1]))
        return found.get("passed", 0), found.get("failed", 0) + found.get("errors", 0) + found.get("error", 0)
    return None

passed = failed = 0
try:
    with open(sys.argv[1], encoding="utf-8") as log:
        for line in log:
            test = json.loads(line)
            ok = test.get("result") in ("OK", "EXPECTEDFAIL")
            if test.get("result") == "SKIP":
                continue
            found = counts(test.get("stdout") or "")
            suite_passed, suite_failed = found if found else (int(ok), int(not ok))
            if not ok and suite_failed == 0:
                suite_failed = 1
            passed += suite_passed
            failed += suite_failed
except FileNotFoundError:
    pass
if len(sys.argv) > 2 and sys.argv[2] != "0" and failed == 0:
    failed = 1
print(f"{passed} passed, {failed} failed")
