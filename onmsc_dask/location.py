"""Where a MultiViewStore lives: a local directory, or an fsspec URL (s3://, gs://, az://, memory://, ...) with its
storage_options, checked so that a wrong URL is a one-line error naming it, never a local directory."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zarr

__all__ = ["Location", "is_url", "location", "unreachable"]

#: URL schemes that are local paths (file:// URLs become plain paths)
_LOCAL = ("file", "local")
#: URL schemes of object stores, whose URLs start with a bucket (or container) that check_bucket checks
_BUCKETED = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "oss")


class BucketUnreachable(ValueError):
    """An object store's bucket could not be reached (Location.check_bucket)."""


def unreachable(exc: BaseException | None) -> BaseException | None:
    """The error in ``exc``'s chain (itself, its cause, or its context unless suppressed) that says a server could
    not be reached: a connection error or timeout (Python's, or a client's such as botocore's and aiohttp's, which
    are no OSError), or BucketUnreachable; else None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (ConnectionError, TimeoutError, BucketUnreachable)) or "connect" in type(exc).__name__.lower():
            return exc
        exc = exc.__cause__ if exc.__cause__ is not None or exc.__suppress_context__ else exc.__context__
    return None


def is_url(path: Any) -> bool:
    """Whether `path` is a URL with a scheme (``s3://b/x.zarr``, or fsspec's chained ``simplecache::s3://…``), not a
    local path."""
    return (isinstance(path, str) and "://" in path
            and all(scheme.replace("+", "").isalnum() for scheme in path.split("://", 1)[0].split("::")))


@dataclass(frozen=True)
class Location:
    """An fsspec URL and its storage_options (picklable: tasks open the store on the workers from it)."""

    url: str
    storage_options: dict = field(default_factory=dict, hash=False)

    @property
    def protocol(self) -> str:
        return self.url.split("://", 1)[0]

    def __str__(self) -> str:
        return self.url

    def filesystem(self) -> Any:
        """The fsspec file system of the URL: an uninstalled scheme or bad storage_options is a one-line error."""
        import fsspec

        try:
            cls = fsspec.get_filesystem_class(self.protocol)
        except (ImportError, ValueError) as exc:
            raise ValueError(f"{self.url}: URL scheme {self.protocol!r} is not available ({exc})") from None
        try:
            return cls(**self.storage_options)
        except (TypeError, ValueError) as exc:
            raise self._unsuited(exc) from None

    def _unsuited(self, exc: Exception) -> ValueError:
        """The error for storage_options the file system rejects, naming the option when its error does."""
        named = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
        if named is None or named[1] not in self.storage_options:
            return ValueError(f"{self.url}: storage_options {sorted(self.storage_options)} do not suit "
                              f"{self.protocol}:// ({exc})")
        endpoint = ("; s3fs takes the endpoint as client_kwargs={'endpoint_url': URL}"
                    if "endpoint" in named[1] and self.protocol in ("s3", "s3a") else "")
        return ValueError(f"{self.url}: storage_options key {named[1]!r} is not an option of {self.protocol}://"
                          f"{endpoint} ({exc})")

    def check_bucket(self) -> None:
        """An object store's bucket (the URL's first path component) must exist and be readable with the
        credentials: a missing bucket or a refused credential is a one-line error naming it."""
        fs = self.filesystem()
        if self.protocol not in _BUCKETED:  # memory://, http://, ftp://, ...: the store's own open says what is wrong
            return
        bucket = fs._strip_protocol(self.url).split("/", 1)[0]
        try:
            fs.info(bucket)
        except FileNotFoundError:
            raise ValueError(f"{self.url}: bucket {bucket!r} does not exist") from None
        except PermissionError as exc:
            raise ValueError(f"{self.url}: access to bucket {bucket!r} denied; check the credentials in "
                             f"storage_options or the environment ({' '.join(str(exc).split())})") from None
        except TypeError as exc:  # s3fs hands options it does not know to its client, which rejects them when used
            raise self._unsuited(exc) from None
        except Exception as exc:  # noqa: BLE001 - OSError, or the file system's own (botocore's are no OSError)
            detail = " ".join(str(exc).split()) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
            raise BucketUnreachable(f"{self.url}: cannot reach bucket {bucket!r} ({' '.join(detail.split())}); check "
                                    "the endpoint and the credentials in storage_options or the environment") from None

    def open_group(self, mode: str) -> zarr.Group:
        return zarr.open_group(self.url, mode=mode, zarr_format=3, storage_options=self.storage_options or None)

    def exists(self) -> bool:
        fs = self.filesystem()
        fs.invalidate_cache()  # zarr wrote through its own instance
        return fs.exists(self.url)

    def remove(self) -> None:
        fs = self.filesystem()
        if self.exists():
            fs.rm(self.url, recursive=True)


def location(path: str | os.PathLike | Location, storage_options: dict | None = None) -> Path | Location:
    """A local Path (for a path, ``~`` expanded, or a file:// URL) or a checked :class:`Location` (for any other
    URL)."""
    if isinstance(path, Location):
        return path
    if storage_options is not None and not isinstance(storage_options, dict):
        raise TypeError(f"storage_options must be a dict, got {type(storage_options).__name__}")
    if not is_url(path):
        if storage_options:
            raise ValueError(f"storage_options apply to URLs (s3://, gs://, memory://, ...), not the local path {path}")
        try:
            return Path(path).expanduser()
        except RuntimeError as exc:  # "~user" of no such user
            raise ValueError(f"{path}: {exc}") from None
    scheme, rest = path.split("://", 1)
    if "::" in scheme or re.search(r"::[A-Za-z][A-Za-z0-9+.-]*://", rest):  # simplecache::s3://…, zip://x::file://…
        plain = f" ({scheme.rsplit('::', 1)[1]}://{rest})" if "::" in scheme else ""
        raise ValueError(f"{path}: chained fsspec URLs are not supported; give the store's own URL{plain}")
    if scheme in _LOCAL:
        return location(rest, storage_options)
    return Location(path.rstrip("/"), dict(storage_options or {}))
