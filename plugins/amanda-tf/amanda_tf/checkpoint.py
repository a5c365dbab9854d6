"""TensorFlow checkpoints (tensor bundles) read and written tensor by tensor.

A bundle is ``<prefix>.index``, a table of entries (key -> dtype, shape, shard, offset, size, checksum), and
``<prefix>.data-<shard>-of-<shards>`` files holding each tensor's bytes as they are in memory.  Reading maps the
data files: a tensor of at least :data:`MAPPED_BYTES` becomes a lazy :class:`amanda_core.ir.tensor.FileTensor` on
its byte range (a read-only view of the page cache once read, never a copy in the process); smaller ones become
arrays.  Writing hands TensorFlow's ``SaveV2`` groups of at most :data:`GROUP_BYTES` of tensors that share the
values' memory (a mapped file's pages, by DLPack), one bundle per group, and merges the bundles with
``MergeV2Checkpoints`` (which renames their data files into place).  See
"Weights" in ``docs/tensorflow.md``.
"""

from __future__ import annotations

__all__ = ["Bundle", "UnsupportedBundle", "write_tensors", "object_graph", "MAPPED_BYTES", "GROUP_BYTES"]

import mmap
import os
import struct
from typing import Any, Iterator, Sequence

import numpy as np

from amanda_core.errors import FormatError, first_line
from amanda_core.ir.tensor import FileTensor, MappedFile, Tensor, resolve_dtype, tensor_nbytes

from .dtypes import DTypeError, dtype_from_enum, numpy_dtype

MAPPED_BYTES = 1024
"""Tensors of at least this many bytes are read lazily from the mapped data file; smaller ones are copied."""

GROUP_BYTES = 64 * 2**20
"""At most this many bytes of tensors (or one larger tensor) are handed to ``SaveV2`` at a time (a value that
cannot be shared with TensorFlow, such as a read-only array in memory, is copied: one group at most)."""

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class UnsupportedBundle(Exception):
    """A bundle this reader does not map (compressed index blocks, big-endian data ...): read it through
    TensorFlow instead."""


# --------------------------------------------------------------------------- the index table

def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise FormatError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise FormatError("varint too long")


def _handle(data: bytes, pos: int) -> tuple[int, int, int]:
    offset, pos = _varint(data, pos)
    size, pos = _varint(data, pos)
    return offset, size, pos


def _block(data: bytes, offset: int, size: int) -> bytes:
    if offset + size + 5 > len(data):
        raise FormatError("a block lies past the end of the file")
    if data[offset + size] != 0:  # 0: stored as is (TensorFlow writes bundle indexes uncompressed)
        raise UnsupportedBundle(f"compressed index block (type {data[offset + size]})")
    return data[offset:offset + size]


