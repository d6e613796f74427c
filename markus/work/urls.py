from __future__ import annotations

from django.urls import re_path

from . import api, history_api, requirements_api

ID = r"(?P<{}>[^/]+)"
TASK = ID.format("task_id")
REQ = ID.format("requirement_id")

# Collections and objects end with a slash, actions do not (CONTRACT); each also
# answers with the other spelling.
urlpatterns = [
    re_path(r"^api/tasks/?$", api.TaskListView.as_view()),
    re_path(rf"^api/tasks/{TASK}/?$", api.TaskDetailView.as_view()),
    re_path(rf"^api/tasks/{TASK}/transition/?$", api.TaskTransitionView.as_view()),
    re_path(rf"^api/tasks/{TASK}/retry/?$", api.TaskRetryView.as_view()),
    re_path(rf"^api/tasks/{TASK}/comments/?$", api.TaskCommentsView.as_view()),
    re_path(rf"^api/tasks/{TASK}/history/?$", history_api.TaskHistoryView.as_view()),
    re_path(r"^api/requirements/?$", requirements_api.RequirementListView.as_view()),
    re_path(rf"^api/requirements/{REQ}/?$", requirements_api.RequirementDetailView.as_view()),
    re_path(
        rf"^api/requirements/{REQ}/(?P<step>approve|reject|complete|cancel)/?$",
        requirements_api.RequirementStepView.as_view(),
    ),
    re_path(rf"^api/requirements/{REQ}/resubmit/?$", requirements_api.RequirementResubmitView.as_view()),
    re_path(rf"^api/requirements/{REQ}/comments/?$", requirements_api.RequirementCommentsView.as_view()),
    re_path(rf"^api/requirements/{REQ}/history/?$", history_api.RequirementHistoryView.as_view()),
]
