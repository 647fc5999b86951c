"""``python -m permits``: the ``permits`` command."""

import sys

from permits.cli import main

sys.exit(main())
