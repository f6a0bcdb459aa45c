"""Not-found and not-allowed pages keep the site's layout and say what to do next."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User


@pytest.mark.django_db
def test_not_found_page_has_the_navigation_and_a_way_back(client, settings):
    settings.DEBUG = False
    client.force_login(User.objects.create_user("tech", password="x"))
    response = client.get("/tickets/999999/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "Not found" in page and "Back to the tickets" in page and 'href="/fabrics/"' in page
