"""Settings, read from the environment (django-environ).

SQLite in WAL mode by default; PostgreSQL from DATABASE_URL. With REDIS_URL unset the
in-memory channel layer and the in-process (memory) Celery broker are used, which only
work when server, worker and beat share one process (`manage.py up`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from markus.core import limits
from markus.usage.price_table import DEFAULT_PRICES

BASE_DIR = Path(__file__).resolve().parent.parent.parent
env = environ.Env()

DATA_DIR = Path(env.str("MARKUS_DATA_DIR", default=str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

# ------------------------------------------------------------------------ security
# The embedded default (`make run`) works without configuration. In production the
# default SECRET_KEY is refused at start-up. Production means: MARKUS_ENV=production,
# or ALLOWED_HOSTS naming any host beyond this machine (LOCAL_HOSTS), whatever DEBUG says.
DEFAULT_SECRET_KEY = "markus-dev-insecure-key-change-me"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]", "testserver"})
MARKUS_ENV = env.str("MARKUS_ENV", default="development").strip().lower()
SECRET_KEY = env.str("SECRET_KEY", default=DEFAULT_SECRET_KEY)
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=["http://127.0.0.1:8000", "http://localhost:8000"])
PRODUCTION = MARKUS_ENV == "production" or any(host not in LOCAL_HOSTS for host in ALLOWED_HOSTS)
if PRODUCTION and SECRET_KEY in ("", DEFAULT_SECRET_KEY):
    raise ImproperlyConfigured(
        "SECRET_KEY is not set: the embedded development key is refused in production (MARKUS_ENV=production, "
        "or ALLOWED_HOSTS naming a host other than localhost). Set SECRET_KEY in the environment to a long random "
        "value, e.g. SECRET_KEY=\"$(python -c 'import secrets; print(secrets.token_urlsafe(50))')\"."
    )
# HTTPS hardening, off unless set (`manage.py check --deploy` lists what is missing).
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=False)


def _proxy_ssl_header(raw: str) -> tuple[str, str] | None:
    """``X-Forwarded-Proto,https`` (or ``HTTP_X_FORWARDED_PROTO,https``): the header a
    trusted proxy sets and its value for HTTPS. Only set it behind such a proxy."""
    if not raw.strip():
        return None
    parts = [part.strip() for part in raw.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ImproperlyConfigured(
            "SECURE_PROXY_SSL_HEADER must be 'HEADER,value', e.g. SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto,https"
        )
    header = parts[0].upper().replace("-", "_")
    return (header if header.startswith("HTTP_") else f"HTTP_{header}", parts[1])


SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(env.str("SECURE_PROXY_SSL_HEADER", default=""))

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_htmx",
    "django_celery_beat",
    "markus.agents",
    "markus.memory",
    "markus.work",
    "mailbox",
    "attention",
    "notifications",
    "agentbus",
    "markus.reports",
    "markus.toolservers",
    "markus.a2a",
    "markus.retention",
    "markus.usage",
    "markus",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "markus.core.input.refuse_bad_characters",  # NUL / lone surrogates in path or query: 400
    "markus.core.static.StaticFilesMiddleware",  # WhiteNoise, async-capable (see the module)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "markus.core.busy.RetryLaterMiddleware",  # a lock given up, the database down: 503, Retry-After
]

ROOT_URLCONF = "markus.urls"
ASGI_APPLICATION = "markus.asgi.application"
WSGI_APPLICATION = "markus.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}
DATABASES = {"default": env.db_url("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'markus.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = dict(SQLITE_OPTIONS)
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", 0)
# A frozen worker stalls only its own agent (ARCHITECTURE decision 11). On PostgreSQL
# every session carries a statement_timeout (no statement runs longer, no lock wait
# outlasts it) and an idle_in_transaction_session_timeout: a worker frozen inside a
# transaction (SIGSTOP, a debugger) has its session cut and its row locks released,
# so its agent is free again after at most that long. Milliseconds; 0 turns one off.
# Every session also carries a lock_timeout: no lock wait outlasts
# DATABASE_LOCK_TIMEOUT_MS (the lease's transactions then answer busy, attention.lease).
# Set at the session's start, it costs the loop no statement (a SET LOCAL in each of its
# transactions was one more round trip on the way from a wake-up to the claim).
DATABASE_STATEMENT_TIMEOUT_MS = env.int("MARKUS_DB_STATEMENT_TIMEOUT_MS", default=30_000)
DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS = env.int("MARKUS_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", default=60_000)
DATABASE_LOCK_TIMEOUT_MS = env.int("MARKUS_DB_LOCK_TIMEOUT_MS", default=3_000)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _pg_options = DATABASES["default"].setdefault("OPTIONS", {})
    _pg_options["options"] = " ".join(
        [
            _pg_options.get("options", ""),
            f"-c statement_timeout={DATABASE_STATEMENT_TIMEOUT_MS}",
            f"-c idle_in_transaction_session_timeout={DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS}",
            f"-c lock_timeout={DATABASE_LOCK_TIMEOUT_MS}",
        ]
    ).strip()
    # Prepared statements allowed on the connection (Django turns them off): only the
    # statements sent through ``markus.core.statements.prepared_cursor`` (the run's take of its
    # lease, the fenced claim) are prepared; Django's own cursors bind on the client and
    # never prepare. Behind a pooler that cannot keep them (PgBouncer's transaction mode
    # before 1.21) MARKUS_DB_PREPARE=false sends those statements unprepared.
    if env.bool("MARKUS_DB_PREPARE", default=True):
        _pg_options.setdefault("prepare_threshold", 5)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
# Static files (admin, Swagger UI, htmx) are served by WhiteNoise straight from the
# app finders, so `manage.py up` needs no collectstatic step; behind a proxy in
# production, run collectstatic and let the proxy serve STATIC_ROOT.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# Bodies over this answer 413, refused at the edge before they are read (markus.core.limits).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("MARKUS_MAX_BODY_BYTES", default=1024 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "markus.agents.auth.BearerAuthentication",  # Bearer <agent or user token>
        "markus.agents.auth.UserTokenAuthentication",  # Token <key>, stored hashed
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["markus.agents.auth.IsUserOrAgent"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "markus.core.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # DRF's parsers, refusing NUL bytes and lone surrogates anywhere in a body (400).
    "DEFAULT_PARSER_CLASSES": [
        "markus.core.input.JSONParser",
        "markus.core.input.FormParser",
        "markus.core.input.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Markus API",
    "VERSION": "0.1.0",
    "DESCRIPTION": "Agents, their mailboxes and attention, tasks and requirements, notifications, the AgentBus.",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_INCLUDE_SCHEMA": False,
    "ENUM_NAME_OVERRIDES": {
        "TaskStateEnum": "markus.work.models.TaskState",
        "RequirementStateEnum": "markus.work.models.RequirementState",
        "MailboxItemStatusEnum": "mailbox.registry.STATUS_CHOICES",
        "AgentRunStatusEnum": "markus.agents.models.Agent.RunStatus",
        "ApprovalStateEnum": "notifications.models.Approval.State",
        "AgentKindEnum": "markus.agents.models.Agent.Kind",
        "ChatSessionKindEnum": "attention.api.CHAT_SESSION_KINDS",
        "ReminderStateEnum": "markus.reports.serializers.REMINDER_STATES",
        "ToolPolicyEnum": "markus.toolservers.models.Policy",
        "ToolServerTransportEnum": "markus.toolservers.models.Transport",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "markus.core.schema.document_plain_views",
        "agentbus.schema.document_async_views",
        "markus.core.schema.document_bad_input",  # last: every operation, the plain views' too
    ],
    "COMPONENT_SPLIT_REQUEST": True,
}

REDIS_URL = env.str("REDIS_URL", default="")
# Several deployments (or test runs) can share one Redis: each prefixes its channel
# layer groups and its Celery queues with its own namespace.
REDIS_NAMESPACE = env.str("MARKUS_REDIS_NAMESPACE", default="")
CHANNEL_LAYERS: dict[str, dict[str, Any]]
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {}
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "prefix": REDIS_NAMESPACE or "asgi"},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    if REDIS_URL.split("://", 1)[0] in ("redis", "rediss"):
        # kombu's Redis transport with a channel that lets the worker recover from a
        # lost broker (markus.celery.RedisChannel).
        CELERY_BROKER_TRANSPORT = "markus.celery:RedisTransport"
    if REDIS_NAMESPACE:
        CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": f"{REDIS_NAMESPACE}:"}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "markus.core.channel_layer.ThreadSafeInMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    # kombu's memory transport polls (1 s by default); this one wakes the worker with an
    # in-process doorbell rung by every send (markus.embedded.MemoryTransport).
    CELERY_BROKER_TRANSPORT = "markus.embedded:MemoryTransport"

# At-least-once delivery: run_attention is idempotent, so a redelivery is harmless.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Celery's Django fixup closes every database connection around every task whatever
# CONN_MAX_AGE says (and only every this many tasks when this is set): markus.celery
# closes them by Django's own rule instead (close_old_connections around each task).
CELERY_DB_REUSE_MAX = 1_000_000
# Seconds a worker keeps its database connection between tasks (a new PostgreSQL one
# forks a server backend, a new SQLite one sets WAL: the largest part of a wake-up); 0
# closes it after every task. A CONN_MAX_AGE in DATABASE_URL (?conn_max_age=) takes
# precedence. Only the connections tasks open (markus.celery): beside the embedded worker
# the server's requests close theirs at their end.
WORKER_CONN_MAX_AGE = env.int("MARKUS_WORKER_CONN_MAX_AGE", default=60)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

MARKUS = {
    "LLM_PROVIDER": env.str("MARKUS_LLM_PROVIDER", default="offline"),
    "LLM_MODEL": env.str("MARKUS_LLM_MODEL", default=""),
    "LLM_BASE_URL": env.str("MARKUS_LLM_BASE_URL", default=""),
    "LLM_API_KEY": env.str("MARKUS_LLM_API_KEY", default=""),
    # The model contract (attention.model_call, the one seam of every model call):
    # seconds to connect, to the first byte and between two chunks of an answer; a whole
    # call's ceiling (a server that keeps the stream alive without answering).
    "LLM_TIMEOUT_S": env.float("MARKUS_LLM_TIMEOUT_S", default=120.0),
    "LLM_CALL_MAX_S": env.float("MARKUS_LLM_CALL_MAX_S", default=600.0),
    # A provider error (no connection, a timeout, a cut stream, 429, 5xx) is tried again
    # this many times, after BACKOFF_S × 2^n seconds (± half, at most BACKOFF_CAP_S).
    "LLM_RETRIES": env.int("MARKUS_LLM_RETRIES", default=2),
    "LLM_BACKOFF_S": env.float("MARKUS_LLM_BACKOFF_S", default=2.0),
    "LLM_BACKOFF_CAP_S": env.float("MARKUS_LLM_BACKOFF_CAP_S", default=60.0),
    # max_tokens of one answer: "2048" for every scenario, or per scenario
    # ("chat=1024,task_execution=4096"); a scenario not named keeps its own default.
    "LLM_MAX_TOKENS": env.str("MARKUS_LLM_MAX_TOKENS", default=""),
    # The model's context window in tokens: past COMPACT_AT of it, a session's older tool
    # results are cut (with a note) before the next call.
    "LLM_CONTEXT_TOKENS": env.int("MARKUS_LLM_CONTEXT_TOKENS", default=32768),
    "LLM_COMPACT_AT": env.float("MARKUS_LLM_COMPACT_AT", default=0.75),
    # One item's model calls and tokens across all its attempts: past either it ends,
    # failed, with the reason (the person who asked is told once).
    "ITEM_MAX_CALLS": env.int("MARKUS_ITEM_MAX_CALLS", default=40),
    # One answer's tool calls that are made: past them a call is answered "not made",
    # to be made in a next turn if still needed (a model's answer of 25 distinct calls
    # was 25 effects, in every turn).
    "TURN_MAX_TOOL_CALLS": env.int("MARKUS_TURN_MAX_TOOL_CALLS", default=10),
    # One agent's messages to one colleague (or one group) in an hour, by its tools: two
    # agents answering each other with a new message every time talked forever.
    "AGENT_MESSAGES_PER_HOUR": env.int("MARKUS_AGENT_MESSAGES_PER_HOUR", default=30),
    # One piece of work's notify_user notices to people, across its attempts.
    "ITEM_MAX_NOTICES": env.int("MARKUS_ITEM_MAX_NOTICES", default=5),
    "ITEM_MAX_TOKENS": env.int("MARKUS_ITEM_MAX_TOKENS", default=400_000),
    # One attempt at an item runs at most this many seconds (the seed's 10-minute
    # processing backstop): checked before each turn, and by the sweep for a holder that
    # froze past it; the item then ends failed, the person told (attention.time_limit).
    # 0: no limit.
    "ITEM_MAX_SECONDS": env.float("MARKUS_ITEM_MAX_SECONDS", default=600.0),
    # Seconds a worker holds an agent's lease before it must renew it.
    "LEASE_SECONDS": env.float("MARKUS_LEASE_SECONDS", default=60.0),
    # Items one run_attention processes before it re-sends itself.
    "RUN_BUDGET_ITEMS": env.int("MARKUS_RUN_BUDGET_ITEMS", default=10),
    # ``manage.py up`` stopped (SIGTERM, Ctrl-C): how long its embedded worker's runs may
    # take to let go of their work (a model call closed, the item back in the queue) before
    # the process ends anyway (an item still in flight is recovered at the next start).
    "SHUTDOWN_GRACE_S": env.float("MARKUS_SHUTDOWN_GRACE_S", default=10.0),
    "COALESCE_WINDOW_MS": env.int("MARKUS_COALESCE_WINDOW_MS", default=200),
    "PREEMPT_RESUME_DELAY_S": env.float("MARKUS_PREEMPT_RESUME_DELAY_S", default=3.0),
    "SWEEP_SECONDS": env.float("MARKUS_SWEEP_SECONDS", default=15.0),
    # An agent is stalled (attention.stalls: its card, its mind view, its owner told once)
    # when it has held the same item this many seconds, when the same tool failed this many
    # times in a row, or when a person's answer has been awaited this many seconds. Half
    # the item's time limit, so a person hears of a long item before the limit ends it.
    "STALL_SECONDS": env.int("MARKUS_STALL_SECONDS", default=300),
    "STALL_TOOL_FAILURES": env.int("MARKUS_STALL_TOOL_FAILURES", default=3),
    "STALL_WAIT_SECONDS": env.int("MARKUS_STALL_WAIT_SECONDS", default=86_400),
    # How long a person's chat delivered to an outside agent's bus inbox waits for its
    # answer: past it the sweep ends it (its A2A task failed, the person told in the chat,
    # the agent's inbox told nobody waits; attention.outside.answers_overdue).
    "OUTSIDE_ANSWER_SECONDS": env.float("MARKUS_OUTSIDE_ANSWER_SECONDS", default=3600.0),
    # How long POST /api/agents/{id}/chat waits for the reply before answering 202.
    "CHAT_TIMEOUT_S": env.float("MARKUS_CHAT_TIMEOUT_S", default=120.0),
    # Open agent sockets (/ws/agents/{id}/…) per caller per server process; past it 4429.
    "SOCKETS_PER_CALLER": env.int("MARKUS_SOCKETS_PER_CALLER", default=32),
    # Waits at once (bus inbox and request, MCP, A2A, chat) per caller, per person (bus
    # waits of a user and their agents' tokens), per server process, and of those the
    # chat reserve that bus waits leave to people's chats (markus.core.waits).
    "WAITS_PER_CALLER": env.int("MARKUS_WAITS_PER_CALLER", default=limits.WAITS_PER_CALLER),
    "WAITS_PER_PERSON": env.int("MARKUS_WAITS_PER_PERSON", default=limits.WAITS_PER_PERSON),
    "WAITS_PER_SERVER": env.int("MARKUS_WAITS_PER_SERVER", default=limits.WAITS_PER_SERVER),
    "WAITS_CHAT_RESERVE": env.int("MARKUS_WAITS_CHAT_RESERVE", default=limits.WAITS_CHAT_RESERVE),
    # Demo mode: each offline-brain turn takes this long (streaming its words over it,
    # still stopped by a pause), so a preempt, a merge or a cancel can be watched. 0: at once.
    "OFFLINE_THINK_MS": env.int("MARKUS_OFFLINE_THINK_MS", default=0),
    # Send run_attention when an item is enqueued (tests that drive the loop by hand
    # turn it off; the sweep still finds the work).
    "WAKE_ON_ENQUEUE": env.bool("MARKUS_WAKE_ON_ENQUEUE", default=True),
    # Ask the LLM judge when the heuristics say "continue" at a yield point.
    "INTERRUPT_JUDGE": env.bool("MARKUS_INTERRUPT_JUDGE", default=True),
    # Let the brain choose among equal-priority items before processing (tier 1).
    "TRIAGE": env.bool("MARKUS_TRIAGE", default=True),
    # How long an item the triage deferred waits before it is due again.
    "TRIAGE_DEFER_SECONDS": env.float("MARKUS_TRIAGE_DEFER_SECONDS", default=300.0),
    # The agent's working memory (every entry's key and content together) stays within
    # this many characters: a write forgets the oldest entries first; one entry holds
    # at most a quarter of it (at most 2000).
    "WORKING_MEMORY_MAX_CHARS": env.int("MARKUS_WORKING_MEMORY_MAX_CHARS", default=8000),
    # Triage starts when this many queued items tie for the head's priority (the head
    # included) and the head is not a human's: a full deliberation (tier 2), or the mini
    # triage when it is off. A head more urgent than the rest goes at once (tier 0).
    "TRIAGE_BACKLOG_THRESHOLD": env.int("MARKUS_TRIAGE_BACKLOG_THRESHOLD", default=2),
    # Tier 2: the agent deliberates as itself over the items that tie with the head (off:
    # the mini triage).
    "DELIBERATION": env.bool("MARKUS_DELIBERATION", default=True),
    # A cheaper model for triage and deliberation ("" = the main model), used while at
    # most TRIAGE_MODEL_MAX_ITEMS items are queued (a longer queue gets the main model).
    "TRIAGE_MODEL": env.str("MARKUS_TRIAGE_MODEL", default=""),
    "TRIAGE_MODEL_MAX_ITEMS": env.int("MARKUS_TRIAGE_MODEL_MAX_ITEMS", default=5),
    # An agent's heartbeat interval when none is set for it (minutes, 5 to 1440); each
    # agent's own is set in the console, PATCH /api/agents/{id} or set_heartbeat_interval.
    "HEARTBEAT_DEFAULT_MINUTES": env.int("MARKUS_HEARTBEAT_DEFAULT_MINUTES", default=360),
    # The AgentBus wake-up backstop's period: one read per process for every parked wait and request.
    "AGENTBUS_POLL_SECONDS": env.float("MARKUS_AGENTBUS_POLL_SECONDS", default=5.0),
    # An agent's tool servers' tools are offered with every request up to this many; past
    # it they are found and loaded on demand (tool_search, tool_load: markus.toolservers).
    "TOOLSERVER_INLINE_TOOLS": env.int("MARKUS_TOOLSERVER_INLINE_TOOLS", default=4),
    # An http tool server on this machine or its networks (loopback, link-local, private,
    # ALLOWED_HOSTS' names: markus.toolservers.addresses) is refused unless this is true.
    "TOOLSERVER_ALLOW_PRIVATE": env.bool("MARKUS_TOOLSERVER_ALLOW_PRIVATE", default=False),
    # The modules whose @tool functions the loop offers to the LLM.
    "TOOL_MODULES": [
        "markus.tools.mailbox_tools",
        "markus.tools.memory_tools",
        "markus.tools.work_tools",
        "markus.tools.human_tools",
        "markus.tools.a2a_tools",
        "markus.tools.rhythm_tools",
        "markus.tools.longterm_tools",
        "markus.tools.reminder_tools",
        "markus.tools.report_tools",
    ],
    # A manager agent owes its daily report from this hour on, in its own time zone.
    "DAILY_REPORT_HOUR": env.int("MARKUS_DAILY_REPORT_HOUR", default=20),
    # A task execution or review that ends without a verdict runs again after
    # BASE, 2×BASE, 4×BASE … seconds (at most CAP); after MAX retries the execution's
    # task fails, a review goes to a person.
    "EXECUTION_MAX_RETRIES": env.int("MARKUS_EXECUTION_MAX_RETRIES", default=3),
    "EXECUTION_RETRY_BASE_S": env.float("MARKUS_EXECUTION_RETRY_BASE_S", default=30.0),
    "EXECUTION_RETRY_CAP_S": env.float("MARKUS_EXECUTION_RETRY_CAP_S", default=600.0),
    # The sweep restores a task's missing execution or review request at most this many
    # times; then the task fails (or its review goes to a person) with the reason.
    "LIVENESS_MAX_REPAIRS": env.int("MARKUS_LIVENESS_MAX_REPAIRS", default=5),
    # A bearer token that may read /metrics (besides staff users and loopback callers).
    "METRICS_TOKEN": env.str("MARKUS_METRICS_TOKEN", default=""),
    # Long-term memory in the system prompt: MEMORY.md's sections cut to this many
    # characters, and the observations that best match the item (at most this many).
    "LONGTERM_PROMPT_CHARS": env.int("MARKUS_LONGTERM_PROMPT_CHARS", default=3000),
    "LONGTERM_PROMPT_OBSERVATIONS": env.int("MARKUS_LONGTERM_PROMPT_OBSERVATIONS", default=5),
    # The dream cycle (checked by beat): an agent dreams when it has DREAM_MIN_OBSERVATIONS
    # new observations, once every DREAM_INTERVAL_HOURS, or every DREAM_BUSY_INTERVAL_HOURS
    # with DREAM_BUSY_OBSERVATIONS or more; at most DREAM_MAX_CONCURRENT agents at once.
    "DREAM_MIN_OBSERVATIONS": env.int("MARKUS_DREAM_MIN_OBSERVATIONS", default=50),
    "DREAM_BUSY_OBSERVATIONS": env.int("MARKUS_DREAM_BUSY_OBSERVATIONS", default=500),
    "DREAM_INTERVAL_HOURS": env.float("MARKUS_DREAM_INTERVAL_HOURS", default=24.0),
    "DREAM_BUSY_INTERVAL_HOURS": env.float("MARKUS_DREAM_BUSY_INTERVAL_HOURS", default=6.0),
    "DREAM_MAX_CONCURRENT": env.int("MARKUS_DREAM_MAX_CONCURRENT", default=3),
    # Usage and budgets (markus.usage): USD per million tokens by model name or prefix
    # ({"input", "output", "cachedInput"}), the defaults with MARKUS_PRICES (JSON of the
    # same shape) over them; past BUDGET_NEAR_SHARE of a budget heartbeats and dreams
    # are skipped.
    "PRICES": {**DEFAULT_PRICES, **env.json("MARKUS_PRICES", default={})},
    "BUDGET_NEAR_SHARE": env.float("MARKUS_BUDGET_NEAR_SHARE", default=0.9),
    # The default budget of a person without one of their own (it holds the agents they
    # own outside any team): tokens per day, USD per month; empty or 0: none.
    "BUDGET_PERSON_DAILY_TOKENS": int(env.str("MARKUS_BUDGET_PERSON_DAILY_TOKENS", default="") or 0),
    "BUDGET_PERSON_MONTHLY_COST": float(env.str("MARKUS_BUDGET_PERSON_MONTHLY_COST", default="") or 0),
    # Who may create agents: "owners" (staff, and team owners in a team they own or with
    # no team) or "anyone" (every signed-in person).
    "AGENTS_CREATE": env.str("MARKUS_AGENTS_CREATE", default="owners").strip().lower(),
    # Retention (markus.retention; beat hourly and `manage.py prune [--dry-run]`): finished
    # mailbox items with their decisions, activities, logs, tool calls and sessions after
    # ITEMS_DAYS; item-less activities and ended LLM sessions after their own days; bus
    # chunks every recipient's cursor has passed and relayed outbox rows after 7 days;
    # audit rows after 90. 0 keeps a kind for ever. Each delete takes BATCH_SIZE rows.
    "RETENTION": {
        "ENABLED": env.bool("MARKUS_RETENTION_ENABLED", default=True),
        "ITEMS_DAYS": env.float("MARKUS_RETENTION_ITEMS_DAYS", default=30.0),
        "ACTIVITIES_DAYS": env.float("MARKUS_RETENTION_ACTIVITIES_DAYS", default=30.0),
        "SESSIONS_DAYS": env.float("MARKUS_RETENTION_SESSIONS_DAYS", default=30.0),
        "CHUNKS_DAYS": env.float("MARKUS_RETENTION_CHUNKS_DAYS", default=7.0),
        "OUTBOX_DAYS": env.float("MARKUS_RETENTION_OUTBOX_DAYS", default=7.0),
        "AUDIT_DAYS": env.float("MARKUS_RETENTION_AUDIT_DAYS", default=90.0),
        "BATCH_SIZE": env.int("MARKUS_RETENTION_BATCH_SIZE", default=1000),
    },
}

# Every 5xx is logged with its traceback, in every mode (ARCHITECTURE decision 12). The
# console is the process's own stderr (sys.__stderr__): the embedded Celery worker of
# `manage.py up` replaces sys.stderr with a proxy that logs to the root logger, and
# Celery's Django fix-up then configures logging again, which left the root handler
# writing into that proxy, where every record vanished.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler", "stream": "ext://sys.__stderr__"}},
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
}
