"""The OAuth endpoints (docs/oauth.md), django-oauth-toolkit's views with toolhub's rules.

- /.well-known/oauth-protected-resource/mcp/<slug>/  RFC 9728 metadata of one instance endpoint
- /.well-known/oauth-authorization-server            RFC 8414 metadata (the library's view)
- /oauth/authorize/   consent, in the admin's look: only the instance's owner or a superuser, one instance
                      (the `resource`, RFC 8707) per authorization; PKCE S256 and `iss` (RFC 9207) by the library
- /oauth/token/, /oauth/revoke/, /oauth/register/   token, revocation (RFC 7009), dynamic registration
                      (RFC 7591): counted per client address in the `token` rate (tools_app.kernel.rate_limits)

TOOLHUB_OAUTH_ENABLED=false answers 404 on all of them.
"""

from urllib.parse import urlsplit

from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse_lazy
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider import views as library
from oauth2_provider.exceptions import FatalClientError
from oauth2_provider.http import OAuth2ResponseRedirect
from oauth2_provider.models import RefreshToken, get_application_model
from oauth2_provider.settings import oauth2_settings

from oauth_app import registration
from oauth_app.models import REDIRECT_SCHEMES, ClientDocument
from tools_app.kernel import rate_limits
from tools_app.kernel.limits import OAUTH_ENABLED
from tools_app.kernel.rate_limits import COUNTED_SCOPE_KEY
from tools_app.models import McpInstance
from tools_app.oauth import SCOPE_ALL, SCOPE_READ, may_authorize, public_base, resource_url, slug_of_resource


def oauth_enabled() -> bool:
    return OAUTH_ENABLED.get()


class EnabledMixin:
    def dispatch(self, request, *args, **kwargs):
        if not oauth_enabled():
            raise Http404("OAuth is switched off on this server (TOOLHUB_OAUTH_ENABLED).")
        return super().dispatch(request, *args, **kwargs)


class RateLimitedMixin(EnabledMixin):
    """Counted like POST /api/auth/token/: one bucket per client address in the `token` rate. A request that
    carries a secret to hash was counted in the same bucket by the ASGI gate already (toolhub/login_gate.py),
    with its hashing slot: it is counted once."""

    def dispatch(self, request, *args, **kwargs):
        counted = getattr(request, "scope", {}).get(COUNTED_SCOPE_KEY)
        if oauth_enabled() and request.method == "POST" and not counted:
            address = request.META.get("REMOTE_ADDR", "")
            try:
                rate_limits.hit(rate_limits.Bucket.of(rate_limits.TOKEN, f"oauth:{address}"))
            except rate_limits.RateLimited as limited:
                response = JsonResponse(limited.as_dict(), status=429)
                response["Retry-After"] = str(limited.retry_after)
                return response
        return super().dispatch(request, *args, **kwargs)


def request_base(request) -> str:
    return public_base(request.scheme, request.get_host())


#
# RFC 9728: one metadata document per instance endpoint
#


class InstanceResourceMetadataView(EnabledMixin, library.OAuthProtectedResourceMetadataView):
    """Anonymous: it says no more than the MCP endpoint itself, which answers 404 for a slug it does not serve
    (SPEC §8). A slug is an address, not a secret; the instance's name (the owner's text) is never shown."""

    def get(self, request, *args, **kwargs):
        slug = kwargs["slug"]
        self.instance = McpInstance.objects.filter(slug=slug, enabled=True).only("slug").first()
        if self.instance is None:
            return JsonResponse(
                {"error": "NOT_FOUND", "message": f"No MCP instance is served at /mcp/{slug}/."}, status=404
            )
        return super().get(request, *args, **kwargs)

    def get_resource(self, request):
        return resource_url(request_base(request), self.instance.slug)

    def get_authorization_servers(self, request):
        return [oauth2_settings.oauth2_authorization_server_issuer(request)]

    def get_resource_name(self):
        return f"toolhub MCP instance {self.instance.slug}"

    def get_resource_documentation(self):
        return ""


class ServerMetadataView(EnabledMixin, library.OAuthServerMetadataView):
    pass


#
# Consent
#


class AuthorizationRefused(Exception):
    def __init__(self, status: int, title: str, message: str):
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


