"""Where files live: the ``storage:`` block of the project (S3 endpoint, region, credentials).

One block for the project and, optionally, one per URI prefix (``storage.locations``, the longest
prefix of a URI wins; its fields override the project's field by field, its credentials as a
pair)::

    storage:
      region: eu-west-1
      access_key_id_env: LAKE_KEY_ID            # the names of environment variables...
      secret_access_key_env: LAKE_SECRET
      locations:
        "s3://landing-bucket/partner":           # ...or the values, for one prefix
          endpoint_url: http://127.0.0.1:9000
          allow_http: true
          access_key_id: ${PARTNER_KEY_ID}
          secret_access_key: ${PARTNER_SECRET}

Nothing configured: boto (s3fs) and delta-rs read the standard ``AWS_*`` environment variables
themselves. Secrets are :class:`pydantic.SecretStr`: the model's ``repr``, ``str`` and
``model_dump_json`` show ``**********``; :meth:`StorageConfig.redact` replaces every configured
secret value in a text. Environment variables named by ``*_env`` are read when a URI's settings
are resolved (:meth:`StorageConfig.settings_for`), so a rotated secret is picked up.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator

from watermark_assets.config.base import Model
from watermark_assets.exceptions import ConfigError

#: What every secret is shown as.
MASK = "**********"
#: URI schemes a ``storage.locations`` key may name.
_SCHEMES = ("s3://", "s3a://", "file://", "memory://")


class StorageLocation(Model):
    """The settings of one location (or of the whole project): every field optional."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: SecretStr | None = None
    access_key_id_env: str | None = None
    secret_access_key: SecretStr | None = None
    secret_access_key_env: str | None = None
    session_token: SecretStr | None = None
    session_token_env: str | None = None
    #: plain http to ``endpoint_url`` (a local S3 server); refused unless said
    allow_http: bool | None = None

    @model_validator(mode="after")
    def _consistent(self) -> StorageLocation:
        for name in ("access_key_id", "secret_access_key", "session_token"):
            if getattr(self, name) is not None and getattr(self, f"{name}_env") is not None:
                raise ValueError(
                    f"give {name} or {name}_env, not both (the value, or the name of the "
                    "environment variable holding it)"
                )
        has_key = self.access_key_id is not None or self.access_key_id_env is not None
        has_secret = self.secret_access_key is not None or self.secret_access_key_env is not None
        if has_key != has_secret:
            missing = "secret_access_key" if has_key else "access_key_id"
            raise ValueError(
                f"credentials come as a pair: add {missing} (or {missing}_env), or remove the "
                "other to use the standard AWS environment variables"
            )
        endpoint = self.endpoint_url
        if endpoint is not None:
            if not endpoint.startswith(("http://", "https://")):
                raise ValueError(
                    f"endpoint_url {endpoint!r} is not an http(s) URL; write e.g. "
                    "'https://s3.eu-west-1.amazonaws.com' or 'http://127.0.0.1:9000'"
                )
            if endpoint.startswith("http://") and not self.allow_http:
                raise ValueError(
                    f"endpoint_url {endpoint!r} is plain http: add 'allow_http: true' if you mean "
                    "it (a local S3 server), or use https"
                )
        return self

    @property
    def has_credentials(self) -> bool:
        return self.access_key_id is not None or self.access_key_id_env is not None


