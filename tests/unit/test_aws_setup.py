"""Decision 042: one AWS setting serves Spark and the driver (no Spark, no store here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sbqueue.exceptions import StorageFailureError
from sbqueue.spark.s3a import aws_env_of
from sbqueue.store.aws import complete


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


def test_a_session_s_s3a_confs_become_the_aws_variables() -> None:
    session = _Session({"spark.hadoop.fs.s3a.endpoint": "127.0.0.1:9000",
                        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                        "spark.hadoop.fs.s3a.access.key": "AK",
                        "spark.hadoop.fs.s3a.secret.key": "SK",
                        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-1"})
    assert aws_env_of(session) == {  # type: ignore[arg-type]
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}
    secure = _Session({"spark.hadoop.fs.s3a.endpoint": "s3.example.com"})
    assert aws_env_of(secure)["AWS_ENDPOINT_URL"] == "https://s3.example.com"  # type: ignore[arg-type]
    assert aws_env_of(_Session({})) == {}  # type: ignore[arg-type]


def test_what_the_environment_has_wins_and_only_the_missing_is_added() -> None:
    env = {"AWS_ACCESS_KEY_ID": "mine", "AWS_REGION": ""}
    added = complete({"AWS_ACCESS_KEY_ID": "conf", "AWS_SECRET_ACCESS_KEY": "s",
                      "AWS_REGION": "us-west-2"}, env)
    assert sorted(added) == ["AWS_REGION", "AWS_SECRET_ACCESS_KEY"]
    assert env == {"AWS_ACCESS_KEY_ID": "mine", "AWS_SECRET_ACCESS_KEY": "s",
                   "AWS_REGION": "us-west-2"}


def _profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text("[team]\naws_access_key_id = AKTEAM\n"
                           "aws_secret_access_key = team-secret\n")
    config = tmp_path / "config"
    config.write_text("[profile team]\nregion = ap-south-1\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))


def test_a_named_profile_gives_its_keys_and_region(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _profiles(tmp_path, monkeypatch)
    env = {"AWS_PROFILE": "team"}
    complete({}, env)
    assert env["AWS_ACCESS_KEY_ID"] == "AKTEAM" and env["AWS_SECRET_ACCESS_KEY"] == "team-secret"
    assert env["AWS_REGION"] == "ap-south-1" and "AWS_SESSION_TOKEN" not in env
    keys = {"AWS_PROFILE": "team", "AWS_ACCESS_KEY_ID": "own", "AWS_SECRET_ACCESS_KEY": "x"}
    complete({}, keys)  # keys in the environment: the profile is not read
    assert keys["AWS_ACCESS_KEY_ID"] == "own" and "AWS_REGION" not in keys


def test_a_profile_that_is_not_there_is_one_clear_error(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _profiles(tmp_path, monkeypatch)
    with pytest.raises(StorageFailureError, match=r"AWS_PROFILE='nobody'.*ProfileNotFound"):
        complete({}, {"AWS_PROFILE": "nobody"})