def instance_of_resource(request, resources: list[str]) -> McpInstance:
    """The one instance an authorization request names in `resource` (RFC 8707), if the user may grant it."""
    if len(resources) != 1:
        raise AuthorizationRefused(
            400,
            "Which instance?",
            "The client must name exactly one MCP instance endpoint in the `resource` parameter "
            f"(it sent {len(resources)}).",
        )
    slug = slug_of_resource(resources[0], request_base(request))
    instance = McpInstance.objects.filter(slug=slug, enabled=True).first() if slug else None
    if instance is None:
        raise AuthorizationRefused(
            400, "Unknown instance", f"{resources[0][:200]!r} is not an MCP instance endpoint of this server."
        )
    if not may_authorize(request.user, instance.owner_id):
        raise AuthorizationRefused(
            403,
            "Not your instance",
            f"Only the owner of the MCP instance {instance.name!r} (or a superuser) can let a client reach it. "
            "Log in as its owner.",
        )
    return instance


def client_description(application) -> dict:
    """What the consent page says about a client: the host its identity comes from, and a logo only from its
    own metadata document (CIMD)."""
    client_id = application.client_id
    redirect_host = urlsplit((application.redirect_uris or "").split()[0]).hostname if application.redirect_uris else ""
    cimd = client_id.startswith("https://")
    document = ClientDocument.objects.filter(client_id=client_id).first() if cimd else None
    return {
        "name": application.name or (urlsplit(client_id).hostname if cimd else "Unnamed client"),
        "host": urlsplit(client_id).hostname if cimd else redirect_host,
        "verified_by_document": cimd,
        "logo_uri": document.logo_uri if document else "",
        "client_uri": document.client_uri if document else "",
        "redirect_host": redirect_host,
    }


def redirect_trusted(request, application, error) -> bool:
    """Whether an error of the authorization endpoint may be sent back to the client's redirect URI (RFC 9700
    §4.11.2: not to a URI nobody vouched for, or the endpoint is an open redirect for anyone who registers).

    Trusted: a client an administrator registered; a client the logged-in user holds a live authorization of
    (approved before, not revoked since); and the user's own "Deny" on the consent page, which showed where the
    client sends them back. Any other client (registered by anyone through dynamic registration or a metadata
    document, not yet approved by this user) gets the error on a page of this server instead.
    """
    if application is None:
        return False
    if request.method == "POST" and error.oauthlib_error.error == "access_denied":
        return True
    if application.registration_source == application.RegistrationSource.MANUAL:
        return True
    return RefreshToken.objects.filter(user=request.user, application=application, revoked__isnull=True).exists()


