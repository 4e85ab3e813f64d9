"""One module per ``ringtree`` command; shared argument types live in ``args``."""
