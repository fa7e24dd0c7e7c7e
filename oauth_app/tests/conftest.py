"""Fixtures shared by the OAuth tests: an admin-registered client (`app`), a local HTTPS server of client
metadata documents (`documents`), and two instances serving a reader and a writer (`reader_writer`)."""

import pytest
from oauth2_provider.models import get_application_model

from oauth_app.tests.support import CALLBACK, DocumentServer, make_certificate


@pytest.fixture
def app(db):
    """A public client registered in the admin, with the authorization-code grant and CALLBACK."""
    application = get_application_model()
    return application.objects.create(
        name="Test client",
        client_type=application.CLIENT_PUBLIC,
        authorization_grant_type=application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=CALLBACK,
        client_secret="",
    )


@pytest.fixture
def documents(tmp_path, settings):
    """A local HTTPS server of client metadata documents, trusted by the settings (fetch timeout 1 s)."""
    cert_file, key_file = make_certificate(tmp_path)
    server = DocumentServer(cert_file, key_file)
    settings.TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS = [server.origin]
    settings.TOOLHUB_OAUTH_CIMD_CA_FILE = str(cert_file)
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 1}
    yield server
    server.stop()


@pytest.fixture
def reader_writer(owner, table, make_tool, instance, bind, make_instance):
    """The instance 'shop' serving `reader` (get_all_data) and `writer` (create); the instance 'other' serving
    `reader` only."""
    reader = make_tool(owner, name="reader", type="get_all_data", table=table)
    writer = make_tool(owner, name="writer", type="create", table=table)
    bind(instance, reader)
    bind(instance, writer)
    other = make_instance(owner, slug="other")
    bind(other, reader)
    return {"instance": instance, "other": other}
