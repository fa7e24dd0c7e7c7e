"""Page-number pagination (SPEC §6): `{"count", "next", "previous", "results"}` with ?page= and ?page_size=."""

from rest_framework.pagination import PageNumberPagination as DrfPageNumberPagination

__all__ = ["PageNumberPagination"]


class PageNumberPagination(DrfPageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    # Bounds the work one request can ask for; a larger page_size is clamped, not refused.
    max_page_size = 500
