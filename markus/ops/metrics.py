"""``GET /metrics``: Prometheus metrics read from the database at scrape time.

The database is the queue of record, so every figure here is a query, not a counter
kept in some process: the answer is the same whichever web process is scraped, however
many workers run, and survives restarts. Counts of rows that only grow (decisions,
recoveries, lease epochs) are exported as gauges; ``delta()`` or ``deriv()`` over them
gives rates. Processing and wait times are gauge histograms over the items completed in
the last ``WINDOW_SECONDS`` (``histogram_quantile`` works on their buckets directly, no
``rate()``).

Who may read them (``metrics_allowed``): a signed-in staff user, a caller with
``Authorization: Bearer $MARKUS_METRICS_TOKEN`` (when that is set), or a request from
this machine's loopback that no proxy forwarded (no ``X-Forwarded-For``, ``Forwarded``
or ``X-Real-IP``).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, IntegerField, Min, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agentbus.models import OutboxRecord, OutboxStatus
from attention.models import AgentAttention, AgentDecision, AttentionState
from mailbox.lifecycle import OPEN_STATUSES, parked
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import Agent

log = logging.getLogger(__name__)

WINDOW_SECONDS = 3600
BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
# How the mailbox's recovery marks what it did (mailbox/lifecycle.py, mailbox/services.py;
# tests/test_health_metrics.py runs the real recovery, so a change of wording shows).
RECOVERY_DROP_PREFIX = "recovery:"
RECOVERY_COLLAPSE_REASON = "recovery: heartbeat collapse"
RECOVERY_CRASHES_KEY = "crashes"


def _age(now: datetime, then: datetime | None) -> float:
    return max(0.0, (now - then).total_seconds()) if then is not None else 0.0


# ---------------------------------------------------------------------------- agents, queues


def agent_metrics(now: datetime) -> Iterator[Metric]:
    agents = list(Agent.objects.order_by().values_list("id", "kind", "status"))
    population = GaugeMetricFamily("markus_agents", "Agents by kind and run status.", labels=["kind", "status"])
    tally: dict[tuple[str, str], int] = defaultdict(int)
    for _, kind, status in agents:
        tally[(kind, status)] += 1
    for (kind, status), n in sorted(tally.items()):
        population.add_metric([kind, status], n)
    yield population

    rows = MailboxItem.objects.order_by().values("agent_id", "status").annotate(n=Count("id"), oldest=Min("queued_at"))
    counts: dict[tuple[str, str], int] = {}
    oldest: dict[str, datetime] = {}
    for row in rows:
        counts[(row["agent_id"], row["status"])] = row["n"]
        if row["status"] == Status.QUEUED:
            oldest[row["agent_id"]] = row["oldest"]
    depth = GaugeMetricFamily("markus_queue_depth", "Queued items (due now) per agent.", labels=["agent"])
    head_age = GaugeMetricFamily(
        "markus_queue_oldest_age_seconds", "Age of the oldest queued item per agent (0: none).", labels=["agent"]
    )
    items = GaugeMetricFamily(
        "markus_mailbox_items",
        "Mailbox items per agent and status (all rows in the table).",
        labels=["agent", "status"],
    )
    for agent_id, _, _ in agents:
        depth.add_metric([agent_id], counts.get((agent_id, Status.QUEUED), 0))
        head_age.add_metric([agent_id], _age(now, oldest.get(agent_id)))
        for status in OPEN_STATUSES:
            items.add_metric([agent_id, status], counts.get((agent_id, status), 0))
    for (agent_id, status), n in sorted(counts.items()):
        if status not in OPEN_STATUSES:
            items.add_metric([agent_id, status], n)
    yield from (depth, head_age, items)

    waiting = GaugeMetricFamily(
        "markus_mailbox_parked_items", "Deferred items waiting for a person's approval.", labels=["agent"]
    )
    for agent_id, n in _per_agent(MailboxItem.objects.filter(parked(), status=Status.DEFERRED), Count("id")):
        waiting.add_metric([agent_id], n)
    yield waiting


def _per_agent(rows: QuerySet[Any], aggregate: Any) -> list[tuple[str, int]]:
    grouped = rows.order_by().values("agent_id").annotate(n=aggregate).values_list("agent_id", "n")
    return sorted((agent_id, int(n or 0)) for agent_id, n in grouped)


# ---------------------------------------------------------------------------- attention, leases


def attention_metrics(now: datetime) -> Iterator[Metric]:
    state = GaugeMetricFamily(
        "markus_attention_state", "1 for the agent's current attention state.", labels=["agent", "state"]
    )
    focus = GaugeMetricFamily(
        "markus_attention_focus_seconds", "How long the current focus has lasted (0: idle).", labels=["agent"]
    )
    epoch = GaugeMetricFamily(
        "markus_lease_epoch",
        "The agent's lease epoch: leases taken so far (each run and each takeover of an expired lease adds one).",
        labels=["agent"],
    )
    expired = GaugeMetricFamily(
        "markus_lease_expired",
        "1 while a lease is held past its expiry (its worker stalled or died).",
        labels=["agent"],
    )
    rows = AgentAttention.objects.order_by("agent_id").values_list(
        "agent_id", "state", "lease_epoch", "lease_owner", "lease_expires_at", "focus_started_at"
    )
    for agent_id, current, lease_epoch, owner, expires_at, focus_started_at in rows:
        for choice in AttentionState:
            state.add_metric([agent_id, choice.value], 1 if current == choice else 0)
        focused = current != AttentionState.IDLE
        focus.add_metric([agent_id], _age(now, focus_started_at) if focused else 0.0)
        epoch.add_metric([agent_id], lease_epoch)
        expired.add_metric([agent_id], 1 if owner and expires_at is not None and expires_at < now else 0)
    yield from (state, focus, epoch, expired)


def decision_metrics() -> Iterator[Metric]:
    decisions = GaugeMetricFamily(
        "markus_decisions", "Attention decisions recorded, per agent and decision type.", labels=["agent", "type"]
    )
    rows = AgentDecision.objects.order_by().values_list("agent_id", "decision_type").annotate(n=Count("id"))
    for agent_id, decision_type, n in sorted(rows):
        decisions.add_metric([agent_id, decision_type], n)
    yield decisions


def recovery_metrics() -> Iterator[Metric]:
    """What restart recovery did to items a dead worker left behind: ``requeued`` (a
    crash the item survived), ``dropped`` (in flight at a crash and given up), and
    ``collapsed`` (stale heartbeats folded to the newest)."""
    recoveries = GaugeMetricFamily(
        "markus_recoveries", "Items handled by restart recovery, per agent and outcome.", labels=["agent", "outcome"]
    )
    crashes = Sum(Cast(KT(f"marks__{RECOVERY_CRASHES_KEY}"), IntegerField()))
    for agent_id, n in _per_agent(MailboxItem.objects.filter(marks__has_key=RECOVERY_CRASHES_KEY), crashes):
        recoveries.add_metric([agent_id, "requeued"], n)
    dropped = MailboxItem.objects.filter(status=Status.DROPPED, drop_reason__startswith=RECOVERY_DROP_PREFIX)
    collapsed = Count("id", filter=Q(drop_reason=RECOVERY_COLLAPSE_REASON))
    grouped = dropped.order_by().values("agent_id").annotate(n=Count("id"), collapsed=collapsed)
    for row in sorted(grouped, key=lambda r: r["agent_id"]):
        recoveries.add_metric([row["agent_id"], "dropped"], row["n"] - row["collapsed"])
        recoveries.add_metric([row["agent_id"], "collapsed"], row["collapsed"])
    yield recoveries


def outbox_metrics(now: datetime) -> Iterator[Metric]:
    records = GaugeMetricFamily("markus_outbox_records", "Task lifecycle outbox rows by status.", labels=["status"])
    counts = dict(OutboxRecord.objects.order_by().values_list("status").annotate(n=Count("id")))
    for status in OutboxStatus:
        records.add_metric([status.value], counts.get(status.value, 0))
    oldest = OutboxRecord.objects.filter(status=OutboxStatus.PENDING).aggregate(m=Min("created_at"))["m"]
    lag = GaugeMetricFamily(
        "markus_outbox_lag_seconds", "Age of the oldest outbox row not yet relayed to the bus (0: none)."
    )
    lag.add_metric([], _age(now, oldest))
    yield from (records, lag)


# ---------------------------------------------------------------------------- timings


def _window_histogram(name: str, doc: str, start: str, end: str, since: datetime) -> Metric:
    """Items completed since ``since``: a gauge histogram of ``end - start`` per source
    type, bucketed in SQL (one query, whatever the number of items)."""
    buckets = {
        f"le_{i}": Count("id", filter=Q(**{f"{end}__lte": F(start) + timedelta(seconds=bound)}))
        for i, bound in enumerate(BUCKETS_S)
    }
    total = Sum(ExpressionWrapper(F(end) - F(start), output_field=DurationField()))
    rows = (
        MailboxItem.objects.filter(status=Status.COMPLETED, completed_at__gte=since, started_at__isnull=False)
        .order_by()
        .values("source_type")
        .annotate(n=Count("id"), total=total, **buckets)
    )
    family = GaugeHistogramMetricFamily(name, doc, labels=["source_type"])
    for row in sorted(rows, key=lambda r: r["source_type"]):
        series = [(str(float(bound)), float(row[f"le_{i}"])) for i, bound in enumerate(BUCKETS_S)]
        series.append(("+Inf", float(row["n"])))
        family.add_metric([row["source_type"]], series, (row["total"] or timedelta(0)).total_seconds())
    return family


def timing_metrics(now: datetime) -> Iterator[Metric]:
    since = now - timedelta(seconds=WINDOW_SECONDS)
    window = f"items completed in the last {WINDOW_SECONDS} s, per source type"
    yield _window_histogram(
        "markus_item_wait_seconds",
        f"From enqueue to the start of processing, {window}.",
        "queued_at",
        "started_at",
        since,
    )
    yield _window_histogram(
        "markus_item_processing_seconds",
        f"From the start of processing to completion, {window}.",
        "started_at",
        "completed_at",
        since,
    )


class MarkusCollector(Collector):
    """Reads every figure from the database when scraped."""

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        now = timezone.now()
        yield from agent_metrics(now)
        yield from attention_metrics(now)
        yield from decision_metrics()
        yield from recovery_metrics()
        yield from outbox_metrics(now)
        yield from timing_metrics(now)
        scrape = GaugeMetricFamily("markus_metrics_scrape_seconds", "Time spent reading these metrics.")
        scrape.add_metric([], time.monotonic() - started)
        yield scrape


registry = CollectorRegistry(auto_describe=False)
registry.register(MarkusCollector())


# ---------------------------------------------------------------------------- the view


def _bearer(request: HttpRequest) -> str:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


def _from_loopback(request: HttpRequest) -> bool:
    """Direct from this machine. A proxy on this machine would make every caller look
    local, so a forwarded request never counts."""
    if any(h in request.headers for h in ("X-Forwarded-For", "Forwarded", "X-Real-IP")):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def metrics_allowed(request: HttpRequest) -> bool:
    token = str(settings.MARKUS.get("METRICS_TOKEN") or "")
    given = _bearer(request)
    if token and given and hmac.compare_digest(given.encode(), token.encode()):
        return True
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_active and user.is_staff:
        return True
    return _from_loopback(request)


@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request):
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return HttpResponse("Metrics are for staff.\n", status=403, content_type="text/plain")
        response = HttpResponse("Metrics need a staff session or the metrics token.\n", status=401)
        response["Content-Type"] = "text/plain"
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    try:
        body = encoder(registry)
    except Exception:
        log.exception("metrics: reading the database failed")
        return HttpResponse("Metrics are unavailable: the database could not be read.\n", status=503)
    return HttpResponse(body, content_type=content_type)
