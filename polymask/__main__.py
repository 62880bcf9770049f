"""``python -m polymask`` (and ``torchrun -m polymask``) runs the CLI."""
import sys

from polymask.cli import main

sys.exit(main())
