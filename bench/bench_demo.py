"""Demo build: `manage.py demo --reset` against bare inserts of the same rows."""
import io
import sqlite3
from pathlib import Path

from bench.common import Figure, median_seconds


def run(workdir: Path) -> list[Figure]:
    from django.apps import apps
    from django.conf import settings
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command

    from apps.accounts.demo import DEMO_LOGINS

    def build():
        call_command("demo", "--reset", stdout=io.StringIO())

    build()  # warm-up: imports and first-use caches
    seconds = median_seconds(build, repeats=3)

    # Every row the demo wrote, table by table, read back from the database it wrote to.
    source = sqlite3.connect(settings.DATABASES["default"]["NAME"])
    tables = {}
    for model in apps.get_models():
        table = model._meta.db_table
        rows = source.execute(f'SELECT * FROM "{table}"').fetchall()
        if rows and model._meta.app_label in {"auth", "accounts", "topology", "jobs", "core"}:
            columns = [description[0] for description in source.execute(f'SELECT * FROM "{table}" LIMIT 1').description]
            tables[table] = (columns, rows)
    source.close()
    floor_db = workdir / "floor.sqlite3"

    def floor():
        floor_db.unlink(missing_ok=True)
        connection = sqlite3.connect(floor_db)
        connection.execute("PRAGMA journal_mode=WAL")
        for login in DEMO_LOGINS:
            make_password(login.password)
        with connection:
            for table, (columns, rows) in tables.items():
                quoted = ", ".join(f'"{column}"' for column in columns)
                connection.execute(f'CREATE TABLE "{table}" ({quoted})')
                connection.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(columns))})', rows)
        connection.close()

    floor_seconds = median_seconds(floor, repeats=3)
    total = sum(len(rows) for _, rows in tables.values())
    return [
        Figure(
            name="demo build (manage.py demo --reset)",
            seconds=seconds,
            floor_seconds=floor_seconds,
            floor_name=f"bare sqlite3 insert of the same {total} rows + {len(DEMO_LOGINS)} password hashes",
            note=", ".join(f"{len(rows)} {table}" for table, (_, rows) in sorted(tables.items(), key=lambda item: -len(item[1][1]))[:4]),
        )
    ]
