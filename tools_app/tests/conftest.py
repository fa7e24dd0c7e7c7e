"""Fixtures shared by the tests of tools_app: the admin's test clients, logged in."""

import pytest


@pytest.fixture
def owner_client(client, owner):
    """Django's test client, logged in as `owner`."""
    client.force_login(owner)
    return client


@pytest.fixture
def other_client(client, other_user):
    """Django's test client, logged in as `other_user`."""
    client.force_login(other_user)
    return client
