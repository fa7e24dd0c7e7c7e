"""Create the demo user, tables, tools, an instance with bindings, and print a fresh API key. Idempotent.

Through the services, as every write.
"""

import os

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from tools_app import services
from tools_app.kernel.limits import DEV, PUBLIC_URL
from tools_app.models import ApiKey, Binding, McpInstance, Prompt, Table, Tool

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password"
DEMO_SLUG = "demo"

ORDERS = [
    {"id": 1, "customer": "Ada Lovelace", "status": "paid", "total": 120.5, "items": [{"sku": "KB-01", "qty": 1}]},
    {"id": 2, "customer": "Alan Turing", "status": "shipped", "total": 89.0, "items": [{"sku": "MS-02", "qty": 2}]},
    {"id": 3, "customer": "Grace Hopper", "status": "new", "total": 42.0, "items": [{"sku": "CB-03", "qty": 3}]},
    {"id": 4, "customer": "Ada Lovelace", "status": "shipped", "total": 15.25, "items": [{"sku": "CB-03", "qty": 1}]},
    {"id": 5, "customer": "Edsger Dijkstra", "status": "cancelled", "total": 230.0, "items": []},
]
CATALOG = {
    "products": {
        "KB-01": {"name": "Mechanical keyboard", "price": 120.5, "stock": 14, "tags": ["input", "usb"]},
        "MS-02": {"name": "Wireless mouse", "price": 44.5, "stock": 31, "tags": ["input", "wireless"]},
        "CB-03": {"name": "USB-C cable", "price": 14.0, "stock": 250, "tags": ["cable", "usb"]},
    }
}

ORDER_TOOLS = [
    ("orders_schema", "get_data_schema", "Describe the shape of the orders table: fields, types, item count.", {}),
    ("orders_all", "get_all_data", "Return every order (id, customer, status, total, items).", {}),
    (
        "orders_query",
        "query_data",
        'Run a JMESPath query over the orders, e.g. "[?status==\'shipped\'].id" or "length(@)".',
        {
            "examples": ["orders_query(query=\"[?status=='paid'].{id: id, total: total}\")"],
            "tags": ["orders", "jmespath"],
        },
    ),
    (
        "orders_preview",
        "preview",
        "Preview orders with only id, customer and status; supports limit and offset.",
        {"preview_keys": ["id", "customer", "status"], "tags": ["orders"]},
    ),
    ("orders_select", "select", "Fetch full orders by id, e.g. keys=[1, 3].", {"tags": ["orders"]}),
    ("orders_create", "create", "Add new orders; each needs a unique integer id.", {"tags": ["orders"]}),
    ("orders_update", "update", "Change orders: give the id and the fields to change (JSON Merge Patch).", {}),
    ("orders_delete", "delete", "Delete orders by id.", {}),
]
CATALOG_TOOLS = [
    ("catalog_schema", "get_data_schema", "Describe the product catalog (an object keyed by SKU).", {}),
    ("catalog_select", "select", 'Fetch products by SKU, e.g. keys=["KB-01"].', {"tags": ["catalog"]}),
    (
        "catalog_preview",
        "preview",
        "Preview products with name and price only.",
        {"preview_keys": ["name", "price"], "tags": ["catalog"]},
    ),
    ("catalog_create", "create", "Add products as {key: SKU, content: {...}} pairs.", {"tags": ["catalog"]}),
    ("catalog_update", "update", "Change products: {key: SKU, content: {fields to change}}.", {"tags": ["catalog"]}),
]

# The registry (SPEC §5) over the demo's own tools: an agent can search them, read a definition, browse the
# categories and get the Markdown usage guide.
REGISTRY_TOOLS = [
    ("find_tools", "search_tools", "Search the shop's tools by what they do (regex, bm25, embedding, hybrid).", {}),
    ("tool_definition", "get_tool_definition", "Full definition of one tool: parameters, examples, returns.", {}),
    ("tools_by_category", "list_tools_by_category", "List the shop's tools of a category, or 'all' categories.", {}),
    ("tool_guide", "get_tool_usage_guide", "A Markdown guide to the shop's tools, grouped by category.", {}),
]


PRODUCTION_REFUSAL = (
    "seed_demo refused: DJANGO_DEBUG and TOOLHUB_DEV are both off, so this looks like a production "
    "database, and the demo adds a staff user with a known password and a working API key. For "
    "development run it with TOOLHUB_DEV=true; to seed this database anyway, add --force."
)


def is_development() -> bool:
    """Development settings: DEBUG or TOOLHUB_DEV (what scripts/start.sh sets)."""
    return bool(settings.DEBUG or DEV.get())


