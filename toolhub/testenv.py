"""pytest plugin loaded before Django is set up (`-p toolhub.testenv` in pyproject): test-only environment."""

import os

os.environ.setdefault("TOOLHUB_DEV", "true")
os.environ.setdefault("DJANGO_SECRET_KEY", "test-secret-key-not-for-production")
# Error bodies carry `request_id` in production; the suite compares whole error bodies, so it is off
# here (servers the tests start inherit this), and toolhub/tests/test_operations.py turns it on.
os.environ.setdefault("TOOLHUB_REQUEST_ID_IN_ERRORS", "false")
