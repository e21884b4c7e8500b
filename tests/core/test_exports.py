"""Tables as CSV and Parquet downloads (apps.core.exports)."""
import io

import duckdb
import pandas as pd
import pytest

from apps.core.exports import table_bytes


def frame():
    return pd.DataFrame({
        "time_utc": pd.to_datetime(["2026-11-21T10:00:00Z", "2026-11-21T10:00:36Z"], utc=True),
        "host": ["nid000001", "nid,\"odd\""],
        "rank": pd.array([3, None], dtype="Int64"),
        "score": [61.25, float("nan")],
    })


def test_csv_keeps_values_quotes_and_empty_cells():
    text = table_bytes(frame(), "csv").decode()
    assert text.splitlines()[0] == "time_utc,host,rank,score"
    back = pd.read_csv(io.StringIO(text))
    assert back["host"].tolist() == ["nid000001", 'nid,"odd"'] and back["time_utc"].tolist() == ["2026-11-21T10:00:00",
                                                                                                    "2026-11-21T10:00:36"]
    assert back["rank"].isna().tolist() == [False, True] and back["score"].iloc[0] == 61.25


def test_parquet_keeps_types_and_writes_utc_as_naive(tmp_path):
    path = tmp_path / "t.parquet"
    path.write_bytes(table_bytes(frame(), "parquet"))
    assert path.read_bytes()[:4] == b"PAR1"
    types = dict(duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM '{path}')").fetchall())
    assert types == {"time_utc": "TIMESTAMP", "host": "VARCHAR", "rank": "BIGINT", "score": "DOUBLE"}
    rows = duckdb.sql(f"SELECT strftime(time_utc, '%H:%M:%S'), rank, score FROM '{path}' ORDER BY time_utc").fetchall()
    assert rows[0] == ("10:00:00", 3, 61.25) and rows[1][1] is None


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="choose csv or parquet"):
        table_bytes(frame(), "xlsx")
