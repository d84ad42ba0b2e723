"""Issue 20 points 1 and 2: ported programs catch the SDK's error classes and import the
SDK's names (written the way an azure-servicebus program writes them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError

import sbqueue.exceptions as errors
from sbqueue import ServiceBusConnectionStringProperties, parse_connection_string
from sbqueue.management import ApiVersion, ServiceBusAdministrationClient


def test_every_sbqueue_error_is_an_azure_error() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        if name == "MessageAlreadySettled":
            assert issubclass(cls, ValueError)  # as in the SDK
        else:
            assert issubclass(cls, (errors.ServiceBusError, AzureError)), name
    assert issubclass(errors.ServiceBusError, AzureError)
    assert issubclass(errors.MessagingEntityNotFoundError, ResourceNotFoundError)
    assert issubclass(errors.MessagingEntityAlreadyExistsError, ResourceExistsError)


def test_a_missing_queue_is_azure_cores_resource_not_found(tmp_path: Path) -> None:
    admin = ServiceBusAdministrationClient(str(tmp_path / "ns"))  # no Spark for a read
    try:
        admin.get_queue("orders")
    except ResourceNotFoundError as exc:  # what an SDK program writes
        assert "orders" in str(exc) and exc.message == str(exc)
    else:
        pytest.fail("get_queue of a missing queue raised nothing")


def test_the_sdks_other_error_names_exist() -> None:
    for name in ("ServiceBusConnectionError", "ServiceBusAuthorizationError",
                 "ServiceBusAuthenticationError", "ServiceBusCommunicationError",
                 "ServiceBusServerBusyError", "AutoLockRenewFailed", "AutoLockRenewTimeout"):
        assert issubclass(getattr(errors, name), errors.ServiceBusError), name


def test_parse_connection_string_names_the_parts_as_the_sdk_does() -> None:
    props = parse_connection_string(
        "Endpoint=file:///data/sb;SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=abc=;EntityPath=orders")
    assert isinstance(props, ServiceBusConnectionStringProperties)
    assert (props.endpoint, props.fully_qualified_namespace, props.entity_path,
            props.shared_access_key_name, props.shared_access_key) == (
        "file:///data/sb", "file:///data/sb", "orders", "RootManageSharedAccessKey", "abc=")
    assert props.shared_access_signature is None


def test_api_versions_are_the_sdks() -> None:
    assert ApiVersion.V2021_05.value == "2021-05" and ApiVersion.V2017_04.value == "2017-04"


def test_import_sbqueue_makes_concurrent_futures_available() -> None:
    """A fresh interpreter: ``import concurrent`` alone does not load ``futures``."""
    code = ("import concurrent, sbqueue\n"
            "with concurrent.futures.ThreadPoolExecutor(1) as pool:\n"
            "    print(pool.submit(lambda: 42).result())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "42", out.stderr[-2000:]
