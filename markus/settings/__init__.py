"""Settings, read from the environment (django-environ).

SQLite in WAL mode by default; PostgreSQL from DATABASE_URL. With REDIS_URL unset the
in-memory channel layer and the in-process (memory) Celery broker are used, which only
work when server, worker and beat share one process (`manage.py up`).
"""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent
env = environ.Env()

DATA_DIR = Path(env.str("MARKUS_DATA_DIR", default=str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = env.str("SECRET_KEY", default="markus-dev-insecure-key-change-me")
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=["http://127.0.0.1:8000", "http://localhost:8000"])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_htmx",
    "django_celery_beat",
    "markus.agents",
    "markus.work",
    "mailbox",
    "attention",
    "notifications",
    "agentbus",
    "markus",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
LOGIN_REDIRECT_URL = "/admin/"

# Bodies over this answer 413 (mapped in markus.core.api.exception_handler).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("MARKUS_MAX_BODY_BYTES", default=1024 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "markus.agents.auth.AgentTokenAuthentication",
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["markus.agents.auth.IsUserOrAgent"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "markus.core.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
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
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "markus.core.schema.document_plain_views",
        "agentbus.schema.document_async_views",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
}

REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "markus.core.channel_layer.ThreadSafeInMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    # The memory transport polls; its 1 s default would add up to a second to every
    # wake-up (and to every budget re-send of run_attention).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"polling_interval": 0.01}

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
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

MARKUS = {
    "LLM_PROVIDER": env.str("MARKUS_LLM_PROVIDER", default="offline"),
    "LLM_MODEL": env.str("MARKUS_LLM_MODEL", default=""),
    "LLM_BASE_URL": env.str("MARKUS_LLM_BASE_URL", default=""),
    "LLM_API_KEY": env.str("MARKUS_LLM_API_KEY", default=""),
    # Seconds a worker holds an agent's lease before it must renew it.
    "LEASE_SECONDS": env.float("MARKUS_LEASE_SECONDS", default=60.0),
    # Items one run_attention processes before it re-sends itself.
    "RUN_BUDGET_ITEMS": env.int("MARKUS_RUN_BUDGET_ITEMS", default=10),
    "COALESCE_WINDOW_MS": env.int("MARKUS_COALESCE_WINDOW_MS", default=200),
    "PREEMPT_RESUME_DELAY_S": env.float("MARKUS_PREEMPT_RESUME_DELAY_S", default=3.0),
    "SWEEP_SECONDS": env.float("MARKUS_SWEEP_SECONDS", default=15.0),
    # How long POST /api/agents/{id}/chat waits for the reply before answering 202.
    "CHAT_TIMEOUT_S": env.float("MARKUS_CHAT_TIMEOUT_S", default=120.0),
    # Send run_attention when an item is enqueued (tests that drive the loop by hand
    # turn it off; the sweep still finds the work).
    "WAKE_ON_ENQUEUE": env.bool("MARKUS_WAKE_ON_ENQUEUE", default=True),
    # Ask the LLM judge when the heuristics say "continue" at a yield point.
    "INTERRUPT_JUDGE": env.bool("MARKUS_INTERRUPT_JUDGE", default=True),
    # Let the brain choose among equal-priority items before processing (tier 1).
    "TRIAGE": env.bool("MARKUS_TRIAGE", default=True),
    # How long an item the triage deferred waits before it is due again.
    "TRIAGE_DEFER_SECONDS": env.float("MARKUS_TRIAGE_DEFER_SECONDS", default=300.0),
    # The fallback poll of an AgentBus wait when no channel-layer wake-up arrives.
    "AGENTBUS_POLL_SECONDS": env.float("MARKUS_AGENTBUS_POLL_SECONDS", default=5.0),
    # The modules whose @tool functions the loop offers to the LLM.
    "TOOL_MODULES": [
        "markus.tools.mailbox_tools",
        "markus.tools.memory_tools",
        "markus.tools.work_tools",
        "markus.tools.human_tools",
    ],
    # A task execution or review that ends without a verdict runs again after
    # BASE, 2×BASE, 4×BASE … seconds (at most CAP); after MAX retries the execution's
    # task fails, a review goes to a person.
    "EXECUTION_MAX_RETRIES": env.int("MARKUS_EXECUTION_MAX_RETRIES", default=3),
    "EXECUTION_RETRY_BASE_S": env.float("MARKUS_EXECUTION_RETRY_BASE_S", default=30.0),
    "EXECUTION_RETRY_CAP_S": env.float("MARKUS_EXECUTION_RETRY_CAP_S", default=600.0),
    # The sweep restores a task's missing execution or review request at most this many
    # times; then the task fails (or its review goes to a person) with the reason.
    "LIVENESS_MAX_REPAIRS": env.int("MARKUS_LIVENESS_MAX_REPAIRS", default=5),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
}
