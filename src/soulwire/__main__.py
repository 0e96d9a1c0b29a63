"""`python -m soulwire` runs the command line."""

import sys

from soulwire.cli import main

if __name__ == "__main__":
    sys.exit(main())
