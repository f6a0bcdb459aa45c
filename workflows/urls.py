"""The ticket UI, mounted at the site root (the root redirects to /tickets/)."""

from django.urls import path

from . import learning_views, views

app_name = "workflows"

urlpatterns = [
    path("tickets/", views.ticket_list_view, name="ticket-list"),
    path("tickets/new/", views.ticket_new_view, name="ticket-new"),
    path("tickets/new/<slug:type_>/", views.ticket_create_view, name="ticket-create"),
    path("tickets/<int:pk>/", views.ticket_detail_view, name="ticket-detail"),
    path("tickets/<int:pk>/live/", views.ticket_live_view, name="ticket-live"),
    path("tickets/<int:pk>/edit/", views.ticket_edit_view, name="ticket-edit"),
    path("tickets/<int:pk>/transitions/<slug:name>/", views.ticket_transition_view, name="ticket-transition"),
    path("tickets/<int:pk>/approve/", views.ticket_approve_view, name="ticket-approve"),
    path("tickets/<int:pk>/comments/", views.ticket_comment_view, name="ticket-comment"),
    path("tickets/<int:pk>/pause/", views.ticket_pause_view, name="ticket-pause"),
    path("tickets/<int:pk>/resume/", views.ticket_resume_view, name="ticket-resume"),
    path("tickets/<int:pk>/watch/", views.ticket_watch_view, name="ticket-watch"),
    path("tickets/<int:pk>/assign/", views.ticket_assign_view, name="ticket-assign"),
    path("tickets/<int:pk>/runs/<uuid:run_id>/retry/", views.run_retry_view, name="run-retry"),
    path("tickets/<int:pk>/postmortem/", learning_views.postmortem_save_view, name="ticket-postmortem"),
    path("tickets/<int:pk>/postmortem.md", learning_views.postmortem_markdown_view, name="ticket-postmortem-markdown"),
    path(
        "tickets/<int:pk>/postmortem/actions/", learning_views.postmortem_action_view, name="ticket-postmortem-action"
    ),
    path("tickets/<int:pk>/emergency-approval/", learning_views.emergency_approval_view, name="ticket-emergency"),
]
