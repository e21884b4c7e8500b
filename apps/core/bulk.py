"""Inserting many rows at once with one prepared statement.

``bulk_create`` prepares every value through its model field (about 10 µs a value): tens of
thousands of Slurm jobs after an outage, or the hundred thousand results of a large vetting run,
spend seconds there. Here only the values that need it (datetimes, JSON) are adapted and the rest
go to the driver as they are, in one transaction (in autocommit mode SQLite would commit every row
of an ``executemany`` on its own: four times slower). Primary keys are not returned;
``auto_now``/``auto_now_add`` fields get the current time.
"""
from django.db import connection, transaction
from django.utils import timezone

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
