"""`python -m congestlab.cli`: the command line."""

from congestlab.cli import main

main()
