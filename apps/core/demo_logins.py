"""The demo's logins: the users ``python manage.py demo`` prints, with their published passwords.

Core's demo command builds the demo and says how to log in to it; the app that creates the users
(accounts) says who they are, from its ``AppConfig.ready()``::

    register_demo_logins("apps.accounts.demo.DEMO_LOGINS")

The registration is the dotted path of a sequence of logins (objects with ``role``, ``username`` and
``password``), imported only when the command prints them: the demo's modules stay unloaded in a
production process.

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_sources: dict[str, None] = {}  # dotted paths, in registration order


def register_demo_logins(path: str) -> None:
    """Add the logins at ``path`` ("package.module.NAME"); the same path again adds nothing."""
    _sources.setdefault(path, None)


def demo_logins() -> list[Any]:
    """Every registered login, in registration order."""
    logins = []
    for path in _sources:
        module, _, name = path.rpartition(".")
        logins.extend(getattr(import_module(module), name))
    return logins
