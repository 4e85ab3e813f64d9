"""``python -m ringtree``: the ``ringtree`` command."""

import sys

from ringtree.cli import main

if __name__ == "__main__":
    sys.exit(main())
