"""pytest plugin loaded before Django is set up (`-p toolhub.testenv` in pyproject): test-only environment."""

import os

os.environ.setdefault("TOOLHUB_DEV", "true")
os.environ.setdefault("DJANGO_SECRET_KEY", "test-secret-key-not-for-production")
