"""Django's APPEND_SLASH, without its two traps for a request with a body.
For `POST /admin` (a path that exists only with its trailing slash) Django
answers 301, which clients follow with a GET, dropping the body, or, with
DEBUG on, raises RuntimeError (a 500 page). Here every method gets a
redirect that keeps it: 301 for GET and HEAD as before, 308 (method and
body kept) for the others."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase, HttpResponsePermanentRedirect
from django.middleware.common import CommonMiddleware
from django.utils.http import escape_leading_slashes

SAFE_METHODS = frozenset({"GET", "HEAD"})


class AppendSlashMiddleware(CommonMiddleware):
    def get_full_path_with_slash(self, request: HttpRequest) -> str:
        # Django's, without the RuntimeError it raises in DEBUG.
        return escape_leading_slashes(request.get_full_path(force_append_slash=True))

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if response.status_code == 404 and self.should_redirect_with_slash(request):
            redirect = HttpResponsePermanentRedirect(self.get_full_path_with_slash(request))
            if request.method not in SAFE_METHODS:
                redirect.status_code = 308
            return redirect
        return super().process_response(request, response)
