"""``torch.npu`` (and ``torch_npu.npu``) of the fake torch_npu: the names of torch.cuda that
torch_npu mirrors, over the fake device (see ../README.md)."""

import torch

from . import _C

__all__ = [
    "Event", "Stream", "StreamContext", "current_device", "current_stream", "default_stream",
    "device", "device_count", "init", "is_available", "is_initialized", "manual_seed",
    "manual_seed_all", "seed", "set_device", "set_stream", "stream", "synchronize",
]


def _index(device=None, optional=True):
    """The device index of an int, "npu"/"npu:1", a torch.device or None (the current one)."""
    if device is None:
        return current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "npu":
            raise ValueError(f"expected an npu device, got {device}")
        return current_device() if device.index is None else device.index
    if isinstance(device, int):
        return current_device() if device < 0 and optional else device
    raise TypeError(f"not a device: {device!r}")


def is_available():
    return _C._device_count() > 0


def device_count():
    return _C._device_count()


def current_device():
    return _C._get_device()


def set_device(device):
    _C._set_device(_index(device))


def init():
    pass


def is_initialized():
    return True


def _is_in_bad_fork():
    return False


# The kernels run on the CPU with the CPU generator: torch.manual_seed seeds them.
def manual_seed(seed):
    pass


def manual_seed_all(seed):
    pass


def seed():
    pass


def seed_all():
    pass


def synchronize(device=None):
    """Waits (60 s at most, HPS_FAKE_NPU_SYNC_TIMEOUT) until every stream of the device ran its
    queued work; raises RuntimeError if any of it failed."""
    _C._synchronize(_index(device))


class device:
    """Context manager that makes `device` current (a negative index or None: no change)."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0:
            _C._set_device(self.prev_idx)
        return False


class Stream(torch.Stream):
    """An NPU stream (torch.Stream of the npu device); ``npu_stream`` is its aclrtStream."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, stream_id=kwargs["stream_id"],
                                   device_index=kwargs["device_index"],
                                   device_type=kwargs["device_type"])
        return super().__new__(cls, device=torch.device("npu", _index(device)), priority=priority)

    def __init__(self, *args, **kwargs):
        pass

    @property
    def npu_stream(self):
        """The aclrtStream as an int; first moves the stream's host task queue onto it."""
        return _C._stream_handle(self.stream_id, self.device_index)

    def wait_stream(self, stream):
        self.wait_event(stream.record_event())

    def __repr__(self):
        return (f"<torch_npu.npu.Stream device=npu:{self.device_index} "
                f"stream_id={self.stream_id}>")


def _wrap(triple):
    stream_id, device_index, device_type = triple
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


def current_stream(device=None):
    return _wrap(_C._current_stream(_index(device)))


def default_stream(device=None):
    return _wrap(_C._default_stream(_index(device)))


def set_stream(stream):
    """Makes `stream` current on this thread (and its device the current device)."""
    if stream is None:
        return
    if stream.device_index != current_device():
        set_device(stream.device_index)
    _C._set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """``with torch.npu.stream(s):`` makes s current, then restores the previous stream (and
    device)."""

    def __init__(self, stream):
        self.stream = stream
        self.prev_device = -1
        self.prev_streams = []

    def __enter__(self):
        if self.stream is None:
            return self.stream
        self.prev_device = current_device()
        self.prev_streams = [current_stream(self.prev_device)]
        if self.stream.device_index != self.prev_device:
            self.prev_streams.append(current_stream(self.stream.device_index))
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        for prev in self.prev_streams:
            _C._set_stream(prev.stream_id, prev.device_index)
        set_device(self.prev_device)
        return False


def stream(stream):
    return StreamContext(stream)


class Event(torch.Event):
    """An NPU event (torch.Event of the npu device) over an ACL event."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False, device=None):
        return super().__new__(cls, device=torch.device("npu", _index(device)),
                               enable_timing=enable_timing, blocking=blocking,
                               interprocess=interprocess)

    def __init__(self, *args, **kwargs):
        pass
