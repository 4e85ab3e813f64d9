"""The one exception users see: a bad value, said in one line."""


class RingtreeError(ValueError):
    """A user-facing error: bad input or an impossible request.

    The message is one line that names the bad value and says what would be accepted.
    The command line prints it after ``ringtree: error:`` and exits with status 2.
    """


class RingtreeTypeError(RingtreeError, TypeError):
    """A bad argument that torch.distributed refuses with a TypeError (a list where a tensor
    goes, an op that is not one): raised as torch raises it, and still a RingtreeError."""


class RingtreeRuntimeError(RingtreeError, RuntimeError):
    """A bad argument that torch's backends refuse with a RuntimeError (a buffer of the wrong
    size or dtype, a root outside the group, a dtype the op cannot reduce): raised as torch
    raises it, and still a RingtreeError."""
