"""The shape of a JSON value without its values (get_data_schema, SPEC §3.2)."""

from typing import Any

from tools_app.kernel.limits import SCHEMA_MAX_FIELDS, SCHEMA_MAX_SAMPLE_KEYS, SCHEMA_MAX_TEMPLATE_DEPTH


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _template(value: Any, depth: int = 0) -> Any:
    """A value with every scalar replaced by its type name; arrays show one item."""
    if isinstance(value, dict):
        if depth >= SCHEMA_MAX_TEMPLATE_DEPTH:
            return "object"
        return {key: _template(item, depth + 1) for key, item in list(value.items())[:SCHEMA_MAX_FIELDS]}
    if isinstance(value, list):
        if depth >= SCHEMA_MAX_TEMPLATE_DEPTH:
            return "array"
        return [_template(value[0], depth + 1)] if value else []
    return json_type(value)


def _type_name(kind: type) -> str:
    """json_type() for a Python type (subclasses included, tested in json_type's order)."""
    if kind is type(None):
        return "null"
    for base, name in _TYPE_ORDER:
        if issubclass(kind, base):
            return name
    return "object"


_TYPE_ORDER = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"))


def _fields(records: list[dict]) -> tuple[dict[str, list[str]], list[str]]:
    """Every key seen in `records` with the sorted types it holds (a union over all records), and the
    keys missing from at least one record.

    Records of one layout share (keys, value types); counting those layouts first keeps the Python
    work per distinct layout rather than per key of every record (100,000 records: ~250 -> ~50 ms).
    Layouts come in order of first appearance, so fields keep the order in which a scan meets them.
    """
    layouts: dict[tuple[tuple[str, ...], tuple[type, ...]], int] = {}
    for layout in zip(map(tuple, records), (tuple(map(type, record.values())) for record in records), strict=True):
        layouts[layout] = layouts.get(layout, 0) + 1
    seen: dict[str, set[str]] = {}
    present: dict[str, int] = {}
    names: dict[type, str] = {}
    for (keys, kinds), count in layouts.items():
        for key, kind in zip(keys, kinds, strict=True):
            types = seen.get(key)
            if types is None:
                if len(seen) >= SCHEMA_MAX_FIELDS:
                    continue
                types = seen[key] = set()
                present[key] = 0
            name = names.get(kind)
            if name is None:
                name = names[kind] = _type_name(kind)
            types.add(name)
            present[key] += count
    fields = {key: sorted(types) for key, types in seen.items()}
    return fields, sorted(key for key, count in present.items() if count < len(records))


def _collection(items: list[Any]) -> dict[str, Any]:
    types = sorted({_type_name(kind) for kind in set(map(type, items))})
    shape: dict[str, Any] = {"item_types": types}
    records = [item for item in items if isinstance(item, dict)]
    if records:
        fields, optional = _fields(records)
        shape["fields"] = fields
        # Template of the record with the most keys: the best single example of the layout.
        shape["item_template"] = _template(max(records[:1000], key=len))
        shape["optional_fields"] = optional
    elif items:
        shape["item_template"] = _template(items[0])
    return shape


def describe(value: Any) -> dict[str, Any]:
    """root_type, counts, keys with their types, and an item template: enough to write a query."""
    root_type = json_type(value)
    shape: dict[str, Any] = {"root_type": root_type}
    if isinstance(value, list):
        shape["item_count"] = len(value)
        shape.update(_collection(value))
    elif isinstance(value, dict):
        shape["key_count"] = len(value)
        values = list(value.values())
        if values and all(isinstance(item, dict) for item in values):
            # An object keyed by id (a catalog): describe its entries like the items of an array.
            shape["layout"] = "keyed_collection"
            shape["sample_keys"] = list(value)[:SCHEMA_MAX_SAMPLE_KEYS]
            shape.update(_collection(values))
        else:
            shape["layout"] = "record"
            shape["fields"] = {key: [json_type(item)] for key, item in list(value.items())[:SCHEMA_MAX_FIELDS]}
            shape["template"] = _template(value)
    return shape
