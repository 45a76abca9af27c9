"""Type stubs of the `weft` module (Weft's Python binding, crates/weft-py).

maturin ships this file with a `py.typed` marker. Keys and values are
`bytes` with the default codec; with `codec="str"` they are `str`, with
`codec="pickle"` any picklable object — hence `Any` where the codec decides.
"""

from os import PathLike
from types import TracebackType
from typing import Any, Callable, Iterable, Literal, Optional, TypeVar, Union, overload
from typing import Iterator as _Iter

__version__: str
MAX_KEY_SIZE: int
MAX_VALUE_SIZE: int

_Codec = Literal["bytes", "str", "pickle"]
_Compression = str  # "none", "lz4", "zstd" or "zstd:LEVEL"
_T = TypeVar("_T")

def open(
    path: Union[str, PathLike[str]],
    *,
    read_only: bool = False,
    codec: Optional[_Codec] = None,
    key_codec: Optional[_Codec] = None,
    value_codec: Optional[_Codec] = None,
    create_if_missing: Optional[bool] = None,
    error_if_exists: Optional[bool] = None,
    memtable: Optional[Literal["skiplist", "jellyfish", "esl", "cuckoo", "teks"]] = None,
    write_buffer_size: Optional[int] = None,
    max_immutable_memtables: Optional[int] = None,
    block_size: Optional[int] = None,
    block_cache_size: Optional[int] = None,
    row_cache_size: Optional[int] = None,
    munk_cache_size: Optional[int] = None,
    mmap_reads: Optional[bool] = None,
    bloom_bits_per_key: Optional[int] = None,
    compression: Optional[_Compression] = None,
    unsorted_compression: Optional[_Compression] = None,
    sorted_compression: Optional[_Compression] = None,
    value_log_compression: Optional[_Compression] = None,
    table_size: Optional[int] = None,
    unsorted_limit: Optional[int] = None,
    unsorted_slowdown_tables: Optional[int] = None,
    unsorted_stop_tables: Optional[int] = None,
    min_blob_size: Optional[int] = None,
    values_in_wal: Optional[bool] = None,
    scan_merge_limit: Optional[int] = None,
    partition_size: Optional[int] = None,
    gc_garbage_ratio: Optional[float] = None,
    gc_min_garbage_bytes: Optional[int] = None,
    manual_wal_flush: Optional[bool] = None,
    stats_save_interval: Optional[float] = None,
    max_value_logs: Optional[int] = None,
    background_jobs: Optional[int] = None,
    background_write_rate: Optional[int] = None,
) -> Db:
    """Opens (or creates) the database in `path`. Options are keyword-only and
    typed: an unknown name or a wrong type raises TypeError, a value out of
    range ValueError (InvalidArgumentError for what the engine refuses)."""

class Keyspace:
    """One keyspace of a database, with a dict-like API. `Db` is a subclass
    (the default keyspace). There is no `len()`: the engine keeps no count."""

    @property
    def name(self) -> str: ...
    @property
    def key_codec(self) -> _Codec: ...
    @property
    def value_codec(self) -> _Codec: ...
    def get(self, key: Any, default: Any = None, *, snapshot: Optional[Snapshot] = None) -> Any: ...
    @overload
    def __getitem__(self, key: list[Any]) -> list[Any]: ...
    @overload
    def __getitem__(self, key: Any) -> Any: ...
    def __setitem__(self, key: Any, value: Any) -> None: ...
    def __delitem__(self, key: Any) -> None: ...
    def __contains__(self, key: Any) -> bool: ...
    def __iter__(self) -> _Iter[Any]: ...
    def get_many(self, keys: Iterable[Any], *, snapshot: Optional[Snapshot] = None) -> list[Any]: ...
    def put(self, key: Any, value: Any, *, sync: bool = False, disable_wal: bool = False) -> None: ...
    def delete(self, key: Any, *, sync: bool = False, disable_wal: bool = False) -> None: ...
    def delete_range(self, start: Any, stop: Any, *, sync: bool = False, disable_wal: bool = False) -> None: ...
    def items(
        self,
        *,
        start: Any = None,
        stop: Any = None,
        prefix: Any = None,
        reverse: bool = False,
        snapshot: Optional[Snapshot] = None,
    ) -> _Iter[tuple[Any, Any]]: ...
    def keys(
        self,
        *,
        start: Any = None,
        stop: Any = None,
        prefix: Any = None,
        reverse: bool = False,
        snapshot: Optional[Snapshot] = None,
    ) -> _Iter[Any]: ...
    def values(
        self,
        *,
        start: Any = None,
        stop: Any = None,
        prefix: Any = None,
        reverse: bool = False,
        snapshot: Optional[Snapshot] = None,
    ) -> _Iter[Any]: ...
    def iter(
        self,
        *,
        start: Any = None,
        stop: Any = None,
        prefix: Any = None,
        snapshot: Optional[Snapshot] = None,
    ) -> RawIterator: ...
    def _get_holding_gil(self, key: Any) -> Any: ...