class Command(BaseCommand):
    help = "Create demo data (user 'demo', tables, tools, an instance) and print a fresh API key. Idempotent."

    def add_arguments(self, parser):
        parser.add_argument("--password", default=os.environ.get("TOOLHUB_DEMO_PASSWORD", DEMO_PASSWORD))
        parser.add_argument("--no-key", action="store_true", help="Do not issue a new API key.")
        parser.add_argument(
            "--key-file",
            help="Keep the demo key across runs (scripts/start.sh): print the key stored in this file while it is "
            "a working key of the demo instance in this database; otherwise issue a new one and store it there.",
        )
        parser.add_argument(
            "--force", action="store_true", help="Run even with DJANGO_DEBUG and TOOLHUB_DEV off (production)."
        )

    def handle(self, *args, **options):
        # A demo user with a known password must not land in production by accident.
        if not (is_development() or options["force"]):
            raise CommandError(PRODUCTION_REFUSAL, returncode=1)
        self.seed(options)

    @transaction.atomic
    def seed(self, options):
        User = get_user_model()
        # A staff user of the "toolhub users" group (made by mcp_app's migrations), not a superuser: the demo
        # shows the admin as an owner sees it, scoped to the owner's own objects.
        user, created = User.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "email": "demo@example.com"}
        )
        if created:
            user.set_password(options["password"])
            user.save()
        user.groups.add(Group.objects.get(name="toolhub users"))

        orders = Table.objects.filter(owner=user, name="orders").first() or services.table_create(
            owner=user, name="orders", description="Customer orders: an array of records keyed by id.", data=ORDERS
        )
        catalog = Table.objects.filter(owner=user, name="catalog").first() or services.table_create(
            owner=user, name="catalog", description="Products: an object keyed by SKU.", data=CATALOG
        )
        tools = []
        for table, json_path, specs, key_field in (
            (orders, "", ORDER_TOOLS, "id"),
            (catalog, "/products", CATALOG_TOOLS, None),
            (None, "", REGISTRY_TOOLS, None),
        ):
            for name, tool_type, description, metadata in specs:
                tool = Tool.objects.filter(owner=user, name=name).first()
                if tool is None:
                    meta = dict(metadata)
                    if key_field:
                        meta.setdefault("key_field", key_field)
                    tool = services.tool_create(
                        owner=user,
                        name=name,
                        type=tool_type,
                        table=table,
                        json_path=json_path,
                        description=description,
                        metadata=meta,
                    )
                tools.append(tool)

        instance = demo_instance(user)
        for tool in tools:
            if not Binding.objects.filter(mcp_instance=instance, tool=tool).exists():
                services.binding_create(mcp_instance=instance, tool=tool)
        if not Prompt.objects.filter(mcp_instance=instance, name=DEMO_PROMPT["name"]).exists():
            services.prompt_create(mcp_instance=instance, **DEMO_PROMPT)

        # What a client of the instance gets: its enabled bindings, the demo's and any added since (a generated
        # table's tools), not only the demo's own.
        served = instance.bindings.filter(enabled=True).count()
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo data ready: instance '{instance.slug}' serves {served} tools ({len(tools)} of them the demo's)."
            )
        )
        if instance.slug != DEMO_SLUG:
            self.stdout.write(
                f"The slug '{DEMO_SLUG}' belongs to another user's instance: the demo instance is '{instance.slug}'."
            )
        self.stdout.write(f"Admin login: {DEMO_USERNAME} / {options['password'] if created else '(unchanged)'}")
        self.stdout.write(f"MCP endpoint: {public_base_url()}{instance.endpoint_path}")
        if options["key_file"]:
            plaintext = kept_key(instance, options["key_file"])
            if plaintext is not None:
                self.stdout.write(f"API key (kept from {options['key_file']}): {plaintext}")
                return
        if not options["no_key"]:
            _, plaintext = services.api_key_issue(mcp_instance=instance, label="demo key", via="seed_demo command")
            if options["key_file"]:
                store_key(options["key_file"], plaintext)
                self.stdout.write(f"API key (new; kept in {options['key_file']} for the next runs): {plaintext}")
            else:
                self.stdout.write(f"API key (shown once): {plaintext}")


# An owner's prompt, served over MCP beside usage_guide.
DEMO_PROMPT = {
    "name": "customer_report",
    "title": "Report on one customer",
    "description": "Asks for a short report on one customer's orders, using the demo's tools.",
    "arguments": [{"name": "customer", "description": "The customer's name, e.g. Ada.", "required": True}],
    "template": "Using orders_schema and orders_query, write a short report on the orders of {{customer}}: how "
    "many, their total, and which are not shipped yet.",
}


def kept_key(instance: McpInstance, path: str) -> str | None:
    """The key stored in `path` if it is a working (unrevoked) key of `instance`: a fresh database, or a revoked
    key, gets a new one."""
    try:
        with open(path, encoding="utf-8") as file:
            plaintext = file.read().strip()
    except OSError:
        return None
    if not ApiKey.is_well_formed(plaintext):
        return None
    works = ApiKey.objects.filter(
        mcp_instance=instance, key_hash=ApiKey.hash_key(plaintext), revoked_at__isnull=True
    ).exists()
    return plaintext if works else None


def store_key(path: str, plaintext: str) -> None:
    """Write the key readable by its owner only (like .dev-secret-key)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(plaintext + "\n")


def demo_instance(user) -> McpInstance:
    """The demo user's instance: its own 'demo', else its own 'demo-N', else one created on the first free slug.

    Another user's instance is never touched: when someone else owns 'demo' the demo gets 'demo-2' (or the
    next free one), and later runs find it again (idempotent).
    """
    candidates = [DEMO_SLUG] + [f"{DEMO_SLUG}-{n}" for n in range(2, 100)]
    taken = dict(McpInstance.objects.filter(slug__in=candidates).values_list("slug", "owner_id"))
    own = next((slug for slug in candidates if taken.get(slug) == user.pk), None)
    if own is not None:
        return McpInstance.objects.get(slug=own)
    free = next((slug for slug in candidates if slug not in taken), None)
    if free is None:
        raise CommandError(f"The slugs {DEMO_SLUG} to {candidates[-1]} all belong to other users' instances.")
    return services.instance_create(
        owner=user,
        name="Demo shop",
        slug=free,
        description="Orders and catalog of a small shop.",
        instructions="Use orders_schema first to learn the fields, then orders_query for questions.",
    )


def public_base_url() -> str:
    """Where toolhub is reached: TOOLHUB_PUBLIC_URL, else where scripts/start.sh serves (127.0.0.1, $PORT)."""
    return PUBLIC_URL.get().rstrip("/") or f"http://127.0.0.1:{os.environ.get('PORT') or 8000}"
