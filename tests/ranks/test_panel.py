"""The ranks panel in the job-page registry: its shell (no figure: that loads from the API), and what
it puts on the first screen (the layout as a fact; findings about where communicators run, each with
one thing to do)."""
import pytest
from django.template.loader import render_to_string
from django.test import RequestFactory

from apps.core.panels import first_screen, job_panel

COMPACT = [f"nid{n:06d}" for n in range(1, 9)]  # all in dragonfly group 0
STRADDLING = [f"nid{n:06d}" for n in range(109, 117)]  # 109-112 in group 0, 113-116 in group 1
INTERLEAVED = [f"nid{n:06d}" for n in (109, 113, 110, 114, 115, 111, 116, 112)]  # groups 0 1 0 1 | 1 0 1 0
PAIRED = [f"nid{n:06d}" for n in (109, 110, 113, 114, 115, 116, 111, 112)]  # groups 0 0 1 1 | 1 1 0 0


def with_layout(job, **sizes):
    from apps.ranks.services import layout_set

    layout_set(job, {"cp": 1, "ep": 1, "order": "tp-cp-ep-dp-pp", **sizes}, source="sizes", submitted_by="alice")
    return fresh(job)


def fresh(job):
    """The job as a new page view reads it (the panel computes once per job object)."""
    from apps.jobs.models import Job

    return Job.objects.get(pk=job.pk)


def page_request(**params):
    from django.contrib.auth.models import AnonymousUser

    request = RequestFactory().get("/jobs/alps/1/", params)
    request.user = AnonymousUser()
    return request


def test_registered_from_the_apps_ready():
    from apps.ranks import panel

    registered = job_panel("ranks")
    assert (registered.title, registered.order, registered.template) == ("Megatron ranks", 40, "ranks/_job_section.html")
    assert registered.context is panel.context and registered.summary is panel.summary


def test_without_a_layout_nothing_on_the_first_screen(alps_job):
    from apps.ranks.panel import summary

    job = alps_job(COMPACT)
    assert summary(job) is None
    html = render_to_string("ranks/_job_section.html", {"job": job, "request": page_request(), **job_panel("ranks").context(job, page_request())})
    assert "does not know this job's Megatron layout yet" in html and "data-figure-url" not in html


def test_a_compact_layout_is_a_fact_without_findings(alps_job):
    from apps.ranks.panel import summary

    job = with_layout(alps_job(COMPACT), tp=4, pp=2)
    part = summary(job)
    assert [(fact.label, fact.value, fact.detail) for fact in part.facts] == [
        ("Layout", "TP 4 × PP 2 × DP 4", "32 ranks, placed by Slurm's block distribution")]
    assert part.findings == []
    assert "TP 4 × PP 2 × DP 4" in [fact.value for fact in first_screen(job).facts]  # merged with the other panels


def test_pipeline_crossing_groups_that_the_other_rank_order_avoids_is_a_warning(alps_job):
    from apps.ranks.panel import summary

    job = with_layout(alps_job(PAIRED), tp=4, pp=2)
    [finding] = summary(job).findings
    # Stage 0 on nodes 1-4 of the list (groups 0 0 1 1), stage 1 on nodes 5-8 (1 1 0 0): replica d pairs node d
    # with node d + 4, always across groups. With tp-pp-dp order replica d is nodes 2d and 2d + 1: one group each,
    # and the data-parallel groups (which already span both groups) span no more.
    assert finding.level == "warning" and finding.source == "ranks" and finding.link == "#panel-ranks"
    assert finding.title == "Pipeline boundary 0→1 crosses dragonfly groups (16 of 16 stage-to-stage links)"
    assert finding.action == ("Run with --use-tp-pp-dp-mapping (order tp-cp-ep-pp-dp): on these GPUs 0 instead of 16 "
                              "links would cross groups, and no more data-parallel groups would.")


