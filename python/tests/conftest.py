"""Shared fixtures: data files with known contents, the repository root."""

import os
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def data_file(tmp_path):
    """A 4 MiB file of random bytes (1024 pages), and its contents."""
    rng = np.random.default_rng(17)
    data = rng.integers(0, 256, size=4 << 20, dtype=np.uint8)
    path = tmp_path / "data.bin"
    data.tofile(path)
    return path, data


@pytest.fixture
def zero_file(tmp_path):
    """A 1 MiB file of zeros."""
    path = tmp_path / "zeros.bin"
    with open(path, "wb") as f:
        f.write(bytes(1 << 20))
    return path


def file_bytes(path):
    """The file's contents read with plain I/O (not through a region)."""
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8)


def pagepilot_cli():
    """The CLI binary: $PAGEPILOT_BIN, target/debug/pagepilot, or built now."""
    env = os.environ.get("PAGEPILOT_BIN")
    if env:
        return env
    built = ROOT / "target" / "debug" / "pagepilot"
    if not built.exists():
        import subprocess

        subprocess.run(
            ["cargo", "build", "-q", "-p", "pagepilot-cli"], cwd=ROOT, check=True
        )
    return str(built)


def rust_example(name):
    """A Rust example of crates/python (the Rust side of a comparison),
    built now (cargo is quick when it is up to date)."""
    import subprocess

    subprocess.run(
        ["cargo", "build", "-q", "-p", "pagepilot-python", "--example", name],
        cwd=ROOT, check=True,
    )
    return str(ROOT / "target" / "debug" / "examples" / name)
