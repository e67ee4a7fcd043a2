"""Op handles: the int by which torch.ops.mlajit.run names a BatchMlaAttention.

A torch custom op takes tensors and scalars, not Python objects, so each BatchMlaAttention gets
an int when it is created and the op looks the object up by it. Handles are never reused, and
the registry holds weak references: it keeps no object alive, and the handle of a closed or
collected object is refused with an error (passing the C pointer instead would reach freed
memory)."""
import itertools
import weakref

_objects = weakref.WeakValueDictionary()
_counter = itertools.count(1)  # next() is atomic under the GIL: no lock needed


def register(attention):
    """A new handle for `attention`."""
    handle = next(_counter)
    _objects[handle] = attention
    return handle


def unregister(handle):
    _objects.pop(handle, None)


def lookup(handle):
    """The live BatchMlaAttention with this handle, else TypeError/ValueError."""
    if isinstance(handle, bool) or not isinstance(handle, int):
        raise TypeError(f"handle must be the int BatchMlaAttention.op_handle, got {handle!r}")
    attention = _objects.get(handle)
    if attention is None:
        raise ValueError(f"no live BatchMlaAttention has op handle {handle}: it was closed or "
                         f"garbage-collected (keep the object alive while its handle is used), "
                         f"or the int is not an op_handle")
    return attention
