"""`python -m orchestrator.rigs.twin CONFIG_JSON`: the twin process (see `server.py`)."""

import sys

from orchestrator.rigs.twin.server import main

sys.exit(main(sys.argv[1:]))
