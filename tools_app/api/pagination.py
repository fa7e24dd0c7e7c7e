"""Page-number pagination (SPEC §6): `{"count", "next", "previous", "results"}` with ?page= and ?page_size=.

`page_size` is read strictly. DRF falls back to the default page size for a value it cannot read
(`null`, `true`, `abc`, `0`, `-5`), so a client with a typo silently got another page size; here such a value
is a 400 VALIDATION_ERROR naming `page_size`. A page size over the maximum is still clamped to it (the schema
says so). The schema's parameters come from the same numbers (get_schema_operation_parameters).
"""

from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination as DrfPageNumberPagination

__all__ = ["PageNumberPagination"]


class PageNumberPagination(DrfPageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    # Bounds the work one request can ask for; a larger page_size is clamped, not refused.
    max_page_size = 500

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size
        # ASCII digits only: int() would also read "+5", " 5", "٥" and "5_0".
        if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
            raise serializers.ValidationError(
                {self.page_size_query_param: [f"A whole number of at least 1 is required (got {raw[:50]!r})."]}
            )
        return min(int(raw), self.max_page_size)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
                parameter["description"] = "A page number, from 1. A page past the last one is a 404 NOT_FOUND."
            elif parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "default": self.page_size}
                parameter["allowEmptyValue"] = True  # empty: the default
                parameter["description"] = (
                    f"Results per page (default {self.page_size}); a larger value than {self.max_page_size} "
                    f"is clamped to {self.max_page_size}. Anything but a whole number of at least 1 is a 400."
                )
        return parameters
