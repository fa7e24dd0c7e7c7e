"""Token generators for django-oauth-toolkit (OAUTH2_PROVIDER ACCESS_TOKEN_GENERATOR / REFRESH_TOKEN_GENERATOR).

oauthlib's random token, behind a prefix that tells an access token from an API key at a glance, so the MCP
endpoint refuses anything of another shape without a database lookup (tools_app.oauth).
"""

from oauthlib.common import generate_token

from tools_app.oauth import ACCESS_TOKEN_PREFIX, REFRESH_TOKEN_PREFIX, TOKEN_RANDOM_LENGTH


def access_token(request, *args, **kwargs) -> str:
    return ACCESS_TOKEN_PREFIX + generate_token(TOKEN_RANDOM_LENGTH)


def refresh_token(request, *args, **kwargs) -> str:
    return REFRESH_TOKEN_PREFIX + generate_token(TOKEN_RANDOM_LENGTH)
