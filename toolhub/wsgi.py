"""WSGI entry point (the admin and the API only; MCP endpoints need toolhub.asgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")

application = get_wsgi_application()
