"""The one exception hierarchy of sbqueue (SPEC S17).

Names and bases follow azure-servicebus 7.14 so that ported code catches the same classes:
``ServiceBusError`` is azure-core's ``AzureError``, and the administration client's
not-found and already-exists errors are azure-core's ``ResourceNotFoundError`` and
``ResourceExistsError`` too (what SDK programs catch around ``create_*`` / ``get_*``).
Every error says what was wrong and with which value; an operation that raises leaves no
partial effect.
"""

from __future__ import annotations

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError

__all__ = [
    "AutoLockRenewFailed",
    "AutoLockRenewTimeout",
    "InvalidOperationError",
    "MessageAlreadySettled",
    "MessageLockLostError",
    "MessageNotFoundError",
    "MessageSizeExceededError",
    "MessagingEntityAlreadyExistsError",
    "MessagingEntityDisabledError",
    "MessagingEntityNotFoundError",
    "OperationTimeoutError",
    "PartitionUnavailableError",
    "ServiceBusAuthenticationError",
    "ServiceBusAuthorizationError",
    "ServiceBusCommunicationError",
    "ServiceBusConnectionError",
    "ServiceBusError",
    "ServiceBusQuotaExceededError",
    "ServiceBusServerBusyError",
    "SessionCannotBeLockedError",
    "SessionLockLostError",
    "SparkSetupError",
    "StorageConflictError",
    "StorageFailureError",
]


class ServiceBusError(AzureError):
    """Base of every sbqueue error (azure-core's ``AzureError``, as in the SDK)."""


class ServiceBusConnectionError(ServiceBusError):
    """The namespace's storage could not be reached (a folder or bucket not there)."""


class ServiceBusAuthenticationError(ServiceBusError):
    """A connection string's ``SharedAccessSignature`` has expired or names no expiry
    (checked as the service checks it; the storage's own credentials are what sbqueue
    uses to read and write)."""


class ServiceBusAuthorizationError(ServiceBusError):
    """The namespace's storage cannot be read or written with the rights the process has."""


class ServiceBusCommunicationError(ServiceBusError):
    """The storage or the Spark server could not be talked to (a network failure)."""


class ServiceBusServerBusyError(ServiceBusError):
    """The storage is too busy for the operation now: raised as ``StorageConflictError``
    (commits kept losing to concurrent writers past their retry budget); retry later."""


class AutoLockRenewFailed(ServiceBusError):
    """An ``AutoLockRenewer`` could not renew a lock (handed to ``on_lock_renew_failure``)."""


class AutoLockRenewTimeout(ServiceBusError):
    """An ``AutoLockRenewer`` stopped renewing: ``max_lock_renewal_duration`` had passed."""


class MessageLockLostError(ServiceBusError):
    """The message's lock expired or its lock token is no longer valid (S6.6)."""


class SessionLockLostError(ServiceBusError):
    """The session lock expired or was taken over (S10.3)."""


class SessionCannotBeLockedError(ServiceBusError):
    """The session is locked by another receiver (S10.2)."""


class MessageNotFoundError(ServiceBusError):
    """No message with that sequence number is in the expected state (S6.3, S8.4)."""


class MessageSizeExceededError(ServiceBusError, ValueError):
    """A message or batch is larger than the entity allows (S2.4)."""


class ServiceBusQuotaExceededError(ServiceBusError):
    """A namespace or entity quota would be exceeded (S1.5, S1.6)."""


class MessagingEntityNotFoundError(ServiceBusError, ResourceNotFoundError):
    """No queue, topic, subscription or rule has that name."""


class MessagingEntityAlreadyExistsError(ServiceBusError, ResourceExistsError):
    """An entity with that name (compared case-insensitively, S1.7) exists already."""


class MessagingEntityDisabledError(ServiceBusError):
    """The entity's status forbids the operation (S16.1)."""


class OperationTimeoutError(ServiceBusError):
    """The operation did not complete within its timeout."""


class PartitionUnavailableError(ServiceBusError):
    """The partition a keyed send routes to is unavailable (S4.4, S14.2)."""


class InvalidOperationError(ServiceBusError, ValueError):
    """The request breaks a rule of the specification; the message names the rule."""


class MessageAlreadySettled(ValueError):
    """The message was settled already (S6.6). A ValueError, as in the SDK."""


class SparkSetupError(ServiceBusError, RuntimeError):
    """Spark or Delta could not be started; the message says what to do."""


class StorageConflictError(ServiceBusServerBusyError):
    """A Delta commit kept conflicting with concurrent writers past its retry budget (what
    an SDK program catches as ``ServiceBusServerBusyError``); nothing was committed."""


class StorageFailureError(ServiceBusError):
    """An entity's tables could not be read or written: its storage is read-only or full,
    or a file of its Delta log is damaged or missing (issue 21). The message names the
    entity, the table and the cause; the operation was not carried out, and other entities
    are not affected."""

