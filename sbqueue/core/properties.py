"""Namespace and queue definitions: the SDK's property names, defaults and ranges.

Pure data and validation, no Spark: the admin client builds these, the catalog stores
them as JSON, the engine reads them. Every check names the value and the rule it breaks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from sbqueue.core.clock import utcnow
from sbqueue.core.durations import NEVER, format_duration, is_never, parse_duration
from sbqueue.core.names import validate_entity_path
from sbqueue.exceptions import InvalidOperationError

__all__ = [
    "IMMUTABLE_PROPERTIES",
    "QUEUE_PROPERTY_NAMES",
    "ApiVersion",
    "EntityAvailabilityStatus",
    "EntityDefinition",
    "EntityStatus",
    "NamespaceProperties",
    "QueueProperties",
    "Sku",
    "SubscriptionProperties",
    "TopicProperties",
    "build_properties",
    "build_queue_properties",
]

STANDARD_PARTITIONS = 16
PREMIUM_PARTITION_CHOICES = (1, 2, 4)


class Sku(str, Enum):
    STANDARD = "Standard"
    PREMIUM = "Premium"


class ApiVersion(str, Enum):
    """The management API versions the SDK's ``api_version=`` names; accepted, and the same
    behaviour whichever is given (there is no service to version here)."""

    V2017_04 = "2017-04"
    V2021_05 = "2021-05"


class EntityStatus(str, Enum):
    ACTIVE = "Active"
    DISABLED = "Disabled"
    SEND_DISABLED = "SendDisabled"
    RECEIVE_DISABLED = "ReceiveDisabled"


class EntityAvailabilityStatus(str, Enum):
    AVAILABLE = "Available"
    LIMITED = "Limited"


@dataclass(frozen=True)
class NamespaceProperties:
    """A namespace's fixed settings (S1.2) and, when read, its entity counts."""

    name: str
    sku: Sku = Sku.STANDARD
    messaging_partitions: int = 1
    created_at_utc: datetime = field(default_factory=utcnow)
    queue_count: int = 0
    topic_count: int = 0

    @staticmethod
    def validate(sku: object, messaging_partitions: object) -> tuple[Sku, int]:
        try:
            chosen = Sku(sku if not isinstance(sku, str) else sku.capitalize())
        except ValueError:
            raise InvalidOperationError(
                f"sku {sku!r} is not one of 'Standard', 'Premium' (S1.2)"
            ) from None
        if messaging_partitions is not None and (isinstance(messaging_partitions, bool)
                                                 or not isinstance(messaging_partitions, int)):
            raise InvalidOperationError(  # True and 2.0 compare equal to 1 and 2: not counts
                f"messaging_partitions={messaging_partitions!r:.60} is not an integer (S1.2)")
        if chosen is Sku.STANDARD:
            if messaging_partitions not in (None, 1):
                raise InvalidOperationError(
                    f"messaging_partitions={messaging_partitions!r}: only Premium namespaces "
                    "set it; Standard chooses partitioning per entity (S1.2)"
                )
            return chosen, 1
        count = 1 if messaging_partitions is None else messaging_partitions
        if isinstance(count, bool) or count not in PREMIUM_PARTITION_CHOICES:
            raise InvalidOperationError(
                f"messaging_partitions={messaging_partitions!r}: Premium allows 1, 2 or 4 (S1.2)"
            )
        return chosen, int(count)


# (minimum, maximum) of each bounded duration (S5.2, S8.1, S11.1, S16.3).
_DURATION_BOUNDS: dict[str, tuple[timedelta, timedelta]] = {
    "lock_duration": (timedelta(seconds=5), timedelta(minutes=5)),
    "default_message_time_to_live": (timedelta(seconds=1), NEVER),
    "duplicate_detection_history_time_window": (timedelta(seconds=20), timedelta(days=7)),
    "auto_delete_on_idle": (timedelta(minutes=5), NEVER),
}
_BOOLS = (
    "requires_session",
    "requires_duplicate_detection",
    "dead_lettering_on_message_expiration",
    "enable_partitioning",
    "enable_batched_operations",
    "enable_express",
    "support_ordering",
    "dead_lettering_on_filter_evaluation_exceptions",
)
# Fixed at creation (S1.3, S10.1, S11.1): an update may repeat them but not change them.
IMMUTABLE_PROPERTIES = ("enable_partitioning", "requires_session",
                        "requires_duplicate_detection")
_SYSTEM_FIELDS = ("name", "topic_name", "partition_count", "entity_id", "created_at_utc",
                  "updated_at_utc")


