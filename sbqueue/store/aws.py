"""One AWS setting for every client of an S3 namespace (issue 44 point 1, decision 042).

The driver's clients (obstore, delta-rs, Arrow) and a JVM that sbqueue starts (S3A's
default credential chain) all read the AWS variables of the process environment. A user
may have configured S3 elsewhere: in the session's ``spark.hadoop.fs.s3a.*`` confs (a
cluster, spark-submit), or as a named profile (``AWS_PROFILE``, which obstore and S3A's
default chain do not read). ``complete`` turns those into the variables that are missing,
once, before any client is made: a variable already set always wins. Values only move
into this process's environment; none is logged or put in an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

from sbqueue.exceptions import StorageFailureError

__all__ = ["complete"]

_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def complete(from_session: Mapping[str, str],
             environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set the AWS variables missing from ``environ`` (default ``os.environ``): those the
    session's confs give (``from_session``, ``spark.s3a.aws_env_of``), then a named
    profile's credentials and region. The names of the variables set."""
    env = os.environ if environ is None else environ
    added = [name for name, value in from_session.items() if value and not env.get(name)]
    for name in added:
        env[name] = from_session[name]
    profile = env.get("AWS_PROFILE")
    if profile and not env.get("AWS_ACCESS_KEY_ID"):
        for name, value in _profile(profile).items():
            if value and not env.get(name):
                env[name] = value
                added.append(name)
    return added


def _profile(name: str) -> dict[str, str]:
    """A named profile's credentials (static, assumed role, SSO: whatever botocore
    resolves) and region, as AWS variables."""
    try:
        import botocore.session
        from botocore.exceptions import BotoCoreError
    except ImportError:
        raise StorageFailureError(
            f"AWS_PROFILE={name!r}: reading a named profile needs botocore (pip install "
            "'sbqueue[aws]'), or export its keys (aws configure export-credentials "
            "--format env)") from None
    try:
        session = botocore.session.Session(profile=name)
        credentials = session.get_credentials()
        region = session.get_config_variable("region")
    except BotoCoreError as exc:
        raise StorageFailureError(f"AWS_PROFILE={name!r}: {type(exc).__name__}: the profile "
                                  "could not be read (check ~/.aws/config and "
                                  "~/.aws/credentials)") from None
    if credentials is None:
        raise StorageFailureError(f"AWS_PROFILE={name!r}: the profile has no credentials")
    frozen = credentials.get_frozen_credentials()
    found = dict(zip(_KEYS, (frozen.access_key, frozen.secret_key, frozen.token or ""),
                     strict=True))
    if region:
        found["AWS_REGION"] = str(region)
    return found
