"""``python -m vsh_ai``: the same command line as the ``vsh-ai`` script."""

from ._cli import script

if __name__ == "__main__":
    script()
