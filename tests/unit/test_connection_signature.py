"""Issue 20 point 2: a connection string's shared access signature is checked as the
service checks it (docs/api/client.md, connection strings)."""

from __future__ import annotations

import time

import pytest

from sbqueue import ServiceBusClient
from sbqueue.core.connection import check_signature
from sbqueue.exceptions import ServiceBusAuthenticationError
from sbqueue.management import ServiceBusAdministrationClient


def _conn(expiry: str) -> str:
    return ("Endpoint=/tmp/sbq-never-created;SharedAccessSignature=SharedAccessSignature "
            f"sr=sb%3A%2F%2Fns&sig=abc%3D&se={expiry}&skn=send")


@pytest.mark.parametrize("open_with", [ServiceBusClient.from_connection_string,
                                       ServiceBusAdministrationClient.from_connection_string])
def test_an_expired_signature_is_an_authentication_error(open_with) -> None:
    expired = str(int(time.time()) - 60)
    with pytest.raises(ServiceBusAuthenticationError, match=f"expired.*se={expired}"):
        open_with(_conn(expired))


def test_a_signature_without_expiry_is_refused_and_a_live_one_passes() -> None:
    with pytest.raises(ServiceBusAuthenticationError, match="names no expiry"):
        check_signature("SharedAccessSignature sr=x&sig=y")
    check_signature(f"SharedAccessSignature sr=x&sig=y&se={int(time.time()) + 3600}")
    check_signature(None)  # a connection string without a signature: nothing to check
