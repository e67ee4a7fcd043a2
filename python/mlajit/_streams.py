"""torch's current CUDA stream as a raw handle (an int), cheaply.

torch.cuda.current_stream(d).cuda_stream builds a torch.cuda.Stream per call (microseconds);
torch._C._cuda_getCurrentRawStream(d) returns the same handle directly. It is a private function,
so it is used only when present and when it agreed with the public one on first use."""
import functools
import sys


def loaded_torch():
    """torch if the caller has imported it (this package never imports it)."""
    return sys.modules.get("torch")


def current_stream_getter(torch, device):
    """A function () -> the raw handle of torch's current stream on `device` (an ordinal, or
    None: the current device at each call)."""
    def public():
        return torch.cuda.current_stream(device).cuda_stream

    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if raw is None or device is None:
        return public
    try:
        expected = public()  # also initialises torch's CUDA state, as current_stream() always did
        if raw(device) == expected:
            return functools.partial(raw, device)
    except Exception:  # noqa: BLE001 - any failure of the private path: keep the public one
        pass
    return public
