"""The package under test is the wheel the suite built, installed: not the source tree on
the path, not a stale install. (The suite names the wheel in PROXYPOOL_TEST_WHEEL; by
hand, without it, this test is skipped.)"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

import pytest

import proxypool_client

SOURCE = Path(__file__).resolve().parents[1] / "src" / "proxypool_client"


def test_the_package_is_the_installed_wheel_of_this_tree() -> None:
    wheel = os.environ.get("PROXYPOOL_TEST_WHEEL")
    if not wheel:
        pytest.skip("PROXYPOOL_TEST_WHEEL is not set (the suite sets it)")
    installed = Path(proxypool_client.__file__).resolve().parent
    assert "site-packages" in installed.parts, installed
    assert SOURCE not in (installed, *installed.parents)
    version = metadata.version("proxypool-client")
    assert version == proxypool_client.__version__
    assert Path(wheel).name.startswith(f"proxypool_client-{version}-py3-none-any"), wheel
    # Every file of the source, py.typed included, installed as it is in the tree.
    for source in SOURCE.iterdir():
        if source.suffix in (".py", ".typed"):
            copy = installed / source.name
            assert copy.is_file(), f"{source.name} is not in the wheel"
            assert copy.read_bytes() == source.read_bytes(), f"{source.name} is not this tree's"
