"""`python -m cputrace` runs the command line."""

from .cli import main

main()
