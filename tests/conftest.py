"""One SparkSession for the whole run (starting one costs seconds), tuned for small tables."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from sbqueue.spark import get_session, stop_session

    session = get_session("sbqueue-tests")
    yield session
    stop_session()


@pytest.fixture
def namespace_root(tmp_path: Path) -> str:
    return str(tmp_path / f"ns-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def admin(spark: object, namespace_root: str) -> object:
    from sbqueue.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(namespace_root, spark=spark)  # type: ignore[arg-type]
