"""The `tessel` command of a pip-installed tessel: the C++ program shipped
inside this package, run in this process's place."""

import os
import sys


def main():
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tessel")
    os.execv(program, [program, *sys.argv[1:]])
