"""Copy a finished run and the history to any filesystem pyarrow knows, by URI.

Samples are written by the executors to a filesystem they share with the driver (a local path,
NFS, a Kubernetes ReadWriteMany claim); an object store is a copy made after the reduce, so the
run itself never depends on the store being reachable.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rbench.config.uri import mask_uri
from rbench.errors import ConfigError, SinkError


@dataclass(frozen=True)
class Uploaded:
    """Where one local directory went, and how many files it held."""

    source: Path
    destination: str
    files: int


def filesystem_for(uri: str) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(uri)  # type: ignore[no-any-return]
    except (ValueError, OSError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0].replace(uri, mask_uri(uri))
        password = urlsplit(uri).password if "://" in uri else None
        if password and password in first:
            first = type(exc).__name__           # pyarrow quoted the password in another form: say less
        raise ConfigError(f"--upload: {mask_uri(uri)} is not a filesystem URI pyarrow can open "
                          f"(file://, s3://, gs://, abfs://, hdfs://): {first}") from None


def upload_dirs(dirs: dict[str, Path], uri: str) -> list[Uploaded]:
    """Copy each local directory to URI/<name>; names are relative paths such as runs/<run_id>."""
    fs, root = filesystem_for(uri)
    return copy_dirs(dirs, fs, root, mask_uri(uri))


def copy_dirs(dirs: dict[str, Path], fs: Any, root: str, shown: str) -> list[Uploaded]:
    """Copy each local directory to root/<name> on `fs` (a pyarrow FileSystem); `shown` names it in messages."""
    import pyarrow.fs as pafs

    local = pafs.LocalFileSystem()
    done = []
    for name, source in dirs.items():
        target = f"{root.rstrip('/')}/{name}"
        try:
            fs.create_dir(target, recursive=True)
            pafs.copy_files(str(source.resolve()), target, source_filesystem=local, destination_filesystem=fs)
        except OSError as exc:
            raise SinkError(f"--upload: copying {source} to {shown}/{name} failed: {str(exc).splitlines()[0]}") from None
        files = sum(1 for p in source.rglob("*") if p.is_file())
        done.append(Uploaded(source, f"{shown.rstrip('/')}/{name}", files))
    return done
