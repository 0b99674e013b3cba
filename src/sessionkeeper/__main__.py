"""``python -m sessionkeeper``: the command line."""

from sessionkeeper.cli import main


main()
