"""One clear error for an entity whose storage fails (issue 21 point 4).

``storage_guarded`` wraps every public method of an entity class (``Entity``, ``Topic``):
an error that ``store.failures`` recognizes as a storage failure (read-only, full, a
damaged or missing Delta log) becomes one ``StorageFailureError`` naming the entity, its
table and the cause, instead of a Java or delta-rs trace. Errors of sbqueue's own
hierarchy, and any other error, pass unchanged. A table missing because the entity was
deleted meanwhile is that entity's ``MessagingEntityNotFoundError``, as a fresh call would
raise. Other entities never see the failure: each keeps its own tables.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from sbqueue.exceptions import ServiceBusError, StorageFailureError
from sbqueue.spark.session import release_aborted_writes
from sbqueue.store.failures import FULL, MISSING, failed_table, storage_cause

__all__ = ["definition_guarded", "storage_failure", "storage_guarded"]

log = logging.getLogger(__name__)

C = TypeVar("C", bound=type)


class _Stored(Protocol):
    @property
    def path(self) -> str: ...

    def _reload(self) -> None: ...


def storage_guarded(cls: C) -> C:
    """``cls`` with each public method guarded (``_guard``)."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _guard(member))
    return cls


def _guard(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def guarded(self: _Stored, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except ServiceBusError:
            raise
        except Exception as exc:
            failure = storage_failure(self.path, method.__name__, exc)
            if failure is None:
                raise
            cause = storage_cause(exc)
            if cause == MISSING:
                self._reload()  # deleted meanwhile: MessagingEntityNotFoundError
            elif cause == FULL:
                release_aborted_writes()  # the space an aborted write's open file holds
            raise failure from None
    return guarded


def storage_failure(path: str, operation: str, exc: BaseException
                    ) -> StorageFailureError | None:
    """``exc`` as the one error of a storage failure at the entity ``path`` (None: not a
    storage failure). A ``StorageFailureError`` already is one."""
    if isinstance(exc, StorageFailureError):
        return exc
    cause = storage_cause(exc)
    if cause is None:
        return None
    log.debug("storage failure of %s", path, exc_info=exc)
    table = failed_table(exc)
    where = f"its {table} table" if table else "its tables"
    return StorageFailureError(
        f"{path}: {where} cannot be used: {cause}; {operation} was not carried out (other "
        "entities are not affected)")


@contextlib.contextmanager
def definition_guarded(what: str, operation: str) -> Iterator[None]:
    """Around an admin call (create, update, delete of ``what``): a storage failure of the
    catalog or of the entity's tables is one ``StorageFailureError`` naming ``what`` and
    the cause, not a Java or OS trace (decision 020)."""
    try:
        yield
    except ServiceBusError:
        raise
    except Exception as exc:
        failure = storage_failure(what, operation, exc)
        if failure is None:
            raise
        raise failure from None
