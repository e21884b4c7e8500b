"""Inserting many rows at once with one prepared statement.

``bulk_create`` prepares every value through its model field (about 10 µs a value): tens of
thousands of Slurm jobs after an outage, or the hundred thousand results of a large vetting run,
spend seconds there. Here only the values that need it (datetimes, JSON) are adapted and the rest
go to the driver as they are, in one transaction (in autocommit mode SQLite would commit every row
of an ``executemany`` on its own: four times slower). Primary keys are not returned;
``auto_now``/``auto_now_add`` fields get the current time.

:func:`sync_rows` makes the rows of a queryset match wanted values (the diff is
:func:`apps.core.diff.diff_rows`): bulk create, bulk update of the changed fields, delete.
"""
from collections.abc import Callable, Hashable, Mapping, Sequence

from django.db import connection, transaction
from django.utils import timezone

from .diff import RowDiff, diff_rows

BATCH = 2000


def insert_rows(model, objects) -> int:
    objects = list(objects)
    if not objects:
        return 0
    now = timezone.now()
    fields = [field for field in model._meta.concrete_fields if not field.primary_key]
    adapt_datetime = connection.ops.adapt_datetimefield_value
    converters, stamped = [], []
    for field in fields:
        kind = field.get_internal_type()
        if kind == "DateTimeField":
            converters.append(adapt_datetime)
        elif kind == "JSONField":
            converters.append(lambda value, field=field: connection.ops.adapt_json_value(value, field.encoder))
        else:
            converters.append(None)
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            stamped.append(field.attname)
    attnames = [field.attname for field in fields]
    rows = []
    for instance in objects:
        for attname in stamped:
            setattr(instance, attname, now)
        rows.append([convert(value) if convert is not None and value is not None else value
                     for convert, value in zip(converters, (getattr(instance, attname) for attname in attnames))])
    quote = connection.ops.quote_name
    sql = (f"INSERT INTO {quote(model._meta.db_table)} ({', '.join(quote(field.column) for field in fields)}) "
           f"VALUES ({', '.join(['%s'] * len(fields))})")
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            cursor.executemany(sql, rows[start:start + BATCH])
    return len(rows)


def stored_rows(queryset, key: Sequence[str], fields: Sequence[str]) -> dict[Hashable, dict]:
    """``{key: {"pk": ..., field: value, ...}}`` for the rows of ``queryset``; the key is the value of
    the one ``key`` field, or the tuple of several. Read with ``values_list``: no model instances."""
    width = len(key)
    rows = {}
    for pk, *values in queryset.values_list("pk", *key, *fields):
        row_key = values[0] if width == 1 else tuple(values[:width])
        rows[row_key] = {"pk": pk, **dict(zip(fields, values[width:]))}
    return rows


def sync_rows(queryset, wanted: Mapping[Hashable, Mapping], *, key: Sequence[str], fields: Sequence[str],
              build: Callable[[Hashable, Mapping], object], keep_when_empty: bool = False, remove: bool = True,
              batch_size: int = 2000) -> RowDiff:
    """Make the rows of ``queryset`` match ``wanted`` (natural key -> values of ``fields``).

    New rows are made by ``build(key, values)`` and bulk created; changed rows get the changed
    fields (and the current time in ``auto_now`` fields) in one bulk update; with ``remove`` rows
    not wanted are deleted. ``keep_when_empty``: see :func:`apps.core.diff.diff_rows`. Returns the
    diff that was written."""
    model = queryset.model
    diff = diff_rows(stored_rows(queryset, key, fields), wanted, keep_when_empty=keep_when_empty, remove=remove)
    model.objects.bulk_create([build(row_key, values) for row_key, values in diff.added], batch_size=batch_size)
    if diff.changed:
        stamped = {field.attname: timezone.now() for field in model._meta.concrete_fields if getattr(field, "auto_now", False)}
        model.objects.bulk_update([model(pk=change.pk, **change.merged(), **stamped) for change in diff.changed],
                                  [*fields, *stamped], batch_size=batch_size)
    if diff.removed:
        model.objects.filter(pk__in=[pk for _, pk in diff.removed]).delete()
    return diff
