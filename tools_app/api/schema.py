"""OpenAPI details shared by every API view: the error shape and the statuses each operation can answer.

REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] points here, so the schema documents the single exception
handler's responses (tools_app.api.errors) next to each operation's success response.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

__all__ = ["ErrorSerializer", "TokenAuthenticationScheme", "ToolhubAutoSchema"]


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """`Authorization: Token <token>` (tools_app.api.authentication) as the schema's security scheme."""

    target_class = "tools_app.api.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'A token from POST /api/auth/token/, sent as "Token <token>".',
        }


class ErrorSerializer(serializers.Serializer):
    """Every failure has this shape; `fields` is present for validation errors only."""

    # SPEC §6: {"error": CODE, "message": text, "fields": {field: [messages]}}.

    error = serializers.CharField(help_text="A stable UPPER_SNAKE code, e.g. VALIDATION_ERROR, NOT_FOUND.")
    message = serializers.CharField(help_text="What went wrong, for people and models.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Validation errors only: {field: [messages]}.",
    )
    details = serializers.DictField(required=False, help_text="Extra data some codes carry (e.g. a tool error).")


class ToolhubAutoSchema(AutoSchema):
    """AutoSchema that adds the error responses of tools_app.api.errors to every operation."""

    def error_statuses(self) -> list[str]:
        statuses = ["400"]
        if self.view.permission_classes and not getattr(self.view, "public_schema_operation", False):
            statuses.append("401")
        # Detail paths, nested paths and pages past the end are all 404s.
        statuses.append("404")
        if self.method in ("POST", "PUT", "PATCH"):
            statuses.append("409")
        if self.view.throttle_classes:
            statuses.append("429")  # RATE_LIMITED, with Retry-After (docs/rate-limits.md)
        return statuses

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for code in self.error_statuses():
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code, direction=direction)
        return responses
