"""/work lists every task the caller may see, a page at a time, with its honest count,
searched by title or id and filtered by state, assignee and requirement, all kept in
the URL (the pager's links and the live refresh keep the other filters). A parameter
the page cannot use is ignored with a note, never an error. alice owns ada (team Core,
bob a member) and solo (no team: bob may not see its tasks)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from markus.core.actors import Actor
from markus.web.listing import PER_PAGE
from markus.work.models import Task, TaskState
from markus.work.requirement_services import requirement_create

from .conftest import signed_in

pytestmark = pytest.mark.django_db


def make_tasks(n: int, *, by, assignee=None, status=TaskState.PENDING, title="task", **extra) -> list[Task]:
    return Task.objects.bulk_create(
        Task(title=f"{title} {i}", created_by_user=by, assignee=assignee, status=status, **extra) for i in range(n)
    )


def rows(page: str) -> list[str]:
    return re.findall(r'<tr id="row-([^"]+)"', page)


def get(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def test_every_task_is_listed_on_some_page_and_the_count_is_all_of_them(alice, agent):
    working = make_tasks(1, by=alice, assignee=agent, status=TaskState.IN_PROGRESS, title="oldest working")[0]
    make_tasks(121, by=alice, assignee=agent)
    client = signed_in(alice)
    first = get(client, "/work")
    assert "122 tasks," in first and len(rows(first)) == PER_PAGE
    assert 'href="?page=2"' in first and "Page 1 of 3" in first
    seen = []
    for n in (1, 2, 3):
        seen += rows(get(client, f"/work?page={n}"))
    assert len(seen) == 122 == len(set(seen)) and working.id in seen
    last = get(client, "/work?page=3")
    assert 'href="?page=2"' in last and "101–122 of 122" in last and "Older →</a>" not in last


def test_filters_by_state_assignee_requirement_and_search_keep_each_other_in_the_links(alice, agent, solo):
    requirement = requirement_create(actor=Actor.for_user(alice), title="Docs", agent_id=agent.id)
    review = make_tasks(PER_PAGE + 3, by=alice, assignee=agent, status=TaskState.REVIEW, title="review")
    make_tasks(4, by=alice, assignee=solo, status=TaskState.REVIEW, title="solo review")
    make_tasks(5, by=alice, status=TaskState.PENDING, title="nobody's")
    parts = make_tasks(2, by=alice, assignee=agent, requirement=requirement, title="Write the guide")
    client = signed_in(alice)

    by_state = get(client, "/work?status=review&assigneeId=ada")
    assert f"{PER_PAGE + 3} tasks match" in by_state
    assert 'href="?status=review&amp;assigneeId=ada&amp;page=2"' in by_state
    second = get(client, "/work?status=review&assigneeId=ada&page=2")
    assert set(rows(second)) < {t.id for t in review} and len(rows(second)) == 3
    assert 'href="?status=review&amp;assigneeId=ada"' in second  # back to page 1, filters kept

    assert "5 tasks match" in get(client, "/work?assigneeId=none")
    assert set(rows(get(client, f"/work?requirementId={requirement.id}"))) == {t.id for t in parts}
    assert len(rows(get(client, "/work?requirementId=none"))) == PER_PAGE  # every task but the two parts
    assert set(rows(get(client, "/work?q=THE%20GUIDE"))) == {t.id for t in parts}  # words of the title, any case
    assert rows(get(client, f"/work?q={parts[0].id}")) == [parts[0].id]  # or the id
    assert "0 tasks match" in get(client, "/work?q=nothing+like+this")


def test_another_persons_tasks_are_never_listed_whatever_the_filter(alice, bob, charlie, agent, solo):
    mine = make_tasks(3, by=alice, assignee=agent, title="team")
    make_tasks(4, by=alice, assignee=solo, title="private")
    make_tasks(5, by=charlie, title="outsider")
    client = signed_in(bob)
    assert set(rows(get(client, "/work"))) == {t.id for t in mine}
    assert "3 tasks," in get(client, "/work")
    hidden = get(client, "/work?assigneeId=solo")
    assert rows(hidden) == [] or set(rows(hidden)) == {t.id for t in mine}
    assert "assigneeId=&#x27;solo&#x27; ignored: no agent you can see" in hidden
    assert set(rows(get(client, "/work?q=private"))) == set()
    assert set(rows(get(client, "/work?q=outsider"))) == set()


@pytest.mark.parametrize(
    "query, note",
    [
        ("page=abc", "page=&#x27;abc&#x27; ignored: not a page number."),
        ("page=0", "page=&#x27;0&#x27; ignored: not a page number."),
        ("page=99", "page=99 ignored: there is 1 page."),
        ("status=bogus", "status=&#x27;bogus&#x27; ignored: expected one of pending"),
        ("requirementId=req_missing", "requirementId=&#x27;req_missing&#x27; ignored: no requirement you can see"),
        ("q=" + "x" * 201, "ignored: at most 200 characters."),
        ("rpage=-1", "rpage=&#x27;-1&#x27; ignored: not a page number."),
        ("rstatus=done", "rstatus=&#x27;done&#x27; ignored"),
    ],
)
def test_a_parameter_the_page_cannot_use_is_ignored_with_a_note(alice, agent, query, note):
    make_tasks(2, by=alice, assignee=agent)
    page = get(signed_in(alice), f"/work?{query}")
    assert note in page and len(rows(page)) == 2
    assert '<ul class="list-notes"' in page


def test_a_page_past_the_last_shows_the_last(alice, agent):
    make_tasks(PER_PAGE + 1, by=alice, assignee=agent)
    page = get(signed_in(alice), "/work?page=7")
    assert "page=7 ignored: there are 2 pages." in page and len(rows(page)) == 1


def test_the_live_refresh_reads_the_same_filtered_page_again(alice, agent):
    make_tasks(PER_PAGE + 1, by=alice, assignee=agent, status=TaskState.REVIEW)
    page = get(signed_in(alice), "/work?status=review&page=2&bogus=1&rstatus=nope")
    assert 'hx-get="/work?status=review&amp;page=2"' in page  # the valid filters only, on each list
    assert page.count('hx-get="/work?status=review&amp;page=2"') == 2


def test_requirements_are_paged_and_filtered_too(alice, agent):
    for i in range(PER_PAGE + 2):
        requirement_create(actor=Actor.for_user(alice), title=f"need {i}", agent_id=agent.id)
    client = signed_in(alice)
    page = get(client, "/work?status=pending")
    assert f"{PER_PAGE + 2} requirements" in page
    assert 'href="?status=pending&amp;rpage=2"' in page  # the tasks' filter kept
    second = get(client, "/work?status=pending&rpage=2")
    assert len(re.findall(r'href="/work\?requirement=', second)) == 2
    assert "1 requirement match" in get(client, f"/work?rq=need+{PER_PAGE}")


def test_the_paged_lists_read_in_a_fixed_number_of_queries(alice, agent, solo):
    actor = Actor.for_user(alice)
    requirement = requirement_create(actor=actor, title="Docs", agent_id=agent.id)
    urls = [
        "/work",
        "/work?page=2&rpage=2",
        f"/work?status=pending&assigneeId=ada&requirementId={requirement.id}&q=task&page=2",
        "/work?assigneeId=none&requirementId=none&rstatus=in_progress&rq=need",
    ]
    client = signed_in(alice)

    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    def grow(n: int) -> None:
        make_tasks(n, by=alice, assignee=agent, requirement=requirement)
        make_tasks(n, by=alice, assignee=solo)
        make_tasks(n, by=alice)
        for i in range(n):
            requirement_create(actor=actor, title=f"need {i}", agent_id=agent.id)

    n = PER_PAGE + 5
    grow(n)
    small = [count(u) for u in urls]
    grow(2 * n)
    assert [count(u) for u in urls] == small


def test_the_home_boards_counts_lead_to_the_work_list_filtered_by_their_state(alice, agent):
    make_tasks(9, by=alice, assignee=agent)  # more than a column shows
    make_tasks(2, by=alice, assignee=agent, status=TaskState.COMPLETED)
    home = get(signed_in(alice), "/")
    assert '<a href="/work?status=pending">all 9 →</a>' in home
    assert 'href="/work?status=completed">Completed: <b>2</b></a>' in home
