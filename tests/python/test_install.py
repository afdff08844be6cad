"""`pip install --no-build-isolation .` from a fresh clone, then tessel from
another directory: the wheel holds the core, its plugins (found beside
libtessel, wherever pip put it), the real-node commands' library, the
bridge and the package."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the repository, to clone it")
def test_pip_install_from_a_fresh_clone(tmp_path):
    clone, venv = tmp_path / "clone", tmp_path / "venv"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    # Debian's packages (meson-python, pybind11, pandas) are all it needs: no index.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index",
                                "--quiet", str(clone)], capture_output=True, text=True, timeout=1500)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "sf.toml").write_text(textwrap.dedent(f"""\
        [cluster]
        nodes = 4
        gpus_per_node = 4
        [workload]
        kind = "synthetic"
        jobs = 30
        jobs_per_hour = 8
        [scheduler]
        allocation = {{ plugin = "python", module = "{ROOT}/examples/python/policies/smallest_first.py", class = "SmallestFirst" }}
        placement = {{ plugin = "consolidated" }}
        """))
    script = textwrap.dedent("""\
        import tessel
        assert "site-packages" in tessel.__file__, tessel.__file__
        res = tessel.run("sf.toml", db="sf.db")
        print(res.report()["finished"][0])
        """)
    # Nothing of the build tree: meson test's LD_LIBRARY_PATH would put its
    # libtessel ahead of the wheel's own.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TESSEL_PLUGIN_PATH", "LD_LIBRARY_PATH")}
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", script], cwd=elsewhere, capture_output=True,
                         text=True, env=env, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "30"

    # The real-node commands' library, in the package beside libtessel, is
    # what the `tessel` script's program opens for them; the program itself
    # does not link OpenSSL.
    package = next((venv / "lib").glob("python3*/site-packages/tessel"))
    assert (package / "libtessel_nodes.so").exists()
    needed = subprocess.run(["readelf", "-d", str(package / "tessel")], capture_output=True, text=True, check=True)
    assert "[libtessel.so]" in needed.stdout
    assert "libssl" not in needed.stdout and "libcrypto" not in needed.stdout
    secret = elsewhere / "secret"
    secret.write_text("a-secret-for-the-wheel-test\n")
    secret.chmod(0o600)
    status = subprocess.run([str(venv / "bin" / "tessel"), "status", "--scheduler", "127.0.0.1:1", "--insecure",
                             "--secret-file", str(secret)], cwd=elsewhere, capture_output=True, text=True,
                            env={**env, "LD_DEBUG": "libs"}, timeout=60)
    assert status.returncode == 2, status.stderr
    assert "tessel: cannot reach the scheduler at 127.0.0.1:1" in status.stderr
    assert f"calling init: {package.resolve() / 'libtessel_nodes.so'}" in status.stderr
