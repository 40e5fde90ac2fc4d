"""The wheel as users get it: `maturin build` (the dev profile, so that it
reuses the artifacts scripts/test built), installed with pip, offline, into
a fresh virtual environment that sees none of this Python's packages; there
it maps a file, reads it back, and its PEP 561 files let `mypy --strict`
check a script against the wheel's stubs.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile

from conftest import ROOT

# Runs in the virtual environment: where pagepilot was imported from, what
# it installed, and a file read back through a region (a quarter of it in
# memory at a time). Typed: mypy checks it against the installed stubs.
_SMOKE = '''
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import sys
import sysconfig
import tempfile

import pagepilot


def read_back(path: pathlib.Path) -> bool:
    data = os.urandom(1 << 20)
    path.write_bytes(data)
    region: pagepilot.Region
    with pagepilot.map_file(path, "256K", "mru") as region:
        view = memoryview(region)
        same = bytes(view) == data and bytes(view[-5000:]) == data[-5000:]
        view.release()
    return same and region.closed


def main() -> None:
    package = pathlib.Path(pagepilot.__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        same = read_back(pathlib.Path(tmp) / "data.bin")
    files = importlib.metadata.files("pagepilot") or []
    print(json.dumps({
        "prefix": sys.prefix,
        "isolated": sys.prefix != sys.base_prefix,
        "package": str(package),
        "site_packages": sysconfig.get_paths()["purelib"],
        "py_typed": (package / "py.typed").is_file(),
        "stub": (package / "_pagepilot.pyi").is_file(),
        "recorded": sorted(str(f) for f in files if str(f).startswith("pagepilot/")),
        "numpy": importlib.util.find_spec("numpy") is not None,
        "read_back": same,
        "version": pagepilot.__version__,
    }))


main()
'''


def _run(args, **kw):
    # Nothing of this Python's search path leaks into the environment's.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "MYPYPATH")}
    out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600, **kw)
    assert out.returncode == 0, f"{args}:\n{out.stdout}\n{out.stderr}"
    return out


def test_a_maturin_wheel_installs_offline_into_a_fresh_venv_and_maps_a_file(tmp_path):
    wheels = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "maturin", "build", "--profile", "dev",
         "--interpreter", sys.executable, "--out", str(wheels)],
        cwd=ROOT / "python",
    )
    [wheel] = wheels.glob("pagepilot-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("__init__.py", "_pagepilot.pyi", "py.typed"):
        assert f"pagepilot/{name}" in names, sorted(names)
    assert not any(n.startswith(("tests/", "pagepilot/tests")) for n in names), sorted(names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    # Offline, dependencies included: the wheel needs nothing else.
    _run([python, "-m", "pip", "install", "-q", "--no-index", str(wheel)])

    smoke = tmp_path / "smoke.py"
    smoke.write_text(_SMOKE)
    report = json.loads(_run([python, str(smoke)], cwd=tmp_path).stdout)
    assert report["prefix"] == str(venv) and report["isolated"]
    assert report["package"] == os.path.join(report["site_packages"], "pagepilot")
    assert report["py_typed"] and report["stub"]
    installed = {"pagepilot/py.typed", "pagepilot/_pagepilot.pyi", "pagepilot/__init__.py"}
    assert installed <= set(report["recorded"]), report["recorded"]
    assert not report["numpy"], "the virtual environment sees this Python's numpy"
    assert report["read_back"]
    assert wheel.name.startswith(f"pagepilot-{report['version']}-")

    # The wheel's stubs, seen by mypy through the environment's interpreter.
    checked = _run(
        [sys.executable, "-m", "mypy", "--strict", "--python-executable", python,
         "--cache-dir", str(tmp_path / "mypy-cache"), str(smoke)],
        cwd=tmp_path,
    )
    assert "Success: no issues found in 1 source file" in checked.stdout
    # 80 MB of debug build: kept only when the test fails.
    shutil.rmtree(venv)
    shutil.rmtree(wheels)
