from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from agentsite.api import api
from agentsite.metrics import metrics_view
from agentsite.pages import chat_page
from core.errors import NotFound
from core.http import errors
from langgraph_app.api import api as langgraph_api


# No cookie-authenticated action happens here, and without the exemption an
# unknown path answers CSRF's HTML 403 to every POST instead of a JSON 404.
@csrf_exempt
def api_route_not_found(request: HttpRequest, rest: str) -> HttpResponse:
    # A path under /api/ that no endpoint matches (e.g. a key with an encoded
    # "/", which Django decodes before routing) still answers the error contract.
    return errors.response(NotFound(f"no endpoint at {request.path}"), errors.API, request=request)


@csrf_exempt
def langgraph_route_not_found(request: HttpRequest, rest: str) -> HttpResponse:
    """Unmatched paths under /langgraph/ answer in the protocol's shape."""
    return errors.response(NotFound(f"no endpoint at {request.path}"), errors.PROTOCOL, request=request)


def header_authenticated(urls):
    """A NinjaAPI's urls with ninja's own views (its root, openapi.json,
    docs) exempt from CSRF as its operations are: nothing there reads a
    cookie, and a POST to one answered CSRF's HTML 403 instead of a 405.
    They serve GET (and HEAD) only."""
    patterns, app_name, namespace = urls
    for pattern in patterns:
        if not getattr(pattern.callback, "csrf_exempt", False):
            pattern.callback = csrf_exempt(require_safe(pattern.callback))
    return patterns, app_name, namespace


# The admin's nav sidebar takes a quarter of a 1280 px screen from every
# table; the index page lists the same links.
admin.site.enable_nav_sidebar = False
admin.site.site_header = "agentsite administration"
admin.site.site_title = "agentsite admin"

urlpatterns = [
    path("", chat_page, name="chat"),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("api/", api.urls),
    re_path(r"^api/(?P<rest>.*)$", api_route_not_found),
    # LangGraph's Agent Protocol: get_client(url="http://host/langgraph").
    path("langgraph/", header_authenticated(langgraph_api.urls)),
    re_path(r"^langgraph/(?P<rest>.*)$", langgraph_route_not_found),
]
