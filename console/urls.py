"""The console's pages, mounted at the site root. Each views module owns its routes."""

from .views import changes, dashboard, failures, groups, lifecycle, lists, network, objects, places, search

app_name = "console"

urlpatterns = [
    *dashboard.urlpatterns,
    *search.urlpatterns,
    *objects.urlpatterns,
    *places.urlpatterns,
    *network.urlpatterns,
    *groups.urlpatterns,
    *changes.urlpatterns,
    *failures.urlpatterns,
    *lifecycle.urlpatterns,
    *lists.urlpatterns,
]
