"""Helpers only the fake torch_npu has (tests look inside the fake with them)."""

from . import _C


def host_queue_length(stream):
    """Operations in `stream`'s host task queue, not yet on its ACL stream."""
    return _C._host_queue_length(stream.stream_id, stream.device_index)


def acl_stream_no_flush(stream):
    """`stream`'s aclrtStream as an int, WITHOUT moving the host task queue onto it (what a
    consumer that bypasses npu_stream would get)."""
    return _C._stream_handle_no_flush(stream.stream_id, stream.device_index)


def acl_pending(stream):
    """Operations on `stream`'s ACL stream not yet finished (the fake's hps_fake_pending), or
    -2 when the fake ACL library lacks hps_fake_pending."""
    return _C._acl_pending(stream.stream_id, stream.device_index)


def hold(stream):
    """Holds `stream` at its current end (its host queue moved onto it) until the returned
    gate's open() (bounded: 60 s): work enqueued on it afterwards waits, whatever its length."""
    return _C._hold(stream.stream_id, stream.device_index)


def device_of_pointer(ptr):
    """torch's answer (PrivateUse1 hooks' getDeviceFromPtr, through aclrtPointerGetAttributes)
    for a fake device pointer: its device index; raises RuntimeError for host memory."""
    return _C._device_of_pointer(ptr)
