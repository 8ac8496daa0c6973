"""`python -m pgtimers` runs the command line."""

from __future__ import annotations

import sys

from pgtimers.cli.entry import main

sys.exit(main())
