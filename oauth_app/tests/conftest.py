"""The OAuth tests' shared fixtures, defined with the tests that introduced them: an admin-registered client
(`app`), a local HTTPS server of client metadata documents (`documents`), an instance with tools (`served`)."""

from oauth_app.tests.test_oauth import app, documents, served

__all__ = ["app", "documents", "served"]
