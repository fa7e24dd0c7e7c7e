"""manage.py tool_docs import|export --user NAME [--dir PATH] [--dry-run]

Imports or exports a user's tool descriptions and examples as tool_descriptions.yaml and
tool_examples.yaml (SPEC §5, seed 000). An import reports missing files, broken YAML, unknown tool
names and invalid examples, applies everything else, and exits non-zero when anything was reported.
"""

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from tools_app.registry.yaml_docs import DESCRIPTIONS_FILE, EXAMPLES_FILE, export_yaml, import_docs


class Command(BaseCommand):
    help = "Import or export tool descriptions and examples (tool_descriptions.yaml, tool_examples.yaml)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["import", "export"])
        parser.add_argument("--user", required=True, help="Username whose tools are documented.")
        parser.add_argument("--dir", default=".", help="Folder holding (or receiving) the two YAML files.")
        parser.add_argument("--dry-run", action="store_true", help="Import: validate and report, write nothing.")

    def handle(self, *args, action, user, dir, dry_run, **options):  # noqa: A002 (the option's name)
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"No user named {user!r}.")
        directory = Path(dir)
        if action == "export":
            directory.mkdir(parents=True, exist_ok=True)
            descriptions, examples = export_yaml(owner=owner)
            (directory / DESCRIPTIONS_FILE).write_text(descriptions, encoding="utf-8")
            (directory / EXAMPLES_FILE).write_text(examples, encoding="utf-8")
            self.stdout.write(f"Wrote {directory / DESCRIPTIONS_FILE} and {directory / EXAMPLES_FILE}.")
            return
        report = import_docs(owner=owner, directory=directory, dry_run=dry_run)
        verb = "would update" if dry_run else "updated"
        for problem in report.problems:
            self.stderr.write(f"problem: {problem}")
        self.stdout.write(
            f"{verb} {report.descriptions_updated} description(s) and {report.examples_updated} example list(s); "
            f"{len(report.problems)} problem(s)."
        )
        if report.problems:
            outcome = "checked (dry run, nothing written)" if dry_run else "applied"
            raise CommandError(f"{len(report.problems)} problem(s) reported; everything else was {outcome}.")
