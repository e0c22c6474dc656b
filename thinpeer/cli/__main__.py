"""``python -m thinpeer.cli``: how local networks start their daemons and tests run the CLI."""

import sys

from thinpeer.cli.app import main

sys.exit(main())
