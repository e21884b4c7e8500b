"""Tables as downloads: CSV, and Parquet written by DuckDB (which the embedded telemetry store already
needs), so no extra dependency. Plain Python: no Django."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

FORMATS = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}


def table_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """``frame`` as a CSV or Parquet file. Timezone-aware columns are written as naive UTC (name them
    ``..._utc``); nullable integers stay integers in Parquet and empty cells in CSV."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown table format {fmt!r}; choose {' or '.join(FORMATS)}")
    frame = frame.copy()
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.DatetimeTZDtype):
            frame[column] = frame[column].dt.tz_convert("UTC").dt.tz_localize(None)
    if fmt == "csv":
        return frame.to_csv(index=False, date_format="%Y-%m-%dT%H:%M:%S").encode()
    import duckdb

    with tempfile.TemporaryDirectory(prefix="belvedere-export-") as folder:
        path = Path(folder) / "table.parquet"
        connection = duckdb.connect()
        try:
            connection.register("frame", frame)
            connection.execute(f"COPY frame TO '{path}' (FORMAT parquet, COMPRESSION zstd)")
        finally:
            connection.close()
        return path.read_bytes()
