"""manage.py toolhub_setup export|plan|apply --owner NAME [FILE] (docs/setup.md)

export writes a user's setup (or one instance's, --instance SLUG) as a JSON or YAML document (--data: the tables'
data too; API keys never); plan prints what applying a document would change; apply makes the user's setup what
the document says, all or nothing (--force: also delete or break what is in use). A bad document is reported with
the fields at fault and exits non-zero, writing nothing.
"""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tools_app.kernel.errors import ToolhubError
from tools_app.models import McpInstance
from tools_app.services import setup


class Command(BaseCommand):
    help = "Export, plan or apply a user's setup (tables, tools, instances, bindings, prompts) as one document."

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # `plan --owner x FILE` as well as `plan FILE --owner x`: plain parse_args takes the optional FILE as
        # absent when an option comes between the positionals.
        parser.parse_args = parser.parse_intermixed_args  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["export", "plan", "apply"])
        parser.add_argument("file", nargs="?", help="plan/apply: the document (JSON or YAML); '-' reads stdin.")
        parser.add_argument("--owner", required=True, help="Username whose setup it is.")
        parser.add_argument("--instance", help="export: only this instance (its slug), with what it uses.")
        parser.add_argument("--data", action="store_true", help="export: the tables' data too.")
        parser.add_argument("--format", choices=["json", "yaml"], default="json", help="export: the format.")
        parser.add_argument("--output", help="export: write here instead of standard output.")
        parser.add_argument("--force", action="store_true", help="apply: also delete or break what is in use.")

    def handle(self, *args, action, file, owner, instance, data, format, output, force, **options):  # noqa: A002
        user = get_user_model().objects.filter(username=owner).first()
        if user is None:
            raise CommandError(f"No user named {owner!r}.")
        try:
            if action == "export":
                self._export(user, instance, data, format, output)
                return
            if not file:
                raise CommandError(f"{action} needs the document's file.")
            text = self.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
            document = setup.setup_document_load(text)
            if action == "plan":
                changes = setup.setup_plan(owner=user, document=document)
            else:
                changes = setup.setup_apply(owner=user, document=document, force=force)
        except ValidationError as exc:
            problems = [f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()]
            raise CommandError("The document is refused, nothing was written:\n" + "\n".join(problems)) from exc
        except ToolhubError as exc:
            raise CommandError(f"{exc}\n(--force to go on)") from exc
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc}") from exc
        for change in changes:
            self.stdout.write(str(change))
        if not changes:
            self.stdout.write("No changes.")
        elif action == "apply":
            self.stdout.write(f"{len(changes)} change{'s' if len(changes) != 1 else ''} applied.")

    def _export(self, user, instance, data, fmt, output) -> None:
        try:
            document = setup.setup_export(owner=user, instance_slug=instance, with_data=data)
        except McpInstance.DoesNotExist as exc:
            raise CommandError(f"{user.username} has no instance with the slug {instance!r}.") from exc
        text = setup.setup_document_dump(document, fmt)
        if output:
            Path(output).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")