@pytest.mark.parametrize("nodes", [
    INTERLEAVED,  # the other order pairs groups 0-1, 0-1, 1-0, 1-0: no better
    STRADDLING,  # the other order keeps pipelines in a group but spreads every data-parallel group over both
], ids=["no-better", "spreads-dp"])
def test_pipeline_crossing_groups_either_way_is_information(alps_job, nodes):
    from apps.ranks.panel import summary

    job = with_layout(alps_job(nodes), tp=4, pp=2)
    [finding] = summary(job).findings
    assert finding.level == "info" and finding.title.startswith("Pipeline boundary 0→1 crosses dragonfly groups (16 of 16")
    assert "keep each pipeline in one dragonfly group" in finding.action


def test_tensor_parallel_wider_than_a_node_is_a_warning(alps_job):
    from apps.ranks.panel import summary

    job = with_layout(alps_job(COMPACT), tp=8, pp=1)
    [finding] = summary(job).findings
    assert finding.level == "warning"
    assert finding.title == "4 of 4 tensor-parallel groups span up to 2 nodes: their traffic leaves NVLink for the network"
    assert finding.action.startswith("Keep TP at most 4 (the GPUs of one node)")


def test_a_layout_that_no_longer_fits_says_so(alps_job):
    from apps.ranks.panel import summary

    job = with_layout(alps_job(COMPACT), tp=4, pp=2)
    job.node_list = COMPACT[:3]
    job.save()
    job = fresh(job)
    [finding] = summary(job).findings
    assert finding.level == "warning" and "no longer fits" in finding.title and "Set the layout again" in finding.action
    context = job_panel("ranks").context(job, page_request())
    assert "no longer fits" in context["rank_layout_problem"]


def test_the_template_stands_alone_in_the_panel_and_still_works_in_the_old_page(alps_job):
    from apps.ranks.views import ranks_context

    job = with_layout(alps_job(COMPACT), tp=4, pp=2)
    request = page_request(sel_pp="1", rank_colour="dp")
    html = render_to_string("ranks/_job_section.html", {"job": job, "request": request, **job_panel("ranks").context(job, request)})
    assert html.startswith('<div class="ranks-panel">') and "<section" not in html  # the page's section holds it
    assert '<h2 id="ranks-heading">Megatron ranks</h2>' in html
    assert 'data-figure-url="/api/v1/jobs/alps/1/ranks/figure/?colour=dp&amp;sel_pp=1"' in html
    assert "js/ranks.js" in html and "rank-figure-data" not in html  # the figure is not inlined
    assert "16 ranks selected" in html and html.count('class="group-0 selected"') == 4  # stage 1 of 4 replicas
    old = render_to_string("ranks/_job_section.html", {"job": job, "request": request, **ranks_context(job, request.GET)})
    assert old.startswith('<section class="panel" aria-labelledby="ranks-heading">')


def test_the_job_page_carries_the_shell_not_the_figure(alps_job, client, make_user):
    job = with_layout(alps_job(COMPACT), tp=4, pp=2)
    client.force_login(make_user("alice"))
    page = client.get(f"/jobs/alps/{job.job_id}/?sel_pp=7-8").content.decode()
    assert 'id="rank-figure"' in page and 'data-figure-url="/api/v1/jobs/alps/1/ranks/figure/?colour=pp&amp;sel_pp=7-8"' in page
    assert "stages 7–8 do not exist: stages 0–1" in page
    assert '"type": "scatter"' not in page and "rank-figure-data" not in page


def test_the_summary_is_cached_until_the_layout_changes(alps_job, django_assert_max_num_queries):
    from apps.ranks.panel import summary

    job = with_layout(alps_job(PAIRED), tp=4, pp=2)
    first = summary(job)
    job = fresh(job)
    with django_assert_max_num_queries(2):  # the layout row and the topology revision: no rank table built
        again = summary(job)
    assert again == first
    job = with_layout(job, tp=4, pp=1)  # a new layout: no pipeline, no finding
    assert summary(job).findings == [] and summary(job).facts[0].value == "TP 4 × PP 1 × DP 8"
