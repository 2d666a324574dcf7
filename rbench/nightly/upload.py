"""Copy a finished run and the history to any filesystem pyarrow knows, by URI.

Samples are written by the executors to a filesystem they share with the driver (a local path,
NFS, a Kubernetes ReadWriteMany claim); an object store is a copy made after the reduce, so the
run itself never depends on the store being reachable.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rbench.errors import ConfigError, SinkError, mask_uri


@dataclass(frozen=True)
class Uploaded:
    """Where one local directory went, and how many files it held."""

    source: Path
    destination: str
    files: int


def filesystem_for(uri: str) -> tuple[object, str]:
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(uri)  # type: ignore[no-any-return]
    except (ValueError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"--upload: {mask_uri(uri)} is not a filesystem URI pyarrow can open "
                          f"(file://, s3://, gs://, abfs://, hdfs://): {first}") from None


def upload_dirs(dirs: dict[str, Path], uri: str) -> list[Uploaded]:
    """Copy each local directory to URI/<name>; names are relative paths such as runs/<run_id>."""
    import pyarrow.fs as pafs

    fs, root = filesystem_for(uri)
    local = pafs.LocalFileSystem()
    done = []
    for name, source in dirs.items():
        target = f"{root.rstrip('/')}/{name}"
        try:
            fs.create_dir(target, recursive=True)  # type: ignore[attr-defined]
            pafs.copy_files(str(source.resolve()), target, source_filesystem=local, destination_filesystem=fs)
        except OSError as exc:
            raise SinkError(f"--upload: copying {source} to {mask_uri(uri)}/{name} failed: {str(exc).splitlines()[0]}") from None
        files = sum(1 for p in source.rglob("*") if p.is_file())
        done.append(Uploaded(source, f"{mask_uri(uri).rstrip('/')}/{name}", files))
    return done
