"""pdc.Error and one subclass per pdc_status (include/pdc.h), raised with the context's message."""
from . import _lib


class Error(Exception):
    """A pdc call failed. `status` is the pdc_status value, `status_name` its constant name
    (e.g. "PDC_ERR_PARSE"), `message` the text of pdc_context_last_error (what, where, and what was
    expected)."""

    status = None
    status_name = None

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
            self.status_name = _lib.lib.pdc_status_string(status).decode()
        self.message = message
        super().__init__(f"{message} ({self.status_name})" if self.status_name else message)


class InvalidArgError(Error, ValueError):
    """PDC_ERR_INVALID_ARG: a bad argument, option name or value, or index out of range."""
    status = 1


class OutOfMemoryError(Error, MemoryError):
    """PDC_ERR_OUT_OF_MEMORY: an allocation failed or would exceed the max_memory limit."""
    status = 2


class IoError(Error, OSError):
    """PDC_ERR_IO: a file could not be opened, read or written (the message names the path)."""
    status = 3


class ParseError(Error, ValueError):
    """PDC_ERR_PARSE: malformed IR text or model file (line:column or offset in the message)."""
    status = 4


class CorruptError(Error, ValueError):
    """PDC_ERR_CORRUPT: wrong magic, version or checksum, or a truncated file."""
    status = 5


class InvalidModelError(Error, ValueError):
    """PDC_ERR_INVALID_MODEL: the verifier rejected the model (the message names layer and fact)."""
    status = 6


class ShapeError(Error, ValueError):
    """PDC_ERR_SHAPE: shapes do not agree, or a symbolic shape is unresolved."""
    status = 7


class UnsupportedError(Error, NotImplementedError):
    """PDC_ERR_UNSUPPORTED: a known but unsupported op, dtype or target feature."""
    status = 8


class UnknownTargetError(Error, ValueError):
    """PDC_ERR_UNKNOWN_TARGET: the target name is not known (the message lists the known ones)."""
    status = 9


class NoDeviceError(Error, RuntimeError):
    """PDC_ERR_NO_DEVICE: the target is known but its device or driver is absent."""
    status = 10


class InvalidStateError(Error, RuntimeError):
    """PDC_ERR_INVALID_STATE: a call made out of order."""
    status = 11


class SizeOverflowError(Error, OverflowError):
    """PDC_ERR_OVERFLOW: sizes or counts overflow."""
    status = 12


class NotFoundError(Error, LookupError):
    """PDC_ERR_NOT_FOUND: no tensor, layer or input of that name."""
    status = 13


class InternalError(Error, RuntimeError):
    """PDC_ERR_INTERNAL: a bug in pdc; please report it."""
    status = 14


class NumericError(Error, ArithmeticError):
    """PDC_ERR_NUMERIC: a NaN or infinity appeared (e.g. a training loss; the message names the step)."""
    status = 15


class CopyWarning(UserWarning):
    """An argument was not a C-contiguous float32 NumPy array and was converted (copied) once."""


ERRORS = {cls.status: cls for cls in (
    InvalidArgError, OutOfMemoryError, IoError, ParseError, CorruptError, InvalidModelError, ShapeError,
    UnsupportedError, UnknownTargetError, NoDeviceError, InvalidStateError, SizeOverflowError, NotFoundError,
    InternalError, NumericError)}

for _cls in ERRORS.values():
    _cls.status_name = _lib.lib.pdc_status_string(_cls.status).decode()


def error(status, ctx_handle):
    """The exception for a failed call: its class by status, its message from the calling thread's last error
    on the context (or the context-less one, for calls that failed before they knew a context)."""
    last = _lib.lib.pdc_context_last_error
    msg = last(ctx_handle) or last(None) or b""
    msg = msg.decode("utf-8", "replace") or _lib.lib.pdc_status_string(status).decode()
    cls = ERRORS.get(status, Error)
    return cls(msg, status)
