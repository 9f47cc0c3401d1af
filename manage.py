#!/usr/bin/env python
"""Django's command-line utility, through agentsite.cli (start-up trouble
is told in one line instead of a traceback)."""

import sys


def main():
    try:
        import django  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "Couldn't import Django. Are you sure it's installed and "
            "available on your PYTHONPATH environment variable? Did you "
            "forget to activate a virtual environment?"
        ) from exc
    from agentsite.cli import main as agentsite_main

    agentsite_main(sys.argv)


if __name__ == "__main__":
    main()
