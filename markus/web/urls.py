from __future__ import annotations

from django.urls import path, re_path

from . import agent_settings, chat_pages, connect_pages, team_pages, usage_pages, views, work_pages

urlpatterns = [
    path("agents/<str:agent_id>/mind/", views.mind_view, name="mind"),
    path("agents/<str:agent_id>/mind/timeline/", views.mind_timeline, name="mind-timeline"),
    re_path(
        r"^agents/(?P<agent_id>[^/]+)/mind/(?P<action>pause|resume|wake|heartbeat-now)/$",
        views.mind_control,
        name="mind-control",
    ),
    re_path(
        r"^agents/(?P<agent_id>[^/]+)/mind/items/(?P<item_id>[^/]+)/(?P<action>retry|drop)/$",
        views.mind_item_control,
        name="mind-item-control",
    ),
    path(
        "agents/<str:agent_id>/mind/reminders/<str:item_id>/cancel/",
        views.mind_reminder_cancel,
        name="mind-reminder-cancel",
    ),
    re_path(
        r"^agents/(?P<agent_id>[^/]+)/reports/(?P<day>\d{4}-\d{2}-\d{2})/$", views.agent_report, name="agent-report"
    ),
    path(
        "agents/<str:agent_id>/mind/activities/<str:activity_id>/logs/",
        views.mind_activity_logs,
        name="mind-activity-logs",
    ),
    # The work pages (``/work`` itself is routed beside home: notification links say ``/work?task=…``).
    path("work/tasks/new/", work_pages.task_new, name="work-task-new"),
    path("work/tasks/<str:task_id>/move/", work_pages.task_move, name="work-task-move"),
    path("work/tasks/<str:task_id>/comments/", work_pages.task_comment, name="work-task-comment"),
    path("work/requirements/new/", work_pages.requirement_new, name="work-requirement-new"),
    re_path(
        r"^work/requirements/(?P<requirement_id>[^/]+)/(?P<step>approve|reject|complete|cancel)/$",
        work_pages.requirement_step,
        name="work-requirement-step",
    ),
    path(
        "work/requirements/<str:requirement_id>/comments/",
        work_pages.requirement_comment,
        name="work-requirement-comment",
    ),
    path("approvals/", work_pages.approvals_page, name="approvals"),
    path("approvals/<str:approval_id>/answer/", work_pages.approval_answer, name="approval-answer"),
    # An agent's chat page: its sessions, the history, new messages live.
    path("agents/<str:agent_id>/chat/", chat_pages.chat_page, name="chat"),
    path("agents/<str:agent_id>/chat/messages/", chat_pages.chat_messages, name="chat-messages"),
    path("agents/<str:agent_id>/chat/sessions/new/", chat_pages.chat_session_new, name="chat-session-new"),
    # Connecting an outside agent: add one, then its configuration and its token.
    path("agents/new/", connect_pages.agent_new, name="agent-new"),
    path("agents/<str:agent_id>/connect/", connect_pages.agent_connect, name="agent-connect"),
    path("agents/<str:agent_id>/connect/rotate/", connect_pages.agent_token_rotate_page, name="agent-token-rotate"),
    path("agents/<str:agent_id>/connect/revoke/", connect_pages.agent_token_revoke_page, name="agent-token-revoke"),
    # Usage per day and model with its charts and budgets; an agent's settings.
    path("agents/<str:agent_id>/usage/", usage_pages.agent_usage, name="agent-usage"),
    path("teams/<str:team_id>/usage/", usage_pages.team_usage, name="team-usage"),
    path("usage/", usage_pages.deployment_usage, name="deployment-usage"),
    path("agents/<str:agent_id>/settings/", agent_settings.agent_settings, name="agent-settings"),
    # The teams and their group channels (``group:<teamId>``): read by the team's people.
    path("teams/", team_pages.teams_page, name="teams"),
    path("teams/<str:team_id>/channel/", team_pages.team_channel_page, name="team-channel"),
    path("teams/<str:team_id>/channel/messages/", team_pages.team_channel_messages, name="team-channel-messages"),
]
