"""``ServiceBusAdministrationClient``: namespaces, queues, topics, subscriptions and rules,
shaped like azure-servicebus."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from sbqueue.core.connection import parse_endpoint
from sbqueue.core.keywords import ADMIN_CALL, accept, honours_timeout
from sbqueue.core.names import (
    SUBSCRIPTIONS_SEGMENT,
    name_key,
    validate_entity_path,
    validate_short_name,
)
from sbqueue.core.properties import (
    EntityDefinition,
    NamespaceProperties,
    QueueProperties,
    Sku,
    SubscriptionProperties,
    TopicProperties,
    build_properties,
)
from sbqueue.core.rules import (
    DEFAULT_RULE_NAME,
    RuleFilter,
    RuleProperties,
    SqlRuleAction,
    TrueRuleFilter,
)
from sbqueue.engine.catalog import Catalog
from sbqueue.engine.namespace import Namespace, normalize_root, settle_aws
from sbqueue.engine.storage_guard import definition_guarded
from sbqueue.exceptions import (
    InvalidOperationError,
    MessagingEntityAlreadyExistsError,
    MessagingEntityNotFoundError,
)
from sbqueue.management.config_file import ConfigPlan, property_checker, read_config
from sbqueue.management.runtime import (
    QueueRuntimeProperties,
    SubscriptionRuntimeProperties,
    TopicRuntimeProperties,
    queue_runtime,
    subscription_runtime,
    topic_runtime,
)
from sbqueue.store.documents import delta_documents, open_document_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ServiceBusAdministrationClient", "parse_endpoint"]

D = TypeVar("D", bound=EntityDefinition)
FORWARDS = ("forward_to", "forward_dead_lettered_messages_to")


def _unforwarded(props: dict[str, Any]) -> dict[str, Any]:
    """Properties without forwarding: set once every entity of a config file exists."""
    return {k: v for k, v in props.items() if k not in FORWARDS}


class ServiceBusAdministrationClient:
    """Creates, reads, updates and deletes the entities of one namespace."""

    def __init__(self, namespace: str, spark: SparkSession | None = None) -> None:
        self._namespace_root = namespace
        self._spark = spark
        self._namespace: Namespace | None = None

    @classmethod
    def from_connection_string(
        cls, conn_str: str, *, spark: SparkSession | None = None, **kwargs: Any
    ) -> ServiceBusAdministrationClient:
        accept("from_connection_string", kwargs, ADMIN_CALL)
        return cls(parse_endpoint(conn_str), spark=spark)

    @staticmethod
    def create_namespace(
        path: str, sku: str = "Standard", messaging_partitions: int | None = None,
        spark: SparkSession | None = None,
    ) -> NamespaceProperties:
        """Create a namespace explicitly (S1.2); its SKU and partitions never change."""
        return Namespace(path, spark, sku=sku, messaging_partitions=messaging_partitions
                         ).properties

    @property
    def namespace(self) -> Namespace:
        if self._namespace is None:
            self._namespace = Namespace(self._namespace_root, self._spark)
        return self._namespace

    @property
    def _definitions(self) -> Catalog:
        """The catalog, for reading definitions: a local namespace is read without starting
        Spark (so ``queue list`` answers at once)."""
        if self._namespace is None and not delta_documents(self._namespace_root):
            root = normalize_root(self._namespace_root)
            settle_aws(root, self._spark)
            return Catalog(open_document_store(root), root)  # a folder's, or S3 objects
        return self.namespace.catalog

    def _settings(self) -> NamespaceProperties:
        """The namespace's SKU and partitions, without creating a local namespace that does
        not exist yet (a refused create leaves no folder behind)."""
        if self._namespace is None and not delta_documents(self._namespace_root):
            found = self._definitions.namespace()
            return found or NamespaceProperties(name=normalize_root(self._namespace_root),
                                                sku=Sku.STANDARD, messaging_partitions=1)
        return self.namespace.properties

    def get_namespace_properties(self) -> NamespaceProperties:
        queues = self.namespace.catalog.list_queues()
        return dataclasses.replace(self.namespace.properties, queue_count=len(queues))

    # -- shared by queues, topics and subscriptions ----------------------------------------
    def _build(self, kind: type[D], name: str, changes: dict[str, Any],
               base: D | None = None, parent_partitions: int | None = None) -> D:
        ns = self._settings()
        changes = {k: v for k, v in changes.items() if k not in ADMIN_CALL}  # the HTTP call's
        props = build_properties(kind, name, changes, sku=ns.sku,
                                 messaging_partitions=ns.messaging_partitions, base=base,
                                 parent_partitions=parent_partitions)
        self._check_forwarding(props)
        return props

    def _changes(self, kind: str, given: Any, current: EntityDefinition,
                 overrides: dict[str, Any]) -> dict[str, Any]:
        """What an update asks to change: the differing fields of a properties object, or a
        dict of them, plus keyword overrides."""
        if isinstance(given, type(current)):
            wanted = given.partition_count
            changes = {k: getattr(given, k) for k in current.settable()
                       if getattr(given, k) != getattr(current, k)}
        elif isinstance(given, dict):
            wanted = given.get("partition_count", current.partition_count)
            changes = {k: v for k, v in given.items()
                       if k not in ("name", "topic_name", "partition_count")}
        else:
            raise InvalidOperationError(
                f"update_{kind} takes {type(current).__name__} or a dict, got "
                f"{type(given).__name__}")
        wanted = overrides.pop("partition_count", wanted)
        if wanted != current.partition_count:
            raise InvalidOperationError(
                f"{kind} {current.name!r} has {current.partition_count} partition(s); the "
                f"partition count cannot change to {wanted!r} after creation (S1.3)")
        return {**changes, **overrides}

    def _update(self, kind: str, current: D, given: Any, overrides: dict[str, Any]) -> D:
        """Apply the asked changes to the stored definition by a conditional write: if
        another process changed it since, they are re-applied to its version, so neither
        update is lost (decision 020)."""
        changes = self._changes(kind, given, current, overrides)
        topic = getattr(current, "topic_name", None) if kind == "subscription" else None
        with definition_guarded(f"{kind} {current.name!r}", "the update"):
            return self.namespace.catalog.update(kind, current.name, topic, lambda fresh:
                                                 self._build(type(fresh), fresh.name,
                                                             dict(changes), base=fresh))

    @staticmethod
    def _name_of(given: Any) -> str:
        """The name in an update's argument: a properties object or a dict."""
        return str(given.get("name", "") if isinstance(given, dict) else getattr(given, "name", ""))

    # -- queues ----------------------------------------------------------------------------
    @honours_timeout
    def create_queue(self, queue_name: str, **kwargs: Any) -> QueueProperties:
        props = self._build(QueueProperties, validate_entity_path(queue_name), kwargs)
        created: QueueProperties = self.namespace.create_storage("queue", props)
        return created

    def get_queue(self, queue_name: str, **kwargs: Any) -> QueueProperties:
        accept("get_queue", kwargs, ADMIN_CALL)
        return self._definitions.get_queue(validate_entity_path(queue_name))

    @honours_timeout
    def update_queue(self, queue: QueueProperties | dict[str, Any], **kwargs: Any
                     ) -> QueueProperties:
        """Apply a changed ``QueueProperties`` (or a dict of them) plus overrides."""
        return self._update("queue", self.get_queue(self._name_of(queue)), queue, kwargs)

    @honours_timeout
    def delete_queue(self, queue_name: str | QueueProperties, **kwargs: Any) -> None:
        accept("delete_queue", kwargs, ADMIN_CALL)
        name = queue_name.name if isinstance(queue_name, QueueProperties) else queue_name
        self.namespace.delete_storage("queue", validate_entity_path(name))

    def list_queues(self, **kwargs: Any) -> list[QueueProperties]:
        accept("list_queues", kwargs, ADMIN_CALL)
        return self._definitions.list_queues()

    def get_queue_runtime_properties(self, queue_name: str, **kwargs: Any
                                     ) -> QueueRuntimeProperties:
        """Counts and times of a queue, summed over its partitions (S16.2)."""
        accept("get_queue_runtime_properties", kwargs, ADMIN_CALL)
        return queue_runtime(self.namespace, self.get_queue(queue_name))

    def list_queues_runtime_properties(self, **kwargs: Any) -> list[QueueRuntimeProperties]:
        accept("list_queues_runtime_properties", kwargs, ADMIN_CALL)
        return [self.get_queue_runtime_properties(q.name) for q in self.list_queues()]

    # -- topics ----------------------------------------------------------------------------
    @honours_timeout
    def create_topic(self, topic_name: str, **kwargs: Any) -> TopicProperties:
        props = self._build(TopicProperties, validate_entity_path(topic_name, "topic name"),
                            kwargs)
        created: TopicProperties = self.namespace.create_storage("topic", props)
        return created

    def get_topic(self, topic_name: str, **kwargs: Any) -> TopicProperties:
        accept("get_topic", kwargs, ADMIN_CALL)
        found: TopicProperties = self._definitions.get(
            "topic", validate_entity_path(topic_name, "topic name"))
        return found

    @honours_timeout
    def update_topic(self, topic: TopicProperties | dict[str, Any], **kwargs: Any
                     ) -> TopicProperties:
        return self._update("topic", self.get_topic(self._name_of(topic)), topic, kwargs)

    @honours_timeout
    def delete_topic(self, topic_name: str | TopicProperties, **kwargs: Any) -> None:
        """Delete a topic and all its subscriptions."""
        accept("delete_topic", kwargs, ADMIN_CALL)
        name = topic_name.name if isinstance(topic_name, TopicProperties) else topic_name
        self.namespace.delete_storage("topic", validate_entity_path(name, "topic name"))

    def list_topics(self, **kwargs: Any) -> list[TopicProperties]:
        accept("list_topics", kwargs, ADMIN_CALL)
        topics: list[TopicProperties] = self._definitions.entities("topic")
        return topics

    # -- subscriptions ---------------------------------------------------------------------
    @honours_timeout
    def create_subscription(self, topic_name: str, subscription_name: str, *,
                            default_rule: RuleProperties | None = None, **kwargs: Any
                            ) -> SubscriptionProperties:
        """A new subscription has its topic's partition count (S1.4) and the rule
        ``$Default`` (TrueFilter), or ``default_rule`` instead (S15.1)."""
        topic = self.get_topic(topic_name)
        name = validate_short_name(subscription_name)
        props = self._build(SubscriptionProperties, name, kwargs,
                            parent_partitions=topic.partition_count)
        props.topic_name = topic.name
        rule = (default_rule or RuleProperties(DEFAULT_RULE_NAME)).check()
        created: SubscriptionProperties = self.namespace.create_storage(
            "subscription", props, {"rules": [rule.to_json()]})
        return created

    def get_subscription(self, topic_name: str, subscription_name: str, **kwargs: Any
                         ) -> SubscriptionProperties:
        accept("get_subscription", kwargs, ADMIN_CALL)
        found: SubscriptionProperties = self._definitions.get(
            "subscription", validate_short_name(subscription_name),
            validate_entity_path(topic_name, "topic name"))
        return found

    @honours_timeout
    def update_subscription(self, topic_name: str,
                            subscription: SubscriptionProperties | dict[str, Any],
                            **kwargs: Any) -> SubscriptionProperties:
        current = self.get_subscription(topic_name, self._name_of(subscription))
        return self._update("subscription", current, subscription, kwargs)

    @honours_timeout
    def delete_subscription(self, topic_name: str,
                            subscription_name: str | SubscriptionProperties, **kwargs: Any) -> None:
        accept("delete_subscription", kwargs, ADMIN_CALL)
        name = subscription_name.name if isinstance(
            subscription_name, SubscriptionProperties) else subscription_name
        self.namespace.delete_storage("subscription", validate_short_name(name),
                                      validate_entity_path(topic_name, "topic name"))

    def list_subscriptions(self, topic_name: str, **kwargs: Any) -> list[SubscriptionProperties]:
        accept("list_subscriptions", kwargs, ADMIN_CALL)
        topic = self.get_topic(topic_name)
        subs: list[SubscriptionProperties] = self._definitions.entities("subscription",
                                                                         topic=topic.name)
        return subs

    # -- rules (S15.1-S15.7) -----------------------------------------------------------------
    @honours_timeout
    def create_rule(self, topic_name: str, subscription_name: str, rule_name: str, *,
                    filter: RuleFilter | None = None, action: SqlRuleAction | None = None,
                    **kwargs: Any) -> RuleProperties:
        """Add a rule; a bad filter or action is refused here, with its position (S15.7)."""
        accept("create_rule", kwargs, ADMIN_CALL)
        rule = RuleProperties(rule_name, filter or TrueRuleFilter(), action).check()
        self.get_subscription(topic_name, subscription_name)

        def add(rules: list[RuleProperties]) -> list[RuleProperties]:
            if any(name_key(r.name) == name_key(rule_name) for r in rules):
                raise MessagingEntityAlreadyExistsError(
                    f"rule {rule_name!r} of subscription {subscription_name!r} already exists")
            return [*rules, rule]

        self._definitions.change_rules(topic_name, subscription_name, add)
        return rule

    def get_rule(self, topic_name: str, subscription_name: str, rule_name: str,
                 **kwargs: Any) -> RuleProperties:
        accept("get_rule", kwargs, ADMIN_CALL)
        for rule in self.list_rules(topic_name, subscription_name):
            if name_key(rule.name) == name_key(rule_name):
                return rule
        raise MessagingEntityNotFoundError(
            f"rule {rule_name!r} of subscription {subscription_name!r} of topic "
            f"{topic_name!r} does not exist")

    @honours_timeout
    def update_rule(self, topic_name: str, subscription_name: str, rule: RuleProperties,
                    *, filter: RuleFilter | None = None, action: SqlRuleAction | None = None,
                    **kwargs: Any) -> RuleProperties:
        """Replace a rule's filter and action (checked first, S15.7); ``filter=`` and
        ``action=`` override those of ``rule``, as in the SDK."""
        accept("update_rule", kwargs, ADMIN_CALL)
        rule = dataclasses.replace(rule, filter=rule.filter if filter is None else filter,
                                   action=rule.action if action is None else action)
        rule.check()
        self.get_rule(topic_name, subscription_name, rule.name)
        self._definitions.change_rules(topic_name, subscription_name, lambda rules: [
            rule if name_key(r.name) == name_key(rule.name) else r for r in rules])
        return rule

    @honours_timeout
    def delete_rule(self, topic_name: str, subscription_name: str,
                    rule_name: str | RuleProperties, **kwargs: Any) -> None:
        accept("delete_rule", kwargs, ADMIN_CALL)
        name = rule_name.name if isinstance(rule_name, RuleProperties) else rule_name
        self.get_rule(topic_name, subscription_name, name)
        self._definitions.change_rules(topic_name, subscription_name, lambda rules: [
            r for r in rules if name_key(r.name) != name_key(name)])

    def list_rules(self, topic_name: str, subscription_name: str, **kwargs: Any
                   ) -> list[RuleProperties]:
        accept("list_rules", kwargs, ADMIN_CALL)
        return self._definitions.rules(validate_entity_path(topic_name, "topic name"),
                                       validate_short_name(subscription_name))

    # -- partition availability (S14.2) ----------------------------------------------------
    def set_partition_available(self, entity_path: str, partition_id: int, available: bool
                                ) -> None:
        """Fence (``available=False``) or release one partition of a queue or topic: keyed
        sends to it fail with PartitionUnavailable, unkeyed sends and receives use the
        others, and the entity's availability_status is Limited."""
        props = self._entity_definition(entity_path)
        if not isinstance(partition_id, int) or not 0 <= partition_id < props.partition_count:
            raise InvalidOperationError(
                f"partition {partition_id!r} of {entity_path!r}: it has partitions "
                f"0..{props.partition_count - 1} (S14.2)")
        self.namespace.catalog.set_fenced(props.entity_id, partition_id, not available)

    def _entity_definition(self, entity_path: str) -> EntityDefinition:
        name = validate_entity_path(entity_path)
        if self._definitions.queue_exists(name):
            return self.get_queue(name)
        return self.get_topic(name)

    def get_topic_runtime_properties(self, topic_name: str, **kwargs: Any
                                     ) -> TopicRuntimeProperties:
        accept("get_topic_runtime_properties", kwargs, ADMIN_CALL)
        topic = self.get_topic(topic_name)
        return topic_runtime(self.namespace, topic, self.list_subscriptions(topic.name))

    def list_topics_runtime_properties(self, **kwargs: Any) -> list[TopicRuntimeProperties]:
        accept("list_topics_runtime_properties", kwargs, ADMIN_CALL)
        return [self.get_topic_runtime_properties(t.name) for t in self.list_topics()]

    def get_subscription_runtime_properties(self, topic_name: str, subscription_name: str,
                                            **kwargs: Any) -> SubscriptionRuntimeProperties:
        accept("get_subscription_runtime_properties", kwargs, ADMIN_CALL)
        sub = self.get_subscription(topic_name, subscription_name)
        return subscription_runtime(self.namespace, self.get_topic(topic_name), sub)

    def list_subscriptions_runtime_properties(self, topic_name: str, **kwargs: Any
                                              ) -> list[SubscriptionRuntimeProperties]:
        accept("list_subscriptions_runtime_properties", kwargs, ADMIN_CALL)
        return [self.get_subscription_runtime_properties(topic_name, s.name)
                for s in self.list_subscriptions(topic_name)]

    def _check_forwarding(self, props: EntityDefinition) -> None:
        """Forward targets must be an existing queue or topic, not the entity itself, and
        form no cycle of queues (S13.1)."""
        if not (getattr(props, "forward_to", None)
                or getattr(props, "forward_dead_lettered_messages_to", None)):
            return
        catalog = self.namespace.catalog
        own = name_key(props.name) if isinstance(props, QueueProperties) else None
        for attr in ("forward_to", "forward_dead_lettered_messages_to"):
            target = getattr(props, attr, None)
            if target is None:
                continue
            if name_key(target) == own:
                raise InvalidOperationError(
                    f"{attr}={target!r}: a queue cannot forward to itself (S13.1)")
            if not (catalog.exists("queue", target) or catalog.exists("topic", target)):
                raise MessagingEntityNotFoundError(
                    f"{attr}={target!r}: no such queue or topic in the namespace (S13.1)")
        seen = {own} if own else set()
        hop = getattr(props, "forward_to", None)
        while hop is not None:
            if name_key(hop) in seen:
                raise InvalidOperationError(
                    f"forward_to={getattr(props, 'forward_to', None)!r} makes a forwarding cycle "
                    f"through "
                    f"{hop!r} (S13.1)")
            seen.add(name_key(hop))
            hop = catalog.get_queue(hop).forward_to if catalog.queue_exists(hop) else None

    # -- Config.json (S15.8) ---------------------------------------------------------------
    def apply_config(self, path: str | Path) -> dict[str, list[str]]:
        """Create what the emulator config file at ``path`` names and the namespace lacks;
        the file is checked whole first, so a bad one creates nothing. Returns the paths
        ``created`` and ``existing``."""
        ns = self._settings()
        plan = read_config(path, property_checker(ns.sku, ns.messaging_partitions))
        self._check_config_forwards(plan)
        catalog = self.namespace.catalog
        report: dict[str, list[str]] = {"created": [], "existing": []}
        forwards: list[tuple[str, str | None, dict[str, Any]]] = []
        for name, props in plan.queues:
            if self._apply_one(report, name, catalog.exists("queue", name),
                               partial(self.create_queue, name, **_unforwarded(props))):
                forwards.append((name, None, props))
        for name, props in plan.topics:
            self._apply_one(report, name, catalog.exists("topic", name),
                            partial(self.create_topic, name, **_unforwarded(props)))
        for topic, sub, props, rules in plan.subscriptions:
            if self._apply_one(report, f"{topic}/{SUBSCRIPTIONS_SEGMENT}/{sub}",
                               catalog.exists("subscription", sub, topic),
                               partial(self._create_with_rules, topic, sub, props, rules)):
                forwards.append((sub, topic, props))
        for name, parent, props in forwards:  # every target exists by now (S13.1)
            wanted = {k: props[k] for k in FORWARDS if props.get(k)}
            if wanted and parent is None:
                self.update_queue({"name": name}, **wanted)
            elif wanted and parent is not None:
                self.update_subscription(parent, {"name": name}, **wanted)
        return report

    def _check_config_forwards(self, plan: ConfigPlan) -> None:
        """Forward targets must be in the file or the namespace, before anything is made."""
        catalog = self.namespace.catalog
        named = {name_key(n) for n, _ in plan.queues + plan.topics}
        sources = plan.queues + [(f"{t}/{SUBSCRIPTIONS_SEGMENT}/{s}", p)
                                 for t, s, p, _ in plan.subscriptions]
        for name, props in sources:
            for attr in FORWARDS:
                target = props.get(attr)
                if target and name_key(target) not in named and not (
                        catalog.exists("queue", target) or catalog.exists("topic", target)):
                    raise InvalidOperationError(
                        f"Config.json: {name} {attr}={target!r}: no such queue or topic in "
                        "the file or the namespace (S13.1, S15.8)")

    def _create_with_rules(self, topic: str, sub: str, props: dict[str, Any],
                           rules: list[RuleProperties]) -> None:
        self.create_subscription(topic, sub, default_rule=rules[0] if rules else None,
                                 **_unforwarded(props))
        for rule in rules[1:]:
            self.create_rule(topic, sub, rule.name, filter=rule.filter, action=rule.action)

    @staticmethod
    def _apply_one(report: dict[str, list[str]], path: str, exists: bool,
                   create: Callable[[], Any]) -> bool:
        if exists:
            report["existing"].append(path)
            return False
        create()
        report["created"].append(path)
        return True

    def close(self) -> None:
        self._namespace = None

    def __enter__(self) -> ServiceBusAdministrationClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
