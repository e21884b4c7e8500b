#!/usr/bin/env python
"""Django's command-line utility for Belvedere."""
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.embedded")
    from portal.startup import load_settings_or_exit

    load_settings_or_exit()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
