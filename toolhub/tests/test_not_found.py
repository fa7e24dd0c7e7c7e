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


@pytest.mark.django_db
def test_api_root_lists_the_resources(client):
    """GET /api/ links every resource, the token endpoint and the docs, as absolute URLs (no data: public)."""
    # when
    response = client.get("/api/")
    # then
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "tables": "http://testserver/api/tables/",
        "tools": "http://testserver/api/tools/",
        "mcp-instances": "http://testserver/api/mcp-instances/",
        "bindings": "http://testserver/api/bindings/",
        "calls": "http://testserver/api/calls/",
        "search": "http://testserver/api/search/",
        "auth-token": "http://testserver/api/auth/token/",
        "schema": "http://testserver/api/schema/",
        "docs": "http://testserver/api/docs/",
    }


@pytest.mark.django_db
def test_api_root_links_lead_somewhere(admin_client):
    """Every link of the root answers (a signed-in user gets 200, or 405 for the POST-only token endpoint)."""
    # given
    links = admin_client.get("/api/").json()
    # when
    statuses = {name: admin_client.get(url).status_code for name, url in links.items()}
    # then
    assert statuses == {name: 405 if name == "auth-token" else 400 if name == "search" else 200 for name in links}


@pytest.mark.django_db
def test_api_root_is_a_405_for_writes(client):
    """The root is read-only."""
    response = client.post("/api/", {}, content_type="application/json")
    assert response.status_code == 405
    assert response.json() == {"error": "METHOD_NOT_ALLOWED", "message": 'Method "POST" not allowed.'}


@pytest.mark.django_db
def test_favicon_is_served(client):
    """/favicon.ico, which browsers fetch on every admin page, leads to toolhub's icon instead of a 404."""
    # when
    response = client.get("/favicon.ico", follow=True)
    # then
    assert response.redirect_chain == [("/static/toolhub/favicon.svg", 302)]
    assert (response.status_code, response["Content-Type"]) == (200, "image/svg+xml")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body.startswith(b'<svg xmlns="http://www.w3.org/2000/svg"')
