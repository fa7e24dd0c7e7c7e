"""Unknown URLs answer in the shape of their surface."""

import pytest


@pytest.mark.django_db
def test_unknown_api_path_is_a_json_404(client):
    """An unmatched /api/ URL gets the API's error shape, not an HTML page."""
    # when
    response = client.get("/api/nope/")
    # then
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "NOT_FOUND", "message": "No API endpoint at /api/nope/. See /api/docs/."}


@pytest.mark.django_db
def test_unknown_page_outside_the_api_is_html(client):
    """Outside /api/ the 404 stays Django's page."""
    # when
    response = client.get("/no-such-page/")
    # then
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
