"""Vetting history: the filtered history page over 10 million results in PostgreSQL.

A throw-away database on the PostgreSQL server at BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/postgres; the benchmark creates and drops its own database
``belvedere_bench_vetting``) gets the portal's schema by migrating, 50,000 runs and 10 million
results of 90 days on the reference system (2,688 nodes, 1 % failures) filled in by PostgreSQL
itself, the result indexes rebuilt after the load, and ANALYZE.

Timed: the history page's query — the page's filter set on the results, then its keyset page of
100 rows newest first (``selectors.history_page``) — for the filters people use, each with the
index PostgreSQL chose (from EXPLAIN). The floor is reading 101 rows by primary key.
Without a reachable PostgreSQL the benchmark says so and measures nothing.
"""
import os
import re
import statistics
import time
from datetime import timedelta
from pathlib import Path

from bench.common import Figure

RESULTS = int(os.environ.get("BENCH_VETTING_RESULTS", 10_000_000))
RUNS = RESULTS // 200
DATABASE = "belvedere_bench_vetting"


def _url():
    return os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def run(workdir: Path) -> list[Figure]:
    import environ
    import psycopg
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections
    from django.utils import timezone

    url = _url()
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        print(f"  bench_vetting: PostgreSQL not reachable at {url} ({exc}); set BENCH_DATABASE_URL", flush=True)
        return []
    admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    admin.execute(f"CREATE DATABASE {DATABASE}")
    config = environ.Env.db_url_config(url)
    config.update(NAME=DATABASE, ATOMIC_REQUESTS=False, AUTOCOMMIT=True, CONN_MAX_AGE=0, CONN_HEALTH_CHECKS=False, OPTIONS={},
                  TIME_ZONE=None, TEST={})
    settings.DATABASES["bench"] = config
    connections.settings = connections.configure_settings(settings.DATABASES)
    try:
        return _measure(workdir, timezone, call_command, connections)
    finally:
        connections["bench"].close()
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        admin.close()


def _measure(workdir, timezone, call_command, connections):
    from apps.vetting.filtersets import VettingResultFilterSet
    from apps.vetting.models import VettingResult
    from apps.vetting.selectors import history_page

    call_command("migrate", database="bench", verbosity=0)
    connection = connections["bench"]
    now = timezone.now().replace(microsecond=0)
    started = time.perf_counter()
    from apps.jobs.models import Cluster

    cluster = Cluster.objects.using("bench").create(name="alps").pk
    with connection.cursor() as cursor:
        cursor.execute(f"""
            INSERT INTO vetting_vettingrun (cluster_id, source, protocol_name, protocol_hash, started, submitter, user_name, account,
                                            hosts, failed_hosts, results_total, results_failed, warnings, created)
            SELECT {cluster}, 'vetnode', CASE WHEN g %% 5 = 0 THEN 'nccl-burn-in' ELSE 'alps-ml-vetting' END, '',
                   %s::timestamptz - make_interval(secs => (g::bigint * 7776000 / {RUNS})), 'bench', 'user' || (g %% 40),
                   'acct' || (g %% 12), 50, '[]', 200, 2, '[]', now()
            FROM generate_series(1, {RUNS}) AS g""", [now])
        model = VettingResult
        with connection.schema_editor() as editor:
            for index in model._meta.indexes:
                editor.remove_index(model, index)
        cursor.execute(f"""
            INSERT INTO vetting_vettingresult (run_id, time, host, "group", switch, job_id_number, user_name, account, kind,
                                               eval_name, eval_type, status, outcome, rank, local_rank, gpu, elapsed_s,
                                               bandwidth_gbs, metrics, thresholds, message)
            SELECT r.id, r.started, 'nid' || lpad((n + 1)::text, 6, '0'), n / 112, (n / 112) || '.' || ((n % 112) / 4),
                   1000000 + r.id, r.user_name, r.account, 'vetnode',
                   (ARRAY['gpu idle', 'cuda saxpy', 'nccl internode'])[g % 3 + 1], '',
                   CASE WHEN (g * 7) % 97 = 0 THEN 'FAILED' ELSE 'SUCCESS' END,
                   CASE WHEN (g * 7) % 97 = 0 THEN 'fail' ELSE 'pass' END,
                   g % 200, g % 4, g % 4, 0.5, CASE WHEN g % 3 = 2 THEN 22.0 END, '{{}}', '{{}}', ''
            FROM generate_series(0, {RESULTS - 1}) AS g
            CROSS JOIN LATERAL (SELECT ((g / 200) * 53 + (g % 200) / 4) % 2688 AS n) AS node
            JOIN vetting_vettingrun r ON r.id = g / 200 + 1""")
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        with connection.schema_editor() as editor:
            for index in model._meta.indexes:
                editor.add_index(model, index)
        cursor.execute("ANALYZE")
        indexed = time.perf_counter() - started
    print(f"  bench_vetting: {RESULTS:,} results loaded in {loaded:.0f} s, indexed and analysed in {indexed:.0f} s", flush=True)
    base = VettingResult.objects.using("bench")
    day = timezone.now() - timedelta(days=14)
    cases = [
        ("last 14 days, no filter", {"since": day.isoformat()}),
        ("one node", {"node": "nid001234"}),
        ("failed, last 14 days", {"outcome": "bad", "since": day.isoformat()}),
        ("one group, failed", {"group": "5", "outcome": "bad"}),
        ("one evaluation on one switch", {"eval": "nccl internode", "switch": "5.12"}),
        ("one user, last 14 days", {"user": "user7", "since": day.isoformat()}),
        ("one protocol", {"protocol": "nccl-burn-in"}),
    ]

    def page(params):
        return history_page(VettingResultFilterSet(params, queryset=base).qs, size=100)

    figures = []
    with connection.cursor() as cursor:
        first = base.order_by("id").values_list("id", flat=True).first()

        def by_key():
            cursor.execute("SELECT * FROM vetting_vettingresult WHERE id >= %s ORDER BY id LIMIT 101", [first + 5_000_000 % RESULTS])
            cursor.fetchall()

        floor = _median(by_key)
        for name, params in cases:
            rows, _ = page(params)
            seconds = _median(lambda params=params: page(params))
            sql, values = VettingResultFilterSet(params, queryset=base).qs.order_by("-time", "-id")[:101].query.sql_with_params()
            cursor.execute("EXPLAIN " + sql, values)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            indexes = sorted(set(re.findall(r"(?:Index Scan(?: Backward)? using|Bitmap Index Scan on|Index Only Scan(?: Backward)? using) (\w+)", plan)))
            figures.append(Figure(f"vetting history: {name}", seconds, floor, "101 rows by primary key",
                                  f"{len(rows)} rows of {RESULTS:,}; index {', '.join(indexes) or 'none (sequential scan)'}; target <= 100 ms"))
    return figures


def _median(action, repeats=7):
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)