class StorageConfig(StorageLocation):
    """The project's ``storage:`` block: its own settings and ``locations`` by URI prefix."""

    locations: dict[str, StorageLocation] = Field(default_factory=dict)

    @field_validator("locations")
    @classmethod
    def _prefixes(cls, value: dict[str, StorageLocation]) -> dict[str, StorageLocation]:
        for prefix in value:
            if not prefix.startswith(_SCHEMES) or prefix.rstrip("/").endswith(":/"):
                raise ValueError(
                    f"storage.locations key {prefix!r} is not a URI prefix with a bucket; write "
                    "e.g. 's3://my-bucket' or 's3://my-bucket/landing'"
                )
        return value

    def location_for(self, uri: str) -> StorageLocation | None:
        """The ``locations`` entry whose prefix is the longest one of ``uri`` (None: none)."""
        normal = _normal(uri)
        best: tuple[int, StorageLocation] | None = None
        for prefix, location in self.locations.items():
            stem = _normal(prefix).rstrip("/")
            if (normal == stem or normal.startswith(stem + "/")) and (
                best is None or len(stem) > best[0]
            ):
                best = (len(stem), location)
        return None if best is None else best[1]

    def settings_for(self, uri: str) -> ResolvedSettings:
        """The settings that apply to ``uri``, environment variables read now."""
        location = self.location_for(uri)
        merged: dict[str, Any] = {}
        for block in (self, location):
            if block is None:
                continue
            for name in ("endpoint_url", "region", "allow_http"):
                if getattr(block, name) is not None:
                    merged[name] = getattr(block, name)
        credentials = location if location is not None and location.has_credentials else self
        where = "storage" if credentials is self else f"storage.locations[{_key_of(self, uri)!r}]"
        return ResolvedSettings(
            endpoint_url=merged.get("endpoint_url"),
            region=merged.get("region"),
            allow_http=bool(merged.get("allow_http", False)),
            access_key_id=_secret(credentials, "access_key_id", where),
            secret_access_key=_secret(credentials, "secret_access_key", where),
            session_token=_secret(credentials, "session_token", where),
        )

    def secret_values(self) -> list[str]:
        """Every configured secret value (credentials given or named by an environment variable
        that is set), longest first."""
        found: set[str] = set()
        for block in self._blocks():
            for name in ("access_key_id", "secret_access_key", "session_token"):
                value = getattr(block, name)
                if value is not None:
                    found.add(value.get_secret_value())
                env_name = getattr(block, f"{name}_env")
                if env_name is not None and os.environ.get(env_name):
                    found.add(os.environ[env_name])
        return sorted((v for v in found if v), key=len, reverse=True)

    def redact(self, text: str) -> str:
        """``text`` with every configured secret value replaced by ``**********``."""
        for secret in self.secret_values():
            text = text.replace(secret, MASK)
        return text

    def resolved(self) -> StorageConfig:
        """The same settings with every ``*_env`` replaced by the variable's value (for a process
        that does not have these variables, e.g. a Spark executor)."""

        def one(block: StorageLocation) -> dict[str, Any]:
            data: dict[str, Any] = {
                "endpoint_url": block.endpoint_url,
                "region": block.region,
                "allow_http": block.allow_http,
            }
            where = "storage"
            for name in ("access_key_id", "secret_access_key", "session_token"):
                value = _secret(block, name, where)
                if value is not None:
                    data[name] = value
            return {k: v for k, v in data.items() if v is not None}

        return StorageConfig.model_validate(
            {**one(self), "locations": {p: one(b) for p, b in self.locations.items()}}
        )

    def _blocks(self) -> Iterator[StorageLocation]:
        yield self
        yield from self.locations.values()


@dataclass(frozen=True)
class ResolvedSettings:
    """The settings of one URI, secrets as plain text: never log or show this object."""

    endpoint_url: str | None
    region: str | None
    allow_http: bool
    access_key_id: str | None
    secret_access_key: str | None
    session_token: str | None

    def __repr__(self) -> str:  # secrets never appear in a repr, even by accident
        credentials = "configured" if self.access_key_id else "environment"
        return (
            f"ResolvedSettings(endpoint_url={self.endpoint_url!r}, region={self.region!r}, "
            f"allow_http={self.allow_http}, credentials={credentials})"
        )


def portable_dump(config: StorageConfig) -> dict[str, Any]:
    """``config`` with its secrets in plain text (env variables resolved), as JSON-able data."""
    resolved = config.resolved()

    def one(block: StorageLocation) -> dict[str, Any]:
        data = block.model_dump(exclude_none=True, exclude={"locations"})
        for name in ("access_key_id", "secret_access_key", "session_token"):
            value = getattr(block, name)
            if value is not None:
                data[name] = value.get_secret_value()
        return data

    return {**one(resolved), "locations": {p: one(b) for p, b in resolved.locations.items()}}


def _secret(block: StorageLocation, name: str, where: str) -> str | None:
    value: SecretStr | None = getattr(block, name)
    if value is not None:
        return value.get_secret_value()
    env_name: str | None = getattr(block, f"{name}_env")
    if env_name is None:
        return None
    found = os.environ.get(env_name)
    if not found:
        raise ConfigError(
            f"{where}.{name}_env names the environment variable {env_name!r}, which is not set "
            f"in this process: export it, or give {name} in the configuration",
            key=f"{where}.{name}_env",
            value=env_name,
        )
    return found


def _normal(uri: str) -> str:
    """``s3a://`` and ``s3://`` name the same objects."""
    return "s3://" + uri[len("s3a://") :] if uri.startswith("s3a://") else uri


def _key_of(config: StorageConfig, uri: str) -> str:
    location = config.location_for(uri)
    return next((p for p, b in config.locations.items() if b is location), "")
