"""The explorer: a Dash app for quick plots of a telemetry product, opened pre-filled with the product's query.

``/catalog/explorer/?product=dcgm-device`` shows the portal page around it; the Dash app itself lives
under ``/catalog/explorer/app/`` and is served through a Django view (``views.explorer_app``), so it
runs in the portal's process with its sign-in, and its callbacks know who asks (``CURRENT_USER``).
Staff plot any nodes; everyone else plots the nodes of one of their jobs, within its run time —
the same rule as the telemetry API.
"""
from __future__ import annotations

import contextvars
from datetime import timedelta
from functools import lru_cache

import dash
import flask
import hostlist
from dash import Input, Output, State, dcc, html

PREFIX = "/catalog/explorer/app/"
CURRENT_USER: contextvars.ContextVar = contextvars.ContextVar("catalog_explorer_user", default=None)
WINDOWS = [("15 min", 900), ("1 h", 3600), ("2 h", 7200), ("6 h", 21600), ("1 day", 86400), ("3 days", 259200), ("7 days", 604800)]
MAX_BUCKETS = 300
MAX_HOSTS = 512


def _telemetry_products():
    from .models import DataProduct

    return [p for p in DataProduct.objects.exclude(status="retired").order_by("name") if p.definition["source"]["kind"] == "telemetry"]


def defaults(product, query: dict) -> dict:
    """The controls' starting values: the product's explorer block, then what the address asks for."""
    definition = product.definition
    explorer = definition.get("explorer") or {}
    schema_fields = [column["field"] for column in definition["schema"] if column.get("field") is not None]
    fields = explorer.get("fields") or schema_fields[:2]
    if query.get("fields"):
        asked = [int(f) for f in query["fields"].split(",") if f.strip().isdigit()]
        fields = [f for f in asked if f in schema_fields] or fields
    window = explorer.get("window", 7200)
    if query.get("window", "").isdigit():
        window = int(query["window"])
    return {"product": product.name, "fields": fields, "window": window, "group_by": query.get("group_by") or explorer.get("group_by", "host"),
            "stat": query.get("stat") or explorer.get("stat", "mean"), "hosts": query.get("hosts", ""), "job": query.get("job", ""),
            "step": explorer.get("step", 60)}


def field_options(product) -> list[dict]:
    return [{"label": f"{column['name']} ({column.get('unit', '')})", "value": column["field"]}
            for column in product.definition["schema"] if column.get("field") is not None]


def job_options(user) -> list[dict]:
    from apps.jobs.selectors import job_list_for_user

    jobs = job_list_for_user(user).exclude(start_time__isnull=True).order_by("-start_time")[:50]
    return [{"label": f"{job.cluster.name}/{job.job_id} {job.name[:40]} ({job.state})", "value": f"{job.cluster.name}/{job.job_id}"}
            for job in jobs]


def plot(user, *, product_name: str, fields: list[int], window: int, group_by: str, stat: str, hosts_text: str, job_key: str):
    """The figure and a sentence for the controls' values, as ``user`` may see them."""
    from django.utils import timezone

    from apps.telemetry.backends.base import Query, TelemetryUnavailable
    from apps.telemetry.products import choose_step
    from apps.telemetry.store import telemetry_store

    from .figures import series_figure
    from .models import DataProduct

    product = DataProduct.objects.filter(name=product_name).first()
    if product is None or product.definition["source"]["kind"] != "telemetry":
        return series_figure(None, group_by=group_by, stat=stat, labels={})[0], "Choose a telemetry product."
    labels = {column["field"]: f"{column['name']} ({column.get('unit', '')})" for column in product.definition["schema"]
              if column.get("field") is not None}
    fields = [int(f) for f in fields or [] if int(f) in labels]
    if not fields:
        return series_figure(None, group_by=group_by, stat=stat, labels=labels)[0], "Choose at least one field."
    end = timezone.now()
    start = end - timedelta(seconds=int(window))
    hosts = None
    if user is None or not user.is_authenticated:
        return series_figure(None, group_by=group_by, stat=stat, labels=labels)[0], "Sign in to plot."
    if user.is_staff and not job_key:
        if hosts_text.strip():
            try:
                hosts = tuple(hostlist.expand_hostlist(hosts_text.replace(" ", "")))
            except hostlist.BadHostlist as exc:
                return series_figure(None, group_by=group_by, stat=stat, labels=labels)[0], f"Nodes: {exc} (e.g. nid[000001-000004])"
            if len(hosts) > MAX_HOSTS:
                return series_figure(None, group_by=group_by, stat=stat, labels=labels)[0], f"At most {MAX_HOSTS} nodes at a time."
    else:
        from apps.jobs.selectors import job_get_for_user

        cluster, _, job_id = (job_key or "").partition("/")
        job = job_get_for_user(user, cluster, int(job_id)) if job_id.isdigit() else None
        if job is None:
            return (series_figure(None, group_by=group_by, stat=stat, labels=labels)[0],
                    "Choose one of your jobs: you may plot the nodes of your own and your projects' jobs (staff: any nodes).")
        hosts = tuple(job.node_list or ())
        start = max(start, job.start_time) if job.start_time else start
        end = min(end, job.end_time) if job.end_time else end
        if end <= start:
            return series_figure(None, group_by=group_by, stat=stat, labels=labels)[0], "The job did not run in this window."
    step = max(int(product.definition.get("explorer", {}) and product.definition["explorer"].get("step", 60) or 60),
               choose_step((end - start).total_seconds(), MAX_BUCKETS))  # a step the store's rollups serve
    try:
        frame = telemetry_store(product.definition["source"].get("store", "default")).aggregate(
            Query(start=start, end=end, fields=tuple(fields), hosts=hosts), step, ("mean", "min", "max"))
    except TelemetryUnavailable as exc:
        return series_figure(None, group_by=group_by, stat=stat, labels=labels)[0], f"The telemetry store cannot be read: {exc}"
    figure, sentence = series_figure(frame, group_by=group_by, stat=stat, labels=labels, title=product.title, window=(start, end))
    return figure, f"{sentence} {len(frame):,} buckets of {step} s from {start:%Y-%m-%d %H:%M} to {end:%H:%M} UTC."


