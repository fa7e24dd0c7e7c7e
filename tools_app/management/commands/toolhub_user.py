"""Create (or promote) a user who can use the admin: staff, in the group `toolhub users` (SPEC §8).

In mcp_app because the group is created by mcp_app's migration 0002 and holds both apps' permissions.
Such a user manages its own tables, tools and instances; --superuser makes one who sees everyone's.
"""

import getpass
import os
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from tools_app.management.commands.seed_demo import public_base_url

GROUP = "toolhub users"
PASSWORD_ENV = "TOOLHUB_USER_PASSWORD"


class Command(BaseCommand):
    help = (
        f"Create a staff user in the group '{GROUP}' (or promote an existing one), who can log in to the admin "
        f"and manage its own objects. The password comes from ${PASSWORD_ENV} or is asked for."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", default="", help="The user's email address.")
        parser.add_argument("--superuser", action="store_true", help="Make a superuser: sees every user's objects.")

    @transaction.atomic
    def handle(self, *args, username, email, superuser, **options):
        group = Group.objects.filter(name=GROUP).first()
        if group is None:
            raise CommandError(f"The group '{GROUP}' does not exist: run `manage.py migrate` first.")
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        created = user is None
        if created:
            user = User(username=username, email=email)
        elif email:
            user.email = email
        user.is_staff = True
        user.is_active = True
        user.is_superuser = user.is_superuser or superuser
        password = os.environ.get(PASSWORD_ENV) or (self.ask_password(user) if created else None)
        if password is not None:
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise CommandError("The password is refused: " + " ".join(exc.messages)) from exc
            user.set_password(password)
        user.save()
        user.groups.add(group)

        role = "superuser" if user.is_superuser else "staff user"
        self.stdout.write(
            self.style.SUCCESS(f"{'Created' if created else 'Updated'} {role} '{username}' in the group '{GROUP}'.")
        )
        if password is None:
            self.stdout.write(f"Password unchanged (change it with `manage.py changepassword {username}`).")
        self.stdout.write(f"Log in at {public_base_url()}/admin/")

    def ask_password(self, user) -> str:
        if not sys.stdin.isatty():
            raise CommandError(f"No password: set ${PASSWORD_ENV}, or run the command in a terminal to type one.")
        first = getpass.getpass(f"Password for {user.username}: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("The passwords do not match; nothing was changed.")
        return first
