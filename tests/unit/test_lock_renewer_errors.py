"""Issue 20 point 2: what an ``AutoLockRenewer`` reports, as the SDK does (S6.5): a failed
renewal reaches ``on_lock_renew_failure`` as ``AutoLockRenewFailed`` carrying its cause;
the end of the renewal duration leaves ``AutoLockRenewTimeout`` in the message's
``auto_renew_error`` and calls back only when the lock already expired. The receiver here
is a stand-in for the renewer's one call into it; the renewal itself is tested against
real tables in tests/integration (test_client, test_sdk_parity)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from sbqueue import AutoLockRenewer, ServiceBusReceivedMessage
from sbqueue.core.clock import utcnow
from sbqueue.exceptions import AutoLockRenewFailed, AutoLockRenewTimeout


class _Receiver:
    lock_duration = timedelta(seconds=60)

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def renew_message_locks(self, messages: list[Any]) -> dict[int, Exception]:
        if self.error is not None:
            raise self.error
        return {}


def _message(lock_left: timedelta) -> ServiceBusReceivedMessage:
    return ServiceBusReceivedMessage(b"x", broker={
        "sequence_number": 1, "lock_token": "t", "locked_until_utc": utcnow() + lock_left})


def _run(receiver: _Receiver, message: ServiceBusReceivedMessage, duration: float
         ) -> list[tuple[Any, Exception | None]]:
    heard: list[tuple[Any, Exception | None]] = []
    done = threading.Event()

    def failed(target: Any, error: Exception | None) -> None:
        heard.append((target, error))
        done.set()

    with AutoLockRenewer(on_lock_renew_failure=failed) as renewer:
        renewer.register(receiver, message, max_lock_renewal_duration=duration)  # type: ignore[arg-type]
        done.wait(3)
    return heard


def test_a_failed_renewal_is_auto_lock_renew_failed_with_its_cause() -> None:
    cause = RuntimeError("the namespace folder is gone")
    message = _message(timedelta(seconds=1))
    [(target, error)] = _run(_Receiver(cause), message, 30)
    assert target is message and isinstance(error, AutoLockRenewFailed)
    assert error.inner_exception is cause and message.auto_renew_error is error


def test_the_end_of_the_duration_is_auto_lock_renew_timeout() -> None:
    expired = _message(timedelta(milliseconds=100))  # not renewed here: the stand-in
    [(target, error)] = _run(_Receiver(), expired, 0.5)  # leaves its lock as it was
    assert target is expired and isinstance(error, AutoLockRenewTimeout)
    held = _message(timedelta(minutes=5))
    assert _run(_Receiver(), held, 0.5) == []  # still locked: no call, the error kept
    assert isinstance(held.auto_renew_error, AutoLockRenewTimeout)
