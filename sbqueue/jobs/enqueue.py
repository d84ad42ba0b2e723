"""The enqueue job: send the rows of a table, a path (Parquet, JSON, CSV, Delta) or a SQL
query to a queue or topic, one commit, with a column mapping for the message fields.

    spark-submit jobs/enqueue.py --namespace PATH --entity orders --path data/ --format json \\
        --column body=payload --column message_id=order_id --properties region,priority

Rerun for the same input (the same files, query text and mapping) it sends nothing: the
send id is derived from them and the append is Delta's idempotent write (decision 010).
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sbqueue.engine.send.frame import SETTABLE
from sbqueue.jobs.runner import JobError, base_parser, run_job

__all__ = ["main", "parser", "read_input", "to_messages"]

SEND_PREFIX = "enq-"


def parser() -> argparse.ArgumentParser:
    p = base_parser("sbqueue-enqueue", "Send the rows of a table, path or query.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--table", help="a table name (spark.table)")
    source.add_argument("--path", help="files or a Delta folder")
    source.add_argument("--sql", help="a SELECT over tables and views")
    p.add_argument("--format", default="delta", choices=("delta", "parquet", "json", "csv"),
                   help="of --path (default delta; csv has a header row)")
    p.add_argument("--entity", required=True, help="the queue or topic to send to")
    p.add_argument("--column", action="append", default=[], metavar="FIELD=EXPR",
                   help="a message field from a column or SQL expression (repeat); "
                        f"fields: {', '.join(sorted(SETTABLE))}")
    p.add_argument("--properties", default="",
                   help="comma-separated columns sent as application properties")
    p.add_argument("--run-id", default=None,
                   help="the idempotency key (default: from the input files and mapping)")
    return p


def read_input(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    if args.table:
        return spark.table(args.table)
    if args.sql:
        return spark.sql(args.sql)
    reader = spark.read.format(args.format)
    if args.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.load(args.path)


def to_messages(rows: DataFrame, columns: list[str], properties: str) -> DataFrame:
    """The send DataFrame: ``field=expression`` pairs, ``body`` by default from a column
    named body, ``application_properties`` as a struct of the named columns."""
    mapped: dict[str, Any] = {}
    for pair in columns:
        field, sep, expr = pair.partition("=")
        if not sep or field not in SETTABLE or field == "application_properties":
            raise JobError(f"--column {pair!r}: expected FIELD=EXPR with FIELD one of "
                           f"{', '.join(sorted(SETTABLE - {'application_properties'}))} (S2.1)")
        mapped[field] = F.expr(expr)
    if "body" not in mapped:
        if "body" not in rows.columns:
            raise JobError(f"no body: the input has columns {', '.join(rows.columns)}; map "
                           "one with --column body=<column or expression> (S2.1)")
        mapped["body"] = F.col("body")
    names = [n.strip() for n in properties.split(",") if n.strip()]
    missing = sorted(set(names) - set(rows.columns))
    if missing:
        raise JobError(f"--properties names unknown column(s) {', '.join(missing)}")
    if names:
        mapped["application_properties"] = F.struct(*[F.col(f"`{n}`") for n in names])
    return rows.select(*[column.alias(field) for field, column in mapped.items()])


def _send_id(args: argparse.Namespace, rows: DataFrame) -> str:
    """The same input, mapping and entity give the same send id."""
    if args.run_id:
        key = args.run_id
    else:
        key = "\n".join([args.entity, args.table or args.sql or args.path, args.format,
                         *args.column, args.properties, *sorted(rows.inputFiles())])
    return SEND_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:32]


def _body(args: argparse.Namespace, namespace: Any) -> dict[str, Any]:
    spark = namespace.spark
    target = namespace.sendable(args.entity)
    try:
        rows = read_input(spark, args)
    except Exception as exc:  # a missing table or path, unreadable files: one line
        raise JobError(f"cannot read the input: {str(exc).splitlines()[0][:300]}") from None
    messages = to_messages(rows, args.column, args.properties)
    send_id = _send_id(args, rows)
    done = target.inbox.of_send(send_id).limit(1).count() > 0
    count = 0 if done else messages.count()
    if not done and count:
        target.send_dataframe(messages, send_id=send_id, idempotent=True)
    return {"entity": args.entity, "send_id": send_id, "sent": count, "already_sent": done}


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("sbqueue-enqueue", parser(), _body, argv)


def run() -> None:
    raise SystemExit(main())
