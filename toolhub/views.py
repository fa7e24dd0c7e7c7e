"""Project-level views: 404 answers that match the surface the client is talking to."""

from django.http import JsonResponse
from django.views import defaults


def page_not_found(request, exception=None):
    """A JSON error (SPEC §6 shape) under /api/, Django's page everywhere else."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": "NOT_FOUND", "message": f"No API endpoint at {request.path}. See /api/docs/."}, status=404
        )
    return defaults.page_not_found(request, exception)
