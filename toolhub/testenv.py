"""pytest plugin loaded before Django is set up (`-p toolhub.testenv` in pyproject): test-only environment."""

import os
import tempfile

os.environ.setdefault("TOOLHUB_DEV", "true")
os.environ.setdefault("DJANGO_SECRET_KEY", "test-secret-key-not-for-production")
# Error bodies carry `request_id` in production; the suite compares whole error bodies, so it is off
# here (servers the tests start inherit this), and toolhub/tests/test_operations.py turns it on.
os.environ.setdefault("TOOLHUB_REQUEST_ID_IN_ERRORS", "false")
# Password-hashing slots are the machine's (toolhub/passwords.py): each test process (and the servers and
# scripts it starts, which inherit this) gets slots of its own, so that parallel test processes never take
# each other's. Set in every process, not defaulted: pytest-xdist's workers inherit their controller's
# environment, and sharing its directory made one worker's seeding script refused while another's server hashed.
os.environ["TOOLHUB_PASSWORD_HASH_LOCK_DIR"] = os.path.join(tempfile.gettempdir(), f"toolhub-test-hashes-{os.getpid()}")
