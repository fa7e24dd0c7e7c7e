"""Fixtures shared by the API tests."""

import pytest
from rest_framework.test import APIClient


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    """The OpenAPI schema that /api/schema/ serves, as JSON (read once per module)."""
    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()
