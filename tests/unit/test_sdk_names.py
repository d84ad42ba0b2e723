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
    # commits that keep losing to concurrent writers are what the SDK calls a busy server
    assert issubclass(errors.StorageConflictError, errors.ServiceBusServerBusyError)


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


def test_transport_keywords_are_accepted_and_misspelt_ones_refused(tmp_path: Path) -> None:
    """Issue 20 point 3: ``max_wiat_time=5`` is a TypeError naming it, before anything
    opens; the SDK's transport keywords are accepted and ignored."""
    from sbqueue import ServiceBusClient

    client = ServiceBusClient(str(tmp_path / "ns"), logging_enable=True, retry_total=3,
                              uamqp_transport=False)
    with pytest.raises(TypeError, match=r"get_queue_receiver\(\).*'max_wiat_time'"):
        client.get_queue_receiver("q", max_wiat_time=5)
    with pytest.raises(TypeError, match=r"get_queue_sender\(\).*'retries'"):
        client.get_queue_sender("q", retries=2)
    with pytest.raises(TypeError, match=r"ServiceBusClient\(\).*'bogus'"):
        ServiceBusClient(str(tmp_path / "ns"), bogus=1)
    admin = ServiceBusAdministrationClient.from_connection_string(
        f"Endpoint={tmp_path / 'ns'}", api_version=ApiVersion.V2021_05)
    with pytest.raises(TypeError, match=r"list_queues\(\).*'top'"):
        admin.list_queues(top=5)
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue("q", api_version="2021-05", logging_enable=True)


def test_listing_sessions_refuses_a_misspelt_keyword(tmp_path: Path) -> None:
    """``state_updated_after`` is honoured (tests/integration/test_sdk_parity.py); a
    misspelling of it is refused, not silently ignored."""
    from sbqueue import ServiceBusClient

    client = ServiceBusClient(str(tmp_path / "ns"))
    with pytest.raises(TypeError, match=r"list_queue_sessions\(\).*'state_updated_afte'"):
        client.list_queue_sessions("q", state_updated_afte=None)


def test_an_unreachable_connect_server_is_a_communication_error() -> None:
    """Issue 20 point 2: ``SPARK_REMOTE`` naming a server that does not answer raises the
    SDK's ServiceBusCommunicationError naming it, at once (the Connect client would retry
    for minutes)."""
    import os
    import subprocess
    import sys

    program = ("from sbqueue.spark import get_session\n"
               "from sbqueue.exceptions import ServiceBusCommunicationError\n"
               "try:\n    get_session()\nexcept ServiceBusCommunicationError as e:\n"
               "    print('RAISED', e)\n")
    env = {**os.environ, "SPARK_REMOTE": "sc://localhost:1"}
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "RAISED the Spark Connect server 'sc://localhost:1'" in done.stdout, done.stderr
