"""docs/operations.md stays true: its Prometheus configuration and alerts parse, every metric they and the
metrics table name is one toolhub serves, every toolhub metric is in the table, and every variable it lists is
read by toolhub."""

import re
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

from tools_app.kernel import telemetry  # noqa: F401  (registers the metrics)

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "operations.md").read_text()
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def families() -> set[str]:
    return {family.name for family in REGISTRY.collect() if family.name.startswith("toolhub_")}


def base_name(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in families():
            return name[: -len(suffix)]
    return name


def yaml_blocks() -> list[dict]:
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", DOC, re.S)]


def test_the_scrape_config_and_the_alerts_parse():
    scrape, alerts = yaml_blocks()
    assert [job["job_name"] for job in scrape["scrape_configs"]] == ["toolhub", "toolhub-ready"]
    assert scrape["scrape_configs"][0]["metrics_path"] == "/metrics"
    assert scrape["scrape_configs"][0]["authorization"]["type"] == "Bearer"
    rules = alerts["groups"][0]["rules"]
    assert [rule["alert"] for rule in rules] == [
        "ToolhubToolCallErrors",
        "ToolhubSlowToolCalls",
        "ToolhubNotReady",
        "ToolhubRateLimited",
    ]


def test_every_metric_the_doc_names_is_served_and_every_served_one_is_documented():
    named = {base_name(name) for name in re.findall(r"\btoolhub_[a-z_]+", DOC)}
    named -= {"toolhub_users", "toolhub_user"}  # not metrics
    named = {name for name in named if not name.startswith("toolhub_ready")}
    assert named - families() == set()
    table = set(re.findall(r"^\| `(toolhub_[a-z_]+)`", DOC, re.M))
    assert {base_name(name) for name in table} == families()


def test_every_variable_the_doc_lists_is_read_by_toolhub():
    paths = [
        "toolhub/settings.py",
        "tools_app/kernel/health.py",
        *(ROOT / "tools_app" / "kernel" / "telemetry").glob("*.py"),
    ]
    sources = "".join((ROOT / path).read_text() for path in paths)
    listed = re.findall(r"^\| `([A-Z_]+)`", DOC, re.M)
    assert "TOOLHUB_METRICS_TOKEN" in listed
    for variable in listed:
        assert variable in sources, variable
