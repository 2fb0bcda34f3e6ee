"""``python -m graphviz_autograd``: the same as the ``graphviz-autograd`` command."""

from .cli.commands import PROG_NAME, main

if __name__ == "__main__":
    main(prog_name=PROG_NAME)