class ConsentView(EnabledMixin, library.AuthorizationView):
    template_name = "oauth_app/consent.html"
    login_url = reverse_lazy("admin:login")

    def error_response(self, error, application, **kwargs):
        if isinstance(error, FatalClientError):
            return super().error_response(error, application, **kwargs)  # a page already, never a redirect
        oauthlib_error = error.oauthlib_error
        if application is None and oauthlib_error.client_id:
            application = get_application_model().objects.filter(client_id=oauthlib_error.client_id).first()
        if redirect_trusted(self.request, application, error):
            return super().error_response(error, application, **kwargs)
        host = urlsplit(oauthlib_error.redirect_uri or "").hostname or "the client"
        detail = f": {oauthlib_error.description}" if oauthlib_error.description else ""
        return self._refused(
            AuthorizationRefused(
                400,
                "The client's request was refused",
                f"The client's request cannot be granted ({oauthlib_error.error}{detail}). You are not sent back to "
                f"{host}: you have not approved this client before, and an error is only sent back to a client you "
                "know.",
            )
        )

    def redirect(self, redirect_to, application):
        # An error found before the client was loaded (say, no PKCE) goes back to the redirect URI oauthlib
        # validated for the client: with the schemes any client may use (oauth_app.models.Client).
        return OAuth2ResponseRedirect(
            redirect_to, REDIRECT_SCHEMES if application is None else application.get_allowed_schemes()
        )

    def _refused(self, refused: AuthorizationRefused):
        context = {"title": refused.title, "message": refused.message, "site_header": "toolhub"}
        return render(self.request, "oauth_app/refused.html", context, status=refused.status)

    def get(self, request, *args, **kwargs):
        # Every authorization is shown to the user: no silent re-grant ("approval_prompt=auto") for a client
        # that holds a token already, possibly for another instance.
        query = request.GET.copy()
        query.pop("approval_prompt", None)
        request.GET = query
        try:
            self.instance = instance_of_resource(request, request.GET.getlist("resource"))
            if request.GET.get("code_challenge") and request.GET.get("code_challenge_method") != "S256":
                # RFC 7636 makes a missing method "plain"; the library refuses plain when the code is made,
                # this says so before the owner is asked anything.
                raise AuthorizationRefused(
                    400, "PKCE S256 required", "The client must use PKCE with code_challenge_method=S256 (not plain)."
                )
        except AuthorizationRefused as refused:
            return self._refused(refused)
        response = super().get(request, *args, **kwargs)
        redirect_uri = getattr(self, "oauth2_data", {}).get("redirect_uri")
        if response.status_code == 200 and redirect_uri:
            # The page's Content-Security-Policy: the approval's redirect goes to the client's (validated)
            # redirect URI, which form-action must allow; a logo from the client's document is an https image.
            parts = urlsplit(redirect_uri)
            response._csp_update = {"form-action": [f"{parts.scheme}://{parts.netloc}"], "img-src": ["https:"]}
        return response

    def form_valid(self, form):
        try:
            self.instance = instance_of_resource(self.request, (form.cleaned_data.get("resource") or "").split())
        except AuthorizationRefused as refused:
            return self._refused(refused)
        scopes = set((form.cleaned_data.get("scope") or "").split())
        if SCOPE_ALL in scopes and self.request.POST.get("grant_all") != "on":
            # The owner left "tools that change data" unticked: read-only tools only.
            scopes.discard(SCOPE_ALL)
            scopes.add(SCOPE_READ)
            form.cleaned_data["scope"] = " ".join(sorted(scopes))
        return super().form_valid(form)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        application = kwargs.get("application")
        scopes = kwargs.get("scopes") or []
        context.update(
            site_header="toolhub",
            instance=getattr(self, "instance", None),
            client=client_description(application) if application is not None else None,
            asks_all=SCOPE_ALL in scopes,
            asks_read=SCOPE_READ in scopes or SCOPE_ALL in scopes,
        )
        return context


@method_decorator(csrf_exempt, name="dispatch")
class TokenView(RateLimitedMixin, library.TokenView):
    pass


@method_decorator(csrf_exempt, name="dispatch")
class RevokeTokenView(RateLimitedMixin, library.RevokeTokenView):
    pass


@method_decorator(csrf_exempt, name="dispatch")
class RegistrationView(RateLimitedMixin, library.DynamicClientRegistrationView):
    """RFC 7591, open to anyone, within the bounds of oauth_app.registration (checked before anything is read
    past the declared length, then before anything is stored)."""

    def dispatch(self, request, *args, **kwargs):
        if not oauth2_settings.DCR_ENABLED:
            return JsonResponse(
                {"error": "invalid_request", "error_description": "Dynamic client registration is switched off."},
                status=404,
            )
        return super().dispatch(request, *args, **kwargs)

    def post(self, request, *args, **kwargs):
        try:
            if registration.parse_metadata(request) is not None:
                registration.remove_unused_clients()
                registration.check_unused_quota()
        except registration.RegistrationRefused as refused:
            return registration.refusal_response(refused.description)
        return super().post(request, *args, **kwargs)


@method_decorator(csrf_exempt, name="dispatch")
class RegistrationManagementView(RateLimitedMixin, library.DynamicClientRegistrationManagementView):
    """RFC 7592: a dynamically registered client reads, updates or deletes its own registration."""

    def dispatch(self, request, *args, **kwargs):
        if not oauth2_settings.DCR_ENABLED:
            raise Http404("Dynamic client registration is switched off.")
        return super().dispatch(request, *args, **kwargs)

    def put(self, request, client_id, *args, **kwargs):
        # The same bounds as a registration; the token is checked first, so a stranger learns nothing.
        auth = self._authenticate_registration_request(request, client_id)
        if not isinstance(auth, HttpResponse):
            try:
                registration.parse_metadata(request)
            except registration.RegistrationRefused as refused:
                return registration.refusal_response(refused.description)
        return super().put(request, client_id, *args, **kwargs)
