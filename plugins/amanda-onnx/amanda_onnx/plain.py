"""Protobuf messages as plain data, and back.

Rare parts of an ONNX model that the graph abstraction has no dedicated place for (device configurations,
quantization annotations, a ``TypeProto`` with denotations, tensor segments, ``metadata_props`` entries) are
kept as *plain data*: a dict with one key per field that is present in the message (so a field explicitly set
to its default stays distinguishable from an absent one), lists for repeated fields, dicts for sub-messages,
``str``/``bytes``/``int``/``float`` for scalars (enums as their numbers).  Plain data writes to YAML as is, and
:func:`plain_to_message` gives back a message equal to the original field for field.
"""

from __future__ import annotations

__all__ = ["message_to_plain", "plain_to_message", "entries_to_plain", "fill_entries"]

from typing import Any, Iterable


def message_to_plain(msg: Any) -> dict[str, Any]:
    """Every present field of ``msg`` as plain data (see the module doc)."""
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        if fd.message_type is not None:
            if fd.is_repeated:
                out[fd.name] = [message_to_plain(v) for v in value]
            else:
                out[fd.name] = message_to_plain(value)
        elif fd.is_repeated:
            out[fd.name] = list(value)
        else:
            out[fd.name] = value
    return out


def plain_to_message(data: dict[str, Any], msg: Any) -> Any:
    """Fill ``msg`` from plain data made by :func:`message_to_plain`; returns ``msg``.

    Raises ValueError naming the field when ``data`` does not fit the message type."""
    if not isinstance(data, dict):
        raise ValueError(f"plain {msg.DESCRIPTOR.name} data must be a mapping, got {type(data).__name__}")
    fields = msg.DESCRIPTOR.fields_by_name
    for name, value in data.items():
        fd = fields.get(name)
        if fd is None:
            raise ValueError(f"{msg.DESCRIPTOR.name} has no field {name!r}")
        try:
            if fd.message_type is not None:
                if fd.is_repeated:
                    container = getattr(msg, name)
                    for item in value:
                        plain_to_message(item, container.add())
                else:
                    sub = getattr(msg, name)
                    sub.SetInParent()
                    plain_to_message(value, sub)
            elif fd.is_repeated:
                getattr(msg, name).extend(value)
            else:
                setattr(msg, name, value)
        except (TypeError, AttributeError) as e:
            raise ValueError(f"{msg.DESCRIPTOR.name}.{name}: {e}") from None
    return msg


def entries_to_plain(entries: Iterable[Any]) -> list[dict[str, Any]]:
    """A repeated message field (``metadata_props``, ``opset_import`` ...) as a list of plain dicts."""
    return [message_to_plain(e) for e in entries]


def fill_entries(container: Any, entries: Iterable[dict[str, Any]]) -> None:
    """Append one message per plain dict to a repeated message field."""
    for e in entries:
        plain_to_message(e, container.add())