class Db(Keyspace):
    """An open database: the default keyspace plus whole-database calls."""

    @property
    def path(self) -> str: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    def close(self, *, flush: bool = True) -> None: ...
    def __enter__(self) -> Db: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
    def snapshot(self) -> Snapshot: ...
    def batch(self, *, sync: bool = False, disable_wal: bool = False) -> WriteBatch: ...
    def write(self, batch: WriteBatch, *, sync: bool = False, disable_wal: bool = False) -> None: ...
    def transaction(self, *, sync: bool = False, disable_wal: bool = False) -> Transaction: ...
    def transact(
        self,
        func: Callable[[Transaction], _T],
        *,
        max_attempts: int = 16,
        sync: bool = False,
        disable_wal: bool = False,
    ) -> _T: ...
    def keyspace(
        self,
        name: str,
        *,
        codec: Optional[_Codec] = None,
        key_codec: Optional[_Codec] = None,
        value_codec: Optional[_Codec] = None,
    ) -> Keyspace: ...
    def keyspaces(self) -> list[str]: ...
    def drop_keyspace(self, name: str) -> None: ...
    def flush(self) -> None: ...
    def compact(self) -> None: ...
    def check(self) -> dict[str, int]: ...
    def sync_wal(self) -> None: ...
    def flush_wal(self) -> None: ...
    def checkpoint(self, path: Union[str, PathLike[str]]) -> dict[str, int]: ...
    def refresh(self) -> None: ...
    def stats(self) -> dict[str, Any]: ...

class Snapshot:
    """A point-in-time view: read it directly or pass it as `snapshot=`."""

    @property
    def sequence(self) -> int: ...
    def get(self, key: Any, default: Any = None) -> Any: ...
    @overload
    def __getitem__(self, key: list[Any]) -> list[Any]: ...
    @overload
    def __getitem__(self, key: Any) -> Any: ...
    def __contains__(self, key: Any) -> bool: ...
    def __iter__(self) -> _Iter[Any]: ...
    def get_many(self, keys: Iterable[Any]) -> list[Any]: ...
    def items(
        self, *, start: Any = None, stop: Any = None, prefix: Any = None, reverse: bool = False
    ) -> _Iter[tuple[Any, Any]]: ...
    def keys(
        self, *, start: Any = None, stop: Any = None, prefix: Any = None, reverse: bool = False
    ) -> _Iter[Any]: ...
    def values(
        self, *, start: Any = None, stop: Any = None, prefix: Any = None, reverse: bool = False
    ) -> _Iter[Any]: ...
    def iter(self, *, start: Any = None, stop: Any = None, prefix: Any = None) -> RawIterator: ...
    def release(self) -> None: ...
    def __enter__(self) -> Snapshot: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class WriteBatch:
    """Writes applied atomically by `Db.write`, or on leaving `with db.batch():`."""

    def __init__(
        self,
        *,
        codec: Optional[_Codec] = None,
        key_codec: Optional[_Codec] = None,
        value_codec: Optional[_Codec] = None,
    ) -> None: ...
    def put(self, key: Any, value: Any, *, keyspace: Optional[Keyspace] = None) -> None: ...
    def delete(self, key: Any, *, keyspace: Optional[Keyspace] = None) -> None: ...
    def delete_range(self, start: Any, stop: Any, *, keyspace: Optional[Keyspace] = None) -> None: ...
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    @property
    def approximate_size(self) -> int: ...
    def __enter__(self) -> WriteBatch: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Transaction:
    """An optimistic transaction; `commit()` raises ConflictError on a conflict.
    Each call takes `keyspace=`; one commit spans keyspaces atomically."""

    def get(self, key: Any, default: Any = None, *, keyspace: Optional[Keyspace] = None) -> Any: ...
    def get_for_update(self, key: Any, *, keyspace: Optional[Keyspace] = None) -> Any: ...
    def __getitem__(self, key: Any) -> Any: ...
    def __contains__(self, key: Any) -> bool: ...
    def put(self, key: Any, value: Any, *, keyspace: Optional[Keyspace] = None) -> None: ...
    def __setitem__(self, key: Any, value: Any) -> None: ...
    def delete(self, key: Any, *, keyspace: Optional[Keyspace] = None) -> None: ...
    def __delitem__(self, key: Any) -> None: ...
    def items(
        self,
        *,
        start: Any = None,
        stop: Any = None,
        reverse: bool = False,
        keyspace: Optional[Keyspace] = None,
    ) -> list[tuple[Any, Any]]: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def __enter__(self) -> Transaction: ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class ScanIterator(_Iter[Any]):
    """What `items()`, `keys()` and `values()` return: one snapshot's entries."""

    def __iter__(self) -> ScanIterator: ...
    def __next__(self) -> Any: ...

class RawIterator:
    """A positioned cursor at one snapshot; starts unpositioned."""

    def valid(self) -> bool: ...
    def seek_to_first(self) -> None: ...
    def seek_to_last(self) -> None: ...
    def seek(self, key: Any) -> None: ...
    def seek_for_prev(self, key: Any) -> None: ...
    def next(self) -> None: ...
    def prev(self) -> None: ...
    def key(self) -> Any: ...
    def value(self) -> Any: ...
    def item(self) -> tuple[Any, Any]: ...

class Error(Exception):
    """Base class of every error the engine reports."""

class IoError(Error, OSError):
    context: str

class CorruptionError(Error):
    file: str
    offset: int
    reason: str

class InvalidArgumentError(Error, ValueError): ...
class PoisonedError(Error): ...

class LockedError(Error):
    path: str

class UnsupportedError(Error):
    path: str
    found: int
    supported: int

class ChangesReleasedError(Error):
    requested: int
    oldest: int

class ClosedError(Error): ...

class ReadOnlyError(Error):
    operation: str

class ConflictError(Error):
    key: bytes
    keyspace: str
