"""The change guard: a delete, rename or breaking schema change of something in use needs a confirmation.

"In use" is the selector's (tools_app.selectors.usage_of): bound and enabled on an enabled instance, or called
in the last TOOLHUB_IN_USE_DAYS days. The services ask it under their row locks and refuse with IN_USE (409 on
the API, `details.used_by` listing the instances, tool names and clients) unless the caller confirmed with
`force=True` (the API's `?force=true`, the admin's confirmation checkbox, an applied setup plan's `force`).
"""

from collections.abc import Iterable
from typing import Any

from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.kernel.limits import IN_USE_MAX_LISTED
from tools_app.selectors import UsedBy

__all__ = ["in_use_error", "named", "refuse_if_in_use"]


def named(kind: str, ids: list[int], names: Iterable[str]) -> str:
    """ "The tool 'a'", or "3 tools ('a', 'b', 'c')": the subject of an IN_USE message."""
    shown = [repr(name) for name in list(names)[:3]]
    if len(ids) == 1 and shown:
        return f"The {kind} {shown[0]}"
    return f"{len(ids)} {kind}s ({', '.join(shown)}{', …' if len(ids) > 3 else ''})"


def in_use_error(what: str, change: str, used_by: list[UsedBy]) -> ToolhubError:
    """IN_USE naming what breaks: `what` ("The tool 'orders_query'") `change` ("would be deleted")."""
    shown = "; ".join(str(used) for used in used_by[:5])
    more = f"; and {len(used_by) - 5} more" if len(used_by) > 5 else ""
    details: dict[str, Any] = {"used_by": [used.as_dict() for used in used_by[:IN_USE_MAX_LISTED]]}
    if len(used_by) > IN_USE_MAX_LISTED:
        details["more"] = len(used_by) - IN_USE_MAX_LISTED
    return ToolhubError(
        ErrorCode.IN_USE,
        f"{what} is in use and {change}: {shown}{more}. Clients that use it would break; nothing was changed. "
        "Confirm to go on (the API's ?force=true).",
        details,
    )


def refuse_if_in_use(used_by: list[UsedBy], *, what: str, change: str, force: bool) -> None:
    """Raise IN_USE (in_use_error) when `used_by` is not empty and the change was not confirmed (`force`)."""
    if used_by and not force:
        raise in_use_error(what, change, used_by)
