"""Storage failures told apart from other errors (issue 21 point 4).

A Delta table in a folder that is read-only or full, or whose ``_delta_log`` holds a
damaged or missing file, fails deep in Spark (a Java trace) or in delta-rs (a
``DeltaError``). ``storage_cause`` reads the error's text, the whole chain of causes
included, and says in a few words what is wrong with the storage, or None when the error
is not a storage failure (a bug or a bad input must surface as it is). Text, not types:
the same failures arrive as Py4J errors, PySpark's captured errors, Spark Connect errors
and delta-rs errors, and their text is what they share.
"""

from __future__ import annotations

import errno
import re

__all__ = ["BUCKET", "CREDENTIALS", "ENDPOINT", "FULL", "MISSING", "NO_S3A", "failed_table",
           "storage_cause"]

MISSING = "its Delta table is missing (no _delta_log)"
FULL = "the storage is full"
# S3 (issue 44): what the AWS environment must fix. The texts name variables, never values.
BUCKET = "its S3 bucket does not exist"
CREDENTIALS = ("no valid S3 credentials were found (set AWS_ACCESS_KEY_ID and "
               "AWS_SECRET_ACCESS_KEY, and AWS_SESSION_TOKEN for temporary ones)")
NO_S3A = ("this Spark session has no S3 file system (Hadoop's S3A jars): open the namespace "
          "without a session, so sbqueue starts one with S3A, or start yours with the confs "
          "of 'sbqueue spark-conf --store s3' (README, 'Object storage')")
ENDPOINT = ("the store's endpoint cannot be reached (check AWS_ENDPOINT_URL for S3, the "
            "account or AZURITE_BLOB_STORAGE_URL for Azure Blob, and the network)")

# (what the text holds, the cause as a user reads it), first match wins
_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Read-only file system|os error 30\b", re.I), "the storage is read-only"),
    (re.compile(r"No space left on device|os error 28\b|Disk quota exceeded", re.I),
     FULL),
    (re.compile(r"Permission denied|os error 13\b|AccessDenied", re.I),
     "permission to the storage is denied"),
    (re.compile(r"NoSuchBucket|bucket does not exist", re.I), BUCKET),
    (re.compile(r"ContainerNotFound|specified container does not exist", re.I),
     "the Azure Blob container does not exist (create it, or check the az:// root)"),
    (re.compile(r"No FileSystem for scheme \W?s3", re.I), NO_S3A),
    (re.compile(r"No FileSystem for scheme \W?az\b", re.I),
     "this Spark session has no file system for az:// (Hadoop's Azure jars): the client "
     "and the administration client serve an az:// namespace without Spark; its "
     "DataFrames, SQL views and jobs need a session with hadoop-azure (decision 051)"),
    (re.compile(r"169\.254\.169\.254|InvalidAccessKeyId|SignatureDoesNotMatch|"
                r"ExpiredToken|InvalidToken|NoCredentialProviders|missing credentials", re.I),
     CREDENTIALS),
    (re.compile(r"error sending request|Connection refused|dns error|"
                r"failed to lookup address", re.I), ENDPOINT),
    (re.compile(r"DELTA_TABLE_NOT_FOUND|DELTA_MISSING_DELTA_TABLE|is not a Delta table|"
                r"No files in log segment|Not a Delta table", re.I),
     MISSING),
    (re.compile(r"_delta_log.*(FAILED_READ_FILE|MALFORMED|JsonParse)|"
                r"(FAILED_READ_FILE|MALFORMED_RECORD|JsonParseException).*_delta_log|"
                r"JsonParseException.*org\.apache\.spark\.sql\.delta\.|"
                r"DELTA_VERSIONS_NOT_CONTIGUOUS|DELTA_LOG_FILE_NOT_FOUND|"
                r"DELTA_STATE_RECOVER|DELTA_FILE_NOT_FOUND_DETAILED|"
                r"Invalid JSON in log record|Failed to read delta log object", re.I | re.S),
     "its Delta log (_delta_log) is damaged or has a missing file"),
)
_ERRNOS = {errno.EROFS: 0, errno.ENOSPC: 1, errno.EDQUOT: 1, errno.EACCES: 2}
_TABLE = re.compile(r"(/[^\s'`\"]*?/entities/[0-9a-f]+/(inbox|ledger))")


def storage_cause(exc: BaseException) -> str | None:
    """What is wrong with the storage, in a few words, if ``exc`` (or a cause of it) is a
    storage failure; else None."""
    for link in _chain(exc):
        if isinstance(link, OSError) and link.errno in _ERRNOS:
            return _CAUSES[_ERRNOS[link.errno]][1]
    text = "\n".join(str(link) for link in _chain(exc))
    return next((cause for pattern, cause in _CAUSES if pattern.search(text)), None)


def failed_table(exc: BaseException) -> str | None:
    """Which table of an entity the error names ("inbox" or "ledger"), where it says."""
    found = _TABLE.search("\n".join(str(link) for link in _chain(exc)))
    return None if found is None else found.group(2)


def _chain(exc: BaseException) -> list[BaseException]:
    links, seen = [], set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        links.append(link)
        link = link.__cause__ or link.__context__
    return links