@dataclass
class EntityDefinition:
    """What every stored definition shares: a name, the fields the namespace sets, the JSON
    form and the settable names."""

    name: str
    partition_count: int = 1
    entity_id: str = ""
    created_at_utc: datetime | None = None
    updated_at_utc: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, timedelta):
                value = format_duration(value)
            elif isinstance(value, Enum):
                value = value.value
            elif isinstance(value, datetime):
                value = value.isoformat()
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls: type[D], data: dict[str, Any]) -> D:
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known or value is None:
                continue
            default = known[key].default
            if isinstance(default, timedelta):
                value = parse_duration(value, key, _rule_of(key))
            elif key == "status":
                value = EntityStatus(value)
            elif key in ("created_at_utc", "updated_at_utc"):
                value = datetime.fromisoformat(value)
            values[key] = value
        return cls(**values)

    @classmethod
    def settable(cls) -> frozenset[str]:
        """The property names a caller may set (the SDK's keyword names)."""
        return frozenset(f.name for f in dataclasses.fields(cls) if f.name not in _SYSTEM_FIELDS)


D = TypeVar("D", bound="EntityDefinition")


@dataclass
class QueueProperties(EntityDefinition):
    """A queue's definition, as ``azure.servicebus.management.QueueProperties``."""

    lock_duration: timedelta = timedelta(seconds=60)
    max_size_in_megabytes: int = 1024
    requires_duplicate_detection: bool = False
    requires_session: bool = False
    default_message_time_to_live: timedelta = NEVER
    dead_lettering_on_message_expiration: bool = False
    duplicate_detection_history_time_window: timedelta = timedelta(minutes=10)
    max_delivery_count: int = 10
    enable_batched_operations: bool = True
    status: EntityStatus = EntityStatus.ACTIVE
    auto_delete_on_idle: timedelta = NEVER
    enable_partitioning: bool = False
    enable_express: bool = False
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    user_metadata: str | None = None
    max_message_size_in_kilobytes: int | None = None


@dataclass
class TopicProperties(EntityDefinition):
    """A topic's definition, as ``azure.servicebus.management.TopicProperties``."""

    default_message_time_to_live: timedelta = NEVER
    max_size_in_megabytes: int = 1024
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: timedelta = timedelta(minutes=10)
    enable_batched_operations: bool = True
    status: EntityStatus = EntityStatus.ACTIVE
    support_ordering: bool = False
    auto_delete_on_idle: timedelta = NEVER
    enable_partitioning: bool = False
    enable_express: bool = False
    user_metadata: str | None = None
    max_message_size_in_kilobytes: int | None = None


@dataclass
class SubscriptionProperties(EntityDefinition):
    """A subscription's definition; its partition count is its topic's (S1.4)."""

    topic_name: str = ""
    lock_duration: timedelta = timedelta(seconds=60)
    requires_session: bool = False
    default_message_time_to_live: timedelta = NEVER
    dead_lettering_on_message_expiration: bool = False
    dead_lettering_on_filter_evaluation_exceptions: bool = True
    max_delivery_count: int = 10
    enable_batched_operations: bool = True
    status: EntityStatus = EntityStatus.ACTIVE
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    auto_delete_on_idle: timedelta = NEVER
    user_metadata: str | None = None


QUEUE_PROPERTY_NAMES = QueueProperties.settable()


_INT32_MAX = 2_147_483_647  # Service Bus stores max_delivery_count as a 32-bit int
# The rule that bounds each property, cited by its errors; S17.1 (an error names what was
# wrong and with which value) for the few no rule of their own bounds.
_RULES = {"lock_duration": "S5.2", "default_message_time_to_live": "S8.1",
          "duplicate_detection_history_time_window": "S11.1", "auto_delete_on_idle": "S16.3",
          "requires_session": "S10.1", "requires_duplicate_detection": "S11.1",
          "dead_lettering_on_message_expiration": "S8.2", "enable_partitioning": "S1.2",
          "dead_lettering_on_filter_evaluation_exceptions": "S7.3",
          "max_delivery_count": "S6.7", "max_size_in_megabytes": "S1.6",
          "max_message_size_in_kilobytes": "S2.4", "status": "S16.1",
          "forward_to": "S13.1", "forward_dead_lettered_messages_to": "S13.1"}


def _rule_of(key: str) -> str:
    """The id of the rule that bounds property ``key``."""
    return _RULES.get(key, "S17.1")


def _coerce_duration(key: str, value: object) -> timedelta:
    duration = parse_duration(value, key, _rule_of(key))
    low, high = _DURATION_BOUNDS[key]
    if is_never(duration) and is_never(high):
        return NEVER
    if not low <= duration <= high:
        raise InvalidOperationError(
            f"{key}={format_duration(duration)} is out of range "
            f"{format_duration(low)}..{'never' if is_never(high) else format_duration(high)} "
            f"({_rule_of(key)})")
    return duration


