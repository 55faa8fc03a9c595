"""`python -m orchestrator.sim.twin CONFIG_JSON`: the twin process (see `server.py`)."""

import sys

from .server import main

sys.exit(main(sys.argv[1:]))