def _query(search: str | None) -> dict:
    from urllib.parse import parse_qs

    return {key: values[-1] for key, values in parse_qs((search or "").lstrip("?")).items()}


@lru_cache(maxsize=1)
def dash_app() -> dash.Dash:
    server = flask.Flask("belvedere-explorer")
    server.config["PROPAGATE_EXCEPTIONS"] = True  # an error in a callback is Django's to log and answer, like any view's
    # use_async=False: Dash turns async dispatch on when asgiref is installed (Django brings it); the ORM needs sync callbacks.
    app = dash.Dash("belvedere-explorer", server=server, requests_pathname_prefix=PREFIX, routes_pathname_prefix=PREFIX,
                    serve_locally=True, title="Belvedere explorer", update_title=None, use_async=False,
                    external_stylesheets=["/static/css/belvedere.css"], suppress_callback_exceptions=True)
    control = {"minWidth": "12rem", "flex": "1"}
    app.layout = html.Div(className="explorer", children=[
        dcc.Location(id="url"),
        html.Div(style={"display": "flex", "gap": "1rem", "flexWrap": "wrap", "alignItems": "flex-end"}, children=[
            html.Label(["Product", dcc.Dropdown(id="product", clearable=False)], style=control),
            html.Label(["Fields", dcc.Dropdown(id="fields", multi=True)], style={**control, "flex": "2"}),
            html.Label(["Window", dcc.Dropdown(id="window", clearable=False,
                                               options=[{"label": label, "value": value} for label, value in WINDOWS])], style=control),
            html.Label(["Lines per", dcc.Dropdown(id="group_by", clearable=False, options=[
                {"label": "node", "value": "host"}, {"label": "GPU", "value": "gpu"}, {"label": "field (all nodes)", "value": "field"}])],
                style=control),
            html.Label(["Statistic", dcc.Dropdown(id="stat", clearable=False, options=["mean", "min", "max"])], style=control),
        ]),
        html.Div(style={"display": "flex", "gap": "1rem", "flexWrap": "wrap", "marginTop": ".5rem"}, children=[
            html.Label(["Nodes (staff; a Slurm hostlist, empty for all)", dcc.Input(id="hosts", type="text", debounce=True,
                                                                                     placeholder="nid[001905-001912]")],
                       style={**control, "flex": "2"}),
            html.Label(["Or one of your jobs", dcc.Dropdown(id="job")], style={**control, "flex": "2"}),
        ]),
        dcc.Loading(dcc.Graph(id="plot", config={"displaylogo": False, "toImageButtonOptions": {"filename": "belvedere-explorer"}})),
        html.P(id="note", className="small muted"),
    ])

    @app.callback(Output("product", "options"), Output("product", "value"), Output("window", "value"), Output("group_by", "value"),
                  Output("stat", "value"), Output("hosts", "value"), Output("job", "options"), Output("job", "value"),
                  Input("url", "search"))
    def prefill(search):
        query = _query(search)
        products = _telemetry_products()
        options = [{"label": p.title, "value": p.name} for p in products]
        chosen = next((p for p in products if p.name == query.get("product")), products[0] if products else None)
        user = CURRENT_USER.get()
        jobs = job_options(user) if user is not None and user.is_authenticated else []
        if chosen is None:
            return options, None, 7200, "host", "mean", "", jobs, None
        values = defaults(chosen, query)
        return options, chosen.name, values["window"], values["group_by"], values["stat"], values["hosts"], jobs, values["job"] or None

    @app.callback(Output("fields", "options"), Output("fields", "value"), Input("product", "value"), State("url", "search"))
    def fields_of(product_name, search):
        """The product's fields; the address's (or the product's explorer) choice of them."""
        from .models import DataProduct

        product = DataProduct.objects.filter(name=product_name).first()
        if product is None:
            return [], []
        query = _query(search)
        return field_options(product), defaults(product, query if query.get("product") == product.name else {})["fields"]

    @app.callback(Output("plot", "figure"), Output("note", "children"), Input("product", "value"), Input("fields", "value"),
                  Input("window", "value"), Input("group_by", "value"), Input("stat", "value"), Input("hosts", "value"),
                  Input("job", "value"), State("url", "search"))
    def draw(product_name, fields, window, group_by, stat, hosts_text, job_key, _search):
        figure, note = plot(CURRENT_USER.get(), product_name=product_name or "", fields=fields or [], window=int(window or 7200),
                            group_by=group_by or "host", stat=stat or "mean", hosts_text=hosts_text or "", job_key=job_key or "")
        return figure, note

    return app
