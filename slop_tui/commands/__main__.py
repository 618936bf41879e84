"""`python -m slop_tui.commands --markdown` prints docs/commands.md."""

import sys

from slop_tui.commands import commands_doc

if __name__ == "__main__":
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m slop_tui.commands --markdown")
    sys.stdout.write(commands_doc())
