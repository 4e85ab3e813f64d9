"""The one exception users see: a bad value, said in one line."""


class RingtreeError(ValueError):
    """A user-facing error: bad input or an impossible request.

    The message is one line that names the bad value and says what would be accepted.
    The command line prints it after ``ringtree: error:`` and exits with status 2.
    """
