"""The one exception type meant for users: caught once in the CLI, printed as one line."""


class RigError(Exception):
    """A problem the user can fix; its message says what to do."""
