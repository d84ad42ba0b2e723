"""The explorer's web application (Starlette, server-rendered Jinja2 pages, no build step):
the namespace, an entity, its messages, the actions, and ``/metrics``.

Every page reads through ``explorer.model`` and every action runs through
``explorer.actions``; the app only routes, checks (``explorer.guard``) and renders. Engine
calls go one at a time (``Explorer.lock``): the explorer is a tool for a person, and one
namespace's reads and a lazily started Spark session are not shared between threads here.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from sbqueue.client import ServiceBusClient
from sbqueue.exceptions import MessagingEntityNotFoundError, ServiceBusError
from sbqueue.explorer import model
from sbqueue.explorer.actions import ACTIONS, Tools
from sbqueue.explorer.charts import partition_chart
from sbqueue.explorer.guard import COOKIE, Guard, is_loopback
from sbqueue.explorer.metrics import NamespaceCollector, OperationMetrics
from sbqueue.management import ServiceBusAdministrationClient

__all__ = ["Explorer", "create_app"]

_HERE = Path(__file__).parent
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


@dataclass
class Explorer:
    """One namespace as the explorer serves it: its clients, rules and metrics."""

    admin: ServiceBusAdministrationClient
    client: ServiceBusClient
    guard: Guard
    registry: CollectorRegistry
    operations: OperationMetrics
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return fn(self.admin, *args, **kwargs)


def create_app(namespace: str, *, spark: Any = None, guard: Guard | None = None,
               host: str = "127.0.0.1") -> Starlette:
    """The explorer of the namespace at ``namespace`` (a folder or URI). ``spark``: the
    session actions that need Spark use (None: the CLI's lazy one, started only then);
    ``host``: where it listens, which decides the Host names it answers."""
    if spark is None:
        from sbqueue.cli_shared import quiet_session

        spark = quiet_session(namespace)
    guard = guard or Guard()
    admin = ServiceBusAdministrationClient(namespace, spark=spark)
    registry = CollectorRegistry()
    registry.register(NamespaceCollector(admin.namespace))
    explorer = Explorer(admin, ServiceBusClient(namespace, spark=spark), guard, registry,
                        OperationMetrics(registry))
    templates = Jinja2Templates(env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"), autoescape=True))
    pages = _Pages(explorer, templates)
    hosts = _LOOPBACK_HOSTS if guard.token is None and is_loopback(host) else ["*"]
    app = Starlette(routes=pages.routes(), middleware=[
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
        Middleware(BaseHTTPMiddleware, dispatch=_gate(guard)),
    ], exception_handlers={ServiceBusError: pages.error, Exception: pages.error})
    app.state.explorer = explorer
    return app


def _gate(guard: Guard) -> Callable[[Request, Callable[[Request], Awaitable[Response]]],
                                    Awaitable[Response]]:
    """The token check and the security headers of every response."""

    async def dispatch(request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if not guard.admits(request.headers, request.cookies, request.query_params):
            response: Response = PlainTextResponse(
                "a token is needed: open the explorer's address with ?token=<its token>, or "
                "send 'Authorization: Bearer <token>'", status_code=401)
        elif guard.token is not None and "token" in request.query_params:
            rest = {k: v for k, v in request.query_params.items() if k != "token"}
            response = RedirectResponse(request.url.path + (f"?{urlencode(rest)}" if rest
                                                            else ""), status_code=303)
            response.set_cookie(COOKIE, guard.token, httponly=True, samesite="strict")
        else:
            response = await call_next(request)
        for name, value in _HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    return dispatch


class _Pages:
    """The routes, each a read (in a worker thread) rendered by its template."""

    def __init__(self, explorer: Explorer, templates: Jinja2Templates) -> None:
        self.explorer = explorer
        self.templates = templates

    def routes(self) -> list[Route | Mount]:
        return [
            Route("/", self.namespace), Route("/fragments/entities", self.entities),
            Route("/entity", self.entity), Route("/fragments/entity", self.entity_counts),
            Route("/messages", self.messages), Route("/message", self.message),
            Route("/action/{name}", self.action, methods=["POST"]),
            Route("/metrics", self.metrics),
            Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
        ]

    def render(self, request: Request, name: str, status: int = 200, **context: Any
               ) -> Response:
        guard = self.explorer.guard
        context |= {"allow_actions": guard.allow_actions, "csrf": guard.csrf,
                    "root": self.explorer.admin.namespace.root}
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def namespace(self, request: Request) -> Response:
        rows = self.explorer.read(model.overview)
        executor = self.explorer.admin.namespace.executor
        return self.render(request, "namespace.html", rows=rows, executor=executor)

    def entities(self, request: Request) -> Response:
        return self.render(request, "entities.html", rows=self.explorer.read(model.overview))

    def entity(self, request: Request) -> Response:
        detail = self.explorer.read(model.entity_detail, _path(request))
        return self.render(request, "entity.html", detail=detail,
                           chart=partition_chart(detail.per_partition), actions=ACTIONS)

    def entity_counts(self, request: Request) -> Response:
        detail = self.explorer.read(model.entity_counts, _path(request))
        return self.render(request, "entity_counts.html", detail=detail,
                           chart=partition_chart(detail.per_partition))

    def messages(self, request: Request) -> Response:
        query = request.query_params
        start = _int(query.get("from"), "from")
        count = _int(query.get("n"), "n") or model.PAGE
        if not 1 <= count <= model.MAX_PAGE:
            raise ServiceBusError(f"n={count}: a page shows 1 to {model.MAX_PAGE} messages")
        page = self.explorer.read(model.message_page, _path(request),
                                  dead_letter=query.get("dlq") == "1", from_sequence=start,
                                  after=query.get("after"), count=count)
        return self.render(request, "messages.html", page=page, start=start, count=count)

    def message(self, request: Request) -> Response:
        query = request.query_params
        seq = _int(query.get("seq"), "seq")
        if seq is None:
            raise ServiceBusError("seq is needed: the message's sequence number")
        path, dead = _path(request), query.get("dlq") == "1"
        shown = self.explorer.read(model.one_message, path, dead, seq)
        if shown is None:
            raise MessagingEntityNotFoundError(
                f"no message {seq} in {path}{' (dead-letter queue)' if dead else ''}: "
                "it was received, settled or purged")
        return self.render(request, "message.html", message=shown, path=path, dead_letter=dead)

    async def action(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = {k: str(v) for k, v in (await request.form()).items()}
        path = form.get("path", "")
        refused = self.explorer.guard.refuses_form(form, request.headers)
        chosen = ACTIONS.get(name)
        if refused is None and chosen is None:
            refused = f"no action {name!r}: one of {', '.join(ACTIONS)}"
        if refused is not None:
            return self.render(request, "result.html", 403, path=path, error=refused)
        assert chosen is not None
        fields = {k: form[k] for k in chosen.fields if k in form}
        if form.get("confirmed") != "yes":
            return self.render(request, "confirm.html", action=chosen, path=path,
                               fields=fields, question=chosen.question(path, fields))
        tools = Tools(self.explorer.admin, self.explorer.client)
        try:
            report = await run_in_threadpool(self._act, chosen.run, tools, path, fields)
        except Exception as exc:
            return self.render(request, "result.html", 400, path=path, error=_one_line(exc))
        return self.render(request, "result.html", path=path, report=report)

    def _act(self, run: Callable[[Tools, str, dict[str, str]], str], tools: Tools,
             path: str, fields: dict[str, str]) -> str:
        with self.explorer.lock:
            return run(tools, path, fields)

    def metrics(self, request: Request) -> Response:
        with self.explorer.lock:
            body = generate_latest(self.explorer.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def error(self, request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, MessagingEntityNotFoundError) else (
            400 if isinstance(exc, ServiceBusError) else 500)
        return self.render(request, "result.html", status, path=request.query_params.get(
            "path", ""), error=_one_line(exc))


def _one_line(exc: Exception) -> str:
    """The engine's own message for its errors; anything else in one line, no trace."""
    if isinstance(exc, (ServiceBusError, ValueError)):
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    from sbqueue.spark.errors import one_line

    return one_line(exc)


def _path(request: Request) -> str:
    path = request.query_params.get("path", "").strip()
    if not path:
        raise ServiceBusError("path is needed: a queue, topic or topic/Subscriptions/name")
    return path


def _int(text: str | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ServiceBusError(f"{name}={text!r} is not a whole number") from None
