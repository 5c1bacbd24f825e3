"""``python -m tokenlens`` runs the CLI."""

import sys

from tokenlens.cli import main

sys.exit(main())
