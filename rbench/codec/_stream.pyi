"""Type stub for the compiled stream publisher core (ext/codec/stream.pyx)."""
from collections.abc import Callable

PUBLISH_HEADER_SIZE: int

Buffer = bytes | bytearray | memoryview

class PublishFrame:
    def __init__(self, publisher_id: int, frame_max: int, amqp: bool, on_first: Callable[[], object],
                 on_full: Callable[[int], None], filter_table: tuple[bytes | None, ...] | None = None,
                 seq_step: int = 0, filter_key: int = 0) -> None: ...
    @property
    def count(self) -> int: ...
    def add(self, payload: Buffer, seq: int) -> None: ...
    def take(self) -> bytes | None: ...

def confirm_each(data: bytes, pos: int, count: int, on_confirm: Callable[[int, bool, int], None], t_ns: int) -> None: ...