def _entries(block: bytes) -> Iterator[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise FormatError("a block too short for its restart count")
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * restarts
    if end < 0:
        raise FormatError("a block's restart array is longer than the block")
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        if shared > len(key) or pos + unshared + length > end:
            raise FormatError("a malformed table entry")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        yield key, block[pos:pos + length]
        pos += length


def _table(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) entries of a table file (LevelDB's table format, as TensorFlow writes it), in order."""
    if len(data) < _FOOTER:
        raise FormatError("too short for a table")
    (magic,) = struct.unpack_from("<Q", data, len(data) - 8)
    if magic != _TABLE_MAGIC:
        raise FormatError("not a table (bad magic number)")
    footer = data[len(data) - _FOOTER:]
    _, _, pos = _handle(footer, 0)  # the meta index: not used
    offset, size, _ = _handle(footer, pos)
    for _, value in _entries(_block(data, offset, size)):
        block_offset, block_size, _ = _handle(value, 0)
        yield from _entries(_block(data, block_offset, block_size))


# --------------------------------------------------------------------------- reading

class Bundle:
    """The index of the bundle at ``prefix``, parsed; :meth:`tensor` gives one entry's tensor without reading
    it.  Raises :class:`UnsupportedBundle` for a bundle it cannot map, ``FormatError`` for a broken one."""

    def __init__(self, prefix: str) -> None:
        from tensorflow.core.protobuf import tensor_bundle_pb2

        self.prefix = prefix
        index = prefix + ".index"
        try:
            with open(index, "rb") as f:
                data = f.read()
        except OSError as e:
            raise FormatError(f"{index}: cannot read: {e.strerror}") from None
        self.entries: dict[str, Any] = {}
        header = None
        try:
            for key, value in _table(data):
                if key == b"":
                    header = tensor_bundle_pb2.BundleHeaderProto.FromString(value)
                else:
                    self.entries[key.decode("utf-8", "replace")] = tensor_bundle_pb2.BundleEntryProto.FromString(value)
        except FormatError as e:
            raise FormatError(f"{index}: not a checkpoint index: {e}") from None
        except Exception as e:  # a value that does not parse as its message
            raise FormatError(f"{index}: not a checkpoint index: {type(e).__name__}: {e}") from None
        if header is None:
            raise FormatError(f"{index}: not a checkpoint index (no header entry)")
        self.num_shards = int(header.num_shards)
        self.little_endian = header.endianness == 0
        self._files: dict[int, MappedFile] = {}
        self._reader: Any = None

    def data_path(self, shard: int) -> str:
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def _file(self, shard: int, key: str) -> MappedFile:
        f = self._files.get(shard)
        if f is None:
            path = self.data_path(shard)
            try:
                f = MappedFile(path)
            except OSError as e:
                raise FormatError(f"checkpoint tensor {key!r}: cannot open {path}: {e.strerror}") from None
            self._files[shard] = f
        return f

    def object_graph(self) -> Any:
        """The checkpoint's ``TrackableObjectGraph`` (None when it has none)."""
        from tensorflow.core.protobuf import trackable_object_graph_pb2

        entry = self.entries.get(_OBJECT_GRAPH_KEY)
        if entry is None:
            return None
        raw = self._string_scalar(_OBJECT_GRAPH_KEY, entry)
        graph = trackable_object_graph_pb2.TrackableObjectGraph()
        try:
            graph.ParseFromString(raw)
        except Exception as e:
            raise FormatError(f"checkpoint tensor {_OBJECT_GRAPH_KEY!r} in {self.data_path(entry.shard_id)}: not "
                              f"an object graph: {type(e).__name__}") from None
        return graph

    def _string_scalar(self, key: str, entry: Any) -> bytes:
        """A scalar string tensor's bytes: stored as its length (a varint), a checksum of the length (4 bytes)
        and the bytes."""
        if entry.shape.dim or dtype_from_enum(int(entry.dtype)) != "string" or entry.slices:
            raw = self._reader_get(key)
            return bytes(raw.item() if isinstance(raw, np.ndarray) else raw)
        f = self._file(int(entry.shard_id), key)
        label = f"checkpoint tensor {key!r}"
        f.check_range(int(entry.offset), int(entry.size), label)
        data = os.pread(f.fd, int(entry.size), int(entry.offset))
        length, pos = _varint(data, 0)
        if pos + 4 + length != len(data):
            raise FormatError(f"{label} in {f.path}: {len(data)} bytes do not hold a string of {length}")
        return data[pos + 4:]

    def _reader_get(self, key: str) -> Any:
        try:
            if self._reader is None:
                from tensorflow.python.training import py_checkpoint_reader

                self._reader = py_checkpoint_reader.NewCheckpointReader(self.prefix)
            return self._reader.get_tensor(key)
        except Exception as e:  # TensorFlow's reader raises many types
            raise FormatError(f"checkpoint tensor {key!r} of {self.prefix}: TensorFlow cannot read it: "
                              f"{first_line(e)}") from None

    def tensor(self, key: str) -> np.ndarray | Tensor:
        """The tensor stored under ``key``: a :class:`FileTensor` on its bytes in the data file (at least
        :data:`MAPPED_BYTES`), an array read now (smaller), or, for what cannot be mapped (strings, sliced
        variables, big-endian data), a lazy tensor read through TensorFlow's checkpoint reader."""
        entry = self.entries.get(key)
        if entry is None:
            raise FormatError(f"{self.prefix}: the checkpoint has no tensor {key!r}")
        try:
            name = dtype_from_enum(int(entry.dtype))
        except DTypeError as e:
            raise FormatError(f"checkpoint tensor {key!r}: {e}") from None
        shape = tuple(int(d.size) for d in entry.shape.dim)
        nd = numpy_dtype(name) if not name.startswith("q") and name not in ("string", "resource", "variant") \
            else None
        count = int(np.prod(shape, dtype=np.int64))
        mappable = (nd is not None and not entry.slices and entry.shard_id < self.num_shards
                    and int(entry.size) == count * nd.itemsize and (self.little_endian or nd.itemsize == 1))
        if not mappable:
            dt = nd.name if nd is not None else name
            return Tensor(loader=lambda: np.asarray(self._reader_get(key)), dtype=dt, shape=shape)
        assert nd is not None
        f = self._file(int(entry.shard_id), key)
        label = f"checkpoint tensor {key!r}"
        offset, size = int(entry.offset), int(entry.size)
        f.check_range(offset, size, label)
        if size >= MAPPED_BYTES:
            return FileTensor(f, offset, size, dtype=nd.name, shape=shape, label=label)
        array = np.frombuffer(os.pread(f.fd, size, offset), dtype=nd).reshape(shape)  # small: read now
        array.flags.writeable = False
        return array


def object_graph(prefix: str) -> Any:
    """The ``TrackableObjectGraph`` of the checkpoint at ``prefix`` (None when it has none)."""
    return Bundle(prefix).object_graph()


# --------------------------------------------------------------------------- writing

def _groups(items: Sequence[tuple[str, Any]]) -> Iterator[list[tuple[str, Any]]]:
    group: list[tuple[str, Any]] = []
    size = 0
    for key, value in items:
        n = tensor_nbytes(value)
        if group and size + n > GROUP_BYTES:
            yield group
            group, size = [], 0
        group.append((key, value))
        size += n
    if group:
        yield group


def _tf_tensor(tf: Any, value: Any, maps: dict[int, mmap.mmap]) -> Any:
    """A TensorFlow tensor of ``value`` that shares its memory where it can: a plain :class:`FileTensor` is
    viewed through a private (copy-on-write) map of its file, so its pages stay the page cache's; a writable
    array is handed over by DLPack.  Anything else (read-only arrays, types DLPack does not carry) is copied by
    ``tf.convert_to_tensor``."""
    array = None
    if isinstance(value, FileTensor):
        dt = resolve_dtype(value.dtype)
        if value.length == value.size * dt.itemsize and dt.byteorder in "=|<" and value.length:
            value.file.check_range(value.offset, value.length, value.label)
            m = maps.get(id(value.file))
            if m is None:
                m = maps[id(value.file)] = mmap.mmap(value.file.fd, 0, access=mmap.ACCESS_COPY)
            array = np.frombuffer(m, dtype=dt, count=value.size, offset=value.offset).reshape(value.shape)
    if array is None:
        array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
    if array.size and array.flags.writeable and array.flags.c_contiguous:
        try:
            return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
        except Exception:  # a dtype DLPack or TensorFlow does not carry (bool, bfloat16 ...): copied below
            pass
    return tf.convert_to_tensor(array)


def write_tensors(prefix: str, items: Sequence[tuple[str, Any]]) -> None:
    """Add ``items`` (checkpoint key, array or :class:`Tensor`) to the bundle at ``prefix`` (which must exist:
    the one ``tf.saved_model.save`` wrote), in groups of at most :data:`GROUP_BYTES` (or one larger tensor).
    Each group is written by ``SaveV2`` as a bundle of its own beside ``prefix``, from tensors sharing the
    values' memory (:func:`_tf_tensor`: a tensor still in its file is read from the page cache, never copied
    into the process); ``MergeV2Checkpoints`` then makes ``prefix`` the bundle of them all (its data files are
    the groups' files, renamed, so a bundle written here has one data file per group plus TensorFlow's own)."""
    from .framework import import_tensorflow

    tf = import_tensorflow()
    if not items:
        return
    directory = os.path.dirname(prefix)
    work = os.path.join(directory, ".amanda_parts")
    os.makedirs(work, exist_ok=True)
    first = os.path.join(work, "saved")
    for name in os.listdir(directory):  # the bundle TensorFlow wrote becomes the first part
        base = os.path.basename(prefix)
        if name.startswith(base + "."):
            os.rename(os.path.join(directory, name), os.path.join(work, "saved" + name[len(base):]))
    parts = [first]
    maps: dict[int, mmap.mmap] = {}
    for i, group in enumerate(_groups(items)):
        part = os.path.join(work, f"part{i}")
        tensors = [_tf_tensor(tf, value, maps) for _, value in group]
        tf.raw_ops.SaveV2(prefix=part, tensor_names=[k for k, _ in group], shape_and_slices=[""] * len(group),
                          tensors=tensors)
        del tensors
        parts.append(part)
    maps.clear()
    tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=parts, destination_prefix=prefix, delete_old_dirs=True)
    if os.path.isdir(work):
        os.rmdir(work)
