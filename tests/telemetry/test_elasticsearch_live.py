"""The shared telemetry contract against a real Elasticsearch (8.x or 9.x).

Runs only where ``ELASTICSEARCH_URL`` is set, e.g.::

    ELASTICSEARCH_URL=http://localhost:9200 .venv/bin/python -m pytest -q tests/telemetry/test_elasticsearch_live.py

Optional: ``ELASTICSEARCH_API_KEY``, ``ELASTICSEARCH_BASIC_AUTH`` ("user:password"),
``ELASTICSEARCH_CA_CERTS``, ``ELASTICSEARCH_VERIFY_CERTS``. Every test uses its own index prefix
``belvedere-contract-<random>`` (which overlaps no production pattern) and deletes its indices and
template afterwards. Without ``ELASTICSEARCH_URL`` this module defines no tests at all rather than
skipped ones, because CI (BELVEDERE_NO_SKIP=1) fails on skips; the wire-format tests in
``test_elasticsearch_wire.py`` always run.
"""
import os
import uuid

if os.environ.get("ELASTICSEARCH_URL"):
    from datetime import timedelta

    import pandas as pd
    import pytest

    from apps.telemetry.backends.base import Query
    from apps.telemetry.backends.elasticsearch import ElasticsearchBackend
    from tests.telemetry.contract import T0, BackendContract, synthetic

    def _options(**extra) -> dict:
        options = {"url": os.environ["ELASTICSEARCH_URL"], "refresh": True, "number_of_replicas": 0}
        for variable, option in (("ELASTICSEARCH_API_KEY", "api_key"), ("ELASTICSEARCH_BASIC_AUTH", "basic_auth"),
                                 ("ELASTICSEARCH_CA_CERTS", "ca_certs"),
                                 ("ELASTICSEARCH_VERIFY_CERTS", "verify_certs")):
            if os.environ.get(variable):
                options[option] = os.environ[variable]
        return {**options, **extra}

    def _prefix() -> str:
        return f"belvedere-contract-{uuid.uuid4().hex[:12]}"

    @pytest.fixture
    def backend():
        store = ElasticsearchBackend(index_prefix=_prefix(), **_options())
        try:
            yield store
        finally:
            store.clear(drop_template=True)
            store.close()

    class TestElasticsearchContract(BackendContract):
        pass

    def test_the_template_gives_daily_indices_strict_nanosecond_mappings(backend):
        backend.write(synthetic(minutes=1))
        mapping = backend.client.indices.get_mapping(index=f"{backend.index_prefix}-2026.11.21").body
        (index,) = mapping.values()
        assert index["mappings"]["dynamic"] == "strict"
        assert index["mappings"]["properties"]["ts"]["type"] == "date_nanos"
        assert index["mappings"]["properties"]["field"]["type"] == "integer"

    def test_the_job_series_index_has_its_own_strict_mapping_and_no_sample_read_sees_it(backend):
        from tests.telemetry.contract import app_synthetic

        backend.write(synthetic(minutes=1))
        backend.write_job_series(app_synthetic())
        mapping = backend.client.indices.get_mapping(index=backend.app_index).body
        (index,) = mapping.values()
        assert index["mappings"]["dynamic"] == "strict"
        assert {name: spec["type"] for name, spec in index["mappings"]["properties"].items()} == {
            "ts": "date_nanos", "cluster": "keyword", "job_id": "long", "name": "keyword", "step": "long",
            "value": "double"}
        resolved = backend.client.indices.resolve_index(name=backend.write_pattern).body
        assert backend.app_index not in {entry["name"] for entry in resolved["indices"]}

    def test_a_sites_own_indices_with_a_field_map_and_field_names():
        """Documents as an exporter pipeline writes them: ``@timestamp`` a millisecond ``date``, the
        host in an object, the DCGM field by name (legacy and 4.6), no cluster field."""
        probe = ElasticsearchBackend(**_options())
        index = f"{_prefix()}-site"
        try:
            probe.client.indices.create(index=index, settings={"number_of_replicas": 0}, mappings={"properties": {
                "@timestamp": {"type": "date"}, "host": {"properties": {"name": {"type": "keyword"}}},
                "gpu": {"type": "short"}, "metric": {"type": "keyword"}, "value": {"type": "double"}}})
            base_ms = int(pd.Timestamp(T0).value // 1_000_000)
            operations = []
            for n, (metric, offset_ms, value) in enumerate([("DCGM_FI_PROF_SM_ACTIVE", 0, 0.5),
                                                            ("DCGM_FI_PROF_SM_UTIL_RATIO", 10_000, 0.7),
                                                            ("DCGM_FI_DEV_POWER_USAGE", 0, 300.0)]):
                operations += [{"index": {"_index": index, "_id": str(n)}},
                               {"@timestamp": base_ms + offset_ms, "host": {"name": "nid000007"}, "gpu": 2,
                                "metric": metric, "value": value}]
            probe.client.bulk(operations=operations, refresh=True)
            site_layout = {"ts": "@timestamp", "host": "host.name", "field": "metric", "cluster": None, "uuid": None}
            site = ElasticsearchBackend(**_options(read_index_pattern=index, field_by_name=True, cluster_name="alps",
                                                   field_map=site_layout))
            window = Query(start=T0, end=T0 + timedelta(minutes=1), cluster="alps", fields=(1002, 155))
            out = site.read(window)
            assert out[["host", "gpu", "field", "value"]].values.tolist() == [
                ["nid000007", 2, 155, 300.0], ["nid000007", 2, 1002, 0.5], ["nid000007", 2, 1002, 0.7]]
            agg = site.aggregate(window, 60)
            assert agg[["field", "count", "mean"]].values.tolist() == [[155, 1, 300.0], [1002, 2, 0.6]]
            assert site.latest(window)["value"].tolist() == [300.0, 0.7]
            site.close()
        finally:
            probe.client.options(ignore_status=404).indices.delete(index=index)
            probe.close()
