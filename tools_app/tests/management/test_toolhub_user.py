"""The toolhub_user command: a user who can use the admin, made in one command."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery-42"


def run(*args: str) -> str:
    out = StringIO()
    call_command("toolhub_user", *args, stdout=out)
    return out.getvalue()


@pytest.mark.usefixtures("login_lockout_off")
def test_created_user_logs_in_and_manages_its_own_objects(client, monkeypatch):
    """The new user is staff in "toolhub users": it logs in with the password and may add a table."""
    # given
    monkeypatch.setenv("TOOLHUB_USER_PASSWORD", PASSWORD)
    monkeypatch.delenv("PORT", raising=False)
    # when
    output = run("alice", "--email", "alice@example.com")
    # then
    assert output == (
        "Created staff user 'alice' in the group 'toolhub users'.\nLog in at http://127.0.0.1:8000/admin/\n"
    )
    alice = get_user_model().objects.get(username="alice")
    assert (alice.is_staff, alice.is_superuser, alice.email) == (True, False, "alice@example.com")
    assert [group.name for group in alice.groups.all()] == ["toolhub users"]
    assert client.login(username="alice", password=PASSWORD)
    assert client.get(reverse("admin:tools_app_table_add")).status_code == 200
    assert client.get(reverse("admin:auth_user_changelist")).status_code == 403


def test_existing_user_is_promoted_and_keeps_its_password(make_user, monkeypatch):
    """An existing non-staff user becomes staff in the group; without $TOOLHUB_USER_PASSWORD its password stays."""
    # given
    monkeypatch.delenv("TOOLHUB_USER_PASSWORD", raising=False)
    bob = make_user("bob", staff=False, password="bobs-own-pw-123")
    bob.groups.clear()
    # when
    output = run("bob")
    # then
    assert "Updated staff user 'bob' in the group 'toolhub users'." in output
    assert "Password unchanged (change it with `manage.py changepassword bob`)." in output
    bob.refresh_from_db()
    assert (bob.is_staff, [g.name for g in bob.groups.all()]) == (True, ["toolhub users"])
    assert bob.check_password("bobs-own-pw-123")


def test_superuser_option(monkeypatch):
    """--superuser makes a superuser (who sees every user's objects)."""
    # given
    monkeypatch.setenv("TOOLHUB_USER_PASSWORD", PASSWORD)
    # when
    output = run("root2", "--superuser")
    # then
    assert output.startswith("Created superuser 'root2'")
    assert get_user_model().objects.get(username="root2").is_superuser is True


def test_new_user_without_password_is_refused(monkeypatch):
    """Not in a terminal and no $TOOLHUB_USER_PASSWORD: a clear error, and no user is created."""
    # given
    monkeypatch.delenv("TOOLHUB_USER_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    # when
    with pytest.raises(CommandError) as error:
        run("carol")
    # then
    assert str(error.value) == "No password: set $TOOLHUB_USER_PASSWORD, or run the command in a terminal to type one."
    assert not get_user_model().objects.filter(username="carol").exists()


def test_weak_password_is_refused_with_the_reason(monkeypatch):
    """Django's password validators apply; the error says why and nothing is created."""
    # given
    monkeypatch.setenv("TOOLHUB_USER_PASSWORD", "12345")
    # when
    with pytest.raises(CommandError) as error:
        run("dave")
    # then
    assert str(error.value).startswith("The password is refused: This password is too short.")
    assert not get_user_model().objects.filter(username="dave").exists()


def test_password_is_asked_twice_in_a_terminal(monkeypatch):
    """In a terminal the password is typed twice; two different entries change nothing."""
    # given
    monkeypatch.delenv("TOOLHUB_USER_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    answers = iter([PASSWORD, PASSWORD, PASSWORD, "typo"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    # when
    run("erin")
    with pytest.raises(CommandError) as error:
        run("frank")
    # then
    assert get_user_model().objects.get(username="erin").check_password(PASSWORD)
    assert str(error.value) == "The passwords do not match; nothing was changed."
    assert not get_user_model().objects.filter(username="frank").exists()