def _coerce(key: str, value: object, sku: Sku) -> object:
    """Check one property's type and range; return its normalized value."""
    if key in _DURATION_BOUNDS:
        return _coerce_duration(key, value)
    if key in _BOOLS:
        if not isinstance(value, bool):
            raise InvalidOperationError(
                f"{key} must be True or False, got {value!r:.80} ({_rule_of(key)})")
        return value
    if key == "max_delivery_count":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _INT32_MAX:
            raise InvalidOperationError(
                f"max_delivery_count={value!r}: must be an integer from 1 to {_INT32_MAX} (S6.7)"
            )
        return value
    if key == "max_size_in_megabytes":
        size_cap = 5120 if sku is Sku.STANDARD else 81920
        if isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= size_cap:
            raise InvalidOperationError(
                f"max_size_in_megabytes={value!r}: allowed 1024..{size_cap} on {sku.value} (S1.6)"
            )
        return value
    if key == "max_message_size_in_kilobytes":
        if sku is Sku.STANDARD:
            if value is None:
                return None
            raise InvalidOperationError(
                f"max_message_size_in_kilobytes={value!r}: only Premium entities set it; "
                "Standard messages are at most 256 KB (S2.4)"
            )
        value = 1024 if value is None else value
        if isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= 102400:
            raise InvalidOperationError(
                f"max_message_size_in_kilobytes={value!r}: allowed 1024..102400 (S2.4)"
            )
        return value
    if key == "status":
        try:
            return EntityStatus(value)
        except ValueError:
            allowed = ", ".join(s.value for s in EntityStatus)
            raise InvalidOperationError(
                f"status {value!r:.80} is not one of {allowed} (S16.1)") from None
    if key in ("forward_to", "forward_dead_lettered_messages_to"):
        return None if value in (None, "") else validate_entity_path(value, key)
    if key == "user_metadata":
        if value is not None and (not isinstance(value, str) or len(value) > 1024):
            raise InvalidOperationError(
                f"user_metadata must be a string of at most 1024 characters, got {value!r:.80} "
                "(S17.1)")
        return value
    raise InvalidOperationError(f"{key!r} is not a settable property (S17.1)")  # pragma: no cover


def build_properties(
    kind: type[D],
    name: str,
    overrides: dict[str, Any],
    *,
    sku: Sku,
    messaging_partitions: int,
    base: D | None = None,
    parent_partitions: int | None = None,
) -> D:
    """Validate ``overrides`` on top of ``base`` (or the defaults) for a namespace's SKU.

    Raises InvalidOperationError for an unknown name, a wrong type or range, or a change
    of a property fixed at creation (S1.3). A subscription takes ``parent_partitions``,
    its topic's partition count (S1.4).
    """
    allowed = kind.settable()
    what = kind.__name__.removesuffix("Properties").lower()
    unknown = sorted(str(key) for key in set(overrides) - allowed)  # keys of any type
    if unknown:
        raise InvalidOperationError(
            f"unknown {what} propert{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}; "
            f"known: {', '.join(sorted(allowed))} (S17.1)"
        )
    values: dict[str, Any] = {k: _coerce(k, v, sku) for k, v in overrides.items()}
    if base is None:
        if parent_partitions is not None:
            values["partition_count"] = parent_partitions
        elif sku is Sku.PREMIUM:
            wanted = values.get("enable_partitioning")
            if wanted is not None and wanted != (messaging_partitions > 1):
                raise InvalidOperationError(
                    f"enable_partitioning={wanted}: on Premium every {what} has the "
                    f"namespace's {messaging_partitions} partition(s) (S1.2)"
                )
            values["enable_partitioning"] = messaging_partitions > 1
            values["partition_count"] = messaging_partitions
            values.setdefault("max_message_size_in_kilobytes", 1024)
        else:
            partitioned = bool(values.get("enable_partitioning", False))
            values["partition_count"] = STANDARD_PARTITIONS if partitioned else 1
        props = kind(name=name, **values)
    else:
        for key in IMMUTABLE_PROPERTIES:
            if key in values and values[key] != getattr(base, key):
                raise InvalidOperationError(
                    f"{key} of {what} {base.name!r} is {getattr(base, key)} and cannot change "
                    f"to {values[key]} after creation (S1.3)"
                )
        props = dataclasses.replace(base, **values)
    target = getattr(props, "forward_to", None)
    if getattr(props, "requires_session", False) and target:
        raise InvalidOperationError(
            f"{what} {name!r} requires sessions and cannot forward to {target!r} (S13.1)"
        )
    return props


def build_queue_properties(
    name: str,
    overrides: dict[str, Any],
    *,
    sku: Sku,
    messaging_partitions: int,
    base: QueueProperties | None = None,
) -> QueueProperties:
    """``build_properties`` for a queue."""
    return build_properties(QueueProperties, name, overrides, sku=sku,
                            messaging_partitions=messaging_partitions, base=base)
