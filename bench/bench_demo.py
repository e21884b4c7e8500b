"""Demo build: `manage.py demo --reset` against bare inserts of the same rows."""
import io
import sqlite3
from pathlib import Path

from bench.common import Figure, median_seconds


def run(workdir: Path) -> list[Figure]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command

    from apps.accounts.demo import DEMO_LOGINS
    from apps.accounts.models import Membership, Project

    def build():
        call_command("demo", "--reset", stdout=io.StringIO())

    build()  # warm-up: imports, first migration-time caches
    seconds = median_seconds(build, repeats=3)
    users = list(get_user_model().objects.values_list("username", "first_name", "last_name", "email", "is_staff"))
    projects = list(Project.objects.values_list("slurm_account", "title", "description"))
    memberships = list(Membership.objects.values_list("user_id", "project_id", "role"))

    floor_db = workdir / "floor.sqlite3"

    def floor():
        floor_db.unlink(missing_ok=True)
        connection = sqlite3.connect(floor_db)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.executescript(
            "CREATE TABLE u (id INTEGER PRIMARY KEY, username TEXT UNIQUE, first TEXT, last TEXT, email TEXT, staff INT, password TEXT);"
            "CREATE TABLE p (id INTEGER PRIMARY KEY, account TEXT UNIQUE, title TEXT, description TEXT);"
            "CREATE TABLE m (id INTEGER PRIMARY KEY, user_id INT, project_id INT, role TEXT, UNIQUE(user_id, project_id));"
        )
        hashes = [make_password(login.password) for login in DEMO_LOGINS]
        with connection:
            connection.executemany("INSERT INTO p (account, title, description) VALUES (?, ?, ?)", projects)
            connection.executemany(
                "INSERT INTO u (username, first, last, email, staff, password) VALUES (?, ?, ?, ?, ?, ?)",
                [(*user, "!") for user in users],
            )
            connection.executemany("INSERT INTO m (user_id, project_id, role) VALUES (?, ?, ?)", memberships)
            connection.executemany(
                "UPDATE u SET password = ? WHERE username = ?",
                [(password, login.username) for password, login in zip(hashes, DEMO_LOGINS)],
            )
        connection.close()

    floor_seconds = median_seconds(floor, repeats=3)
    rows = len(users) + len(projects) + len(memberships)
    return [
        Figure(
            name="demo build (manage.py demo --reset)",
            seconds=seconds,
            floor_seconds=floor_seconds,
            floor_name=f"bare sqlite3 insert of the same {rows} rows + {len(DEMO_LOGINS)} password hashes",
            note=f"{len(users)} users, {len(projects)} projects, {len(memberships)} memberships",
        )
    ]
