"""The inbox's Starlette application: pages to list, read and decide pending approvals.

Nothing here reads a workspace file: every page is built from signed binding records
(what the one renderer stored for approvers when the call was deferred). The only state
change is a decision (and logging in or out), each a POST checked for origin and CSRF.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..toolset._bindings import DecisionRefused
from ..toolset._signing import VshApprovalError
from ._auth import SESSION_COOKIE, LoginThrottle, Session, Sessions, Tokens, log, same_origin
from ._diff_view import diff_page, pygments_css
from ._items import InboxItem, WorkspaceInbox, item_key
from ._visible import visible

if TYPE_CHECKING:
    from ._dbos_items import DbosInbox

__all__ = ("InboxConfig", "create_app")

_STATIC = Path(__file__).with_name("static")

_SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        b"frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


class _SecurityHeaders:
    """Adds the headers above to every response (no scripts, no framing, no caching)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, sending)


@dataclass
class InboxConfig:
    """What the app serves and who may use it."""

    workspaces: Sequence[Path]
    tokens: Tokens
    ttl_s: float = 600.0
    allowed_hosts: Sequence[str] = ("127.0.0.1", "localhost")
    dbos: DbosInbox | None = None
    """Workflows waiting in ``run_with_approvals`` (``--dbos``), if any."""
    sessions: Sessions = field(default_factory=Sessions)
    throttle: LoginThrottle = field(default_factory=LoginThrottle)


def create_app(config: InboxConfig) -> Starlette:
    """The inbox as an ASGI app (serve it with uvicorn)."""
    inboxes = [
        WorkspaceInbox(i, Path(w), ttl_s=config.ttl_s) for i, w in enumerate(config.workspaces)
    ]
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("vsh_ai.inbox", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=visible,  # bidi and invisible characters shown as ⟨U+XXXX⟩ everywhere
    )
    env.filters["duration"] = _duration
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    templates = Jinja2Templates(env=env)
    css = (_STATIC / "inbox.css").read_text() + "\n" + pygments_css()

    def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        return templates.TemplateResponse(request, name, context, status_code=status)

    def session_of(request: Request) -> Session | None:
        return config.sessions.get(request.cookies.get(SESSION_COOKIE))

    def client(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    def foreign(request: Request) -> bool:
        """A POST that did not come from this server's own pages."""
        ok = same_origin(
            request.headers.get("origin"),
            request.headers.get("referer"),
            request.headers.get("host", ""),
            request.url.scheme,
        )
        if not ok:
            log.warning(
                "refused %s %s from %s: origin %r is not this server's",
                request.method,
                request.url.path,
                client(request),
                request.headers.get("origin") or request.headers.get("referer"),
            )
        return not ok

    def refused(request: Request, message: str, status: int) -> Response:
        return page(request, "message.html", {"title": "Refused", "message": message}, status)

    async def login_form(request: Request) -> Response:
        token = request.query_params.get("token", "")
        return page(request, "login.html", {"token": token, "error": ""})

    async def login(request: Request) -> Response:
        if foreign(request):
            return refused(request, "This form must be sent from the inbox's own page.", 403)
        who = client(request)
        if config.throttle.blocked(who):
            log.warning("login refused for %s: too many failed logins", who)
            return refused(request, "Too many failed logins; wait a minute.", 429)
        form = await request.form()
        offered = form.get("token")
        principal = config.tokens.principal(offered) if isinstance(offered, str) else None
        if principal is None:
            config.throttle.failed(who)
            log.warning("failed login from %s", who)
            context = {"token": "", "error": "That token is not valid."}
            return page(request, "login.html", context, 403)
        session = config.sessions.create(principal)
        log.info("login: %s from %s", principal, who)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(  # Secure too when served over HTTPS (behind a proxy)
            SESSION_COOKIE,
            session.id,
            httponly=True,
            samesite="strict",
            path="/",
            secure=request.url.scheme == "https",
        )
        return response

    async def logout(request: Request) -> Response:
        if foreign(request):
            return refused(request, "This form must be sent from the inbox's own page.", 403)
        session = session_of(request)
        form = await request.form()
        if session is not None:
            if not session.csrf_ok(_text(form.get("csrf"))):
                log.warning("refused logout of %s: missing or wrong CSRF token", session.principal)
                return refused(request, "The form's CSRF token is missing or wrong; reload.", 403)
            config.sessions.drop(session.id)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def listing(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return RedirectResponse("/login", status_code=303)
        found: list[InboxItem] = []
        problems: list[str] = []
        for inbox in inboxes:
            found += await anyio.to_thread.run_sync(inbox.items)
            problems += [f"{inbox.workspace}: {p}" for p in inbox.problems]
        pending = [i for i in found if i.pending]
        pending.sort(key=lambda i: i.binding.created_unix_ms)  # oldest waits first
        decided = [i for i in found if not i.pending][:100]
        workflows = await anyio.to_thread.run_sync(config.dbos.items) if config.dbos else []
        context = {
            "session": session,
            "pending": pending,
            "workflows": workflows,
            "decided": decided,
            "problems": problems,
            "notice": request.query_params.get("notice", ""),
        }
        return page(request, "list.html", context)

    def find(key: str) -> tuple[WorkspaceInbox, str] | None:
        parsed = item_key(key)
        if parsed is None or parsed[0] >= len(inboxes):
            return None
        return inboxes[parsed[0]], parsed[1]

    async def item_page(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return RedirectResponse("/login", status_code=303)
        where = find(request.path_params["key"])
        item = await anyio.to_thread.run_sync(where[0].item, where[1]) if where else None
        if item is None:
            return refused(request, "No such approval request.", 404)
        try:
            number = int(request.query_params.get("page", "1"))
        except ValueError:
            number = 1
        review = item.binding.review
        diff = review.diff if review is not None and review.diff else item.metadata.get("diff")
        context = {
            "session": session,
            "item": item,
            "intent": review.intent if review is not None else None,
            "diff": diff_page(diff or "", number),
            "verdict": item.metadata.get("verdict"),
        }
        return page(request, "item.html", context)

    async def decision_form(request: Request, what: str) -> tuple[Session, Any] | Response:
        """The one guard of every decision: the inbox's own origin, a session, its CSRF
        token; the form, or the refusal to send."""
        if foreign(request):
            return refused(request, "This form must be sent from the inbox's own page.", 403)
        session = session_of(request)
        if session is None:
            return refused(request, "Log in first.", 403)
        form = await request.form()
        if not session.csrf_ok(_text(form.get("csrf"))):
            log.warning("refused %s by %s: missing or wrong CSRF token", what, session.principal)
            return refused(
                request, "The form's CSRF token is missing or wrong; reload the page.", 403
            )
        return session, form

    async def decide(request: Request) -> Response:
        key = request.path_params["key"]
        guarded = await decision_form(request, f"decision on {key}")
        if isinstance(guarded, Response):
            return guarded
        session, form = guarded
        decision = _text(form.get("decision"))
        if decision not in ("approve", "deny"):
            return refused(request, "Choose approve or deny.", 400)
        where = find(key)
        item = await anyio.to_thread.run_sync(where[0].item, where[1]) if where else None
        if item is None:
            return refused(request, "No such approval request.", 404)
        transaction = _text(form.get("transaction")) or ""
        reason = (_text(form.get("reason")) or "").strip()
        if item.left_s <= 0:
            return refused(request, "This approval request has expired; nothing was recorded.", 409)
        store = where[0].store if where else None
        assert store is not None
        try:
            await anyio.to_thread.run_sync(
                lambda: store.decide(
                    item.binding,
                    "approve" if decision == "approve" else "deny",
                    session.principal,
                    reason,
                    transaction=transaction,
                    digest=_text(form.get("digest")) or "",
                )
            )
        except DecisionRefused as error:
            log.warning(
                "refused decision %s on %s by %s: %s", decision, key, session.principal, error
            )
            return refused(request, str(error), 409)
        except VshApprovalError as error:
            log.error("decision %s on %s by %s failed: %s", decision, key, session.principal, error)
            return refused(request, str(error), 500)
        log.info(
            "decision: %s %s transaction %s (%s) by %s; reason %s",
            decision,
            item.workspace,
            item.binding.transaction,
            key,
            session.principal,
            json.dumps(reason),
        )
        notice = "approved" if decision == "approve" else "denied"
        return RedirectResponse(f"/?notice={notice}", status_code=303)

    async def workflow_page(request: Request) -> Response:
        session = session_of(request)
        if session is None:
            return RedirectResponse("/login", status_code=303)
        params = request.query_params
        dbos = config.dbos
        item = (
            await anyio.to_thread.run_sync(dbos.item, params.get("id", ""), params.get("call", ""))
            if dbos is not None
            else None
        )
        if item is None:
            return refused(request, "No such waiting workflow call.", 404)
        try:
            number = int(params.get("page", "1"))
        except ValueError:
            number = 1
        context = {
            "session": session,
            "item": item,
            "diff": diff_page(item.metadata.get("diff") or "", number),
            "verdict": item.metadata.get("verdict"),
        }
        return page(request, "workflow.html", context)

    async def workflow_decide(request: Request) -> Response:
        guarded = await decision_form(request, "workflow decision")
        if isinstance(guarded, Response):
            return guarded
        session, form = guarded
        decision = _text(form.get("decision"))
        dbos = config.dbos
        if decision not in ("approve", "deny") or dbos is None:
            return refused(request, "Choose approve or deny.", 400)
        workflow_id = _text(form.get("id")) or ""
        call_id = _text(form.get("call")) or ""
        reason = (_text(form.get("reason")) or "").strip()
        try:
            await anyio.to_thread.run_sync(
                lambda: dbos.decide(
                    workflow_id,
                    call_id,
                    request_id=_text(form.get("request_id")) or "",
                    transaction=_text(form.get("transaction")) or "",
                    approve=decision == "approve",
                    principal=session.principal,
                    reason=reason,
                )
            )
        except ValueError as error:
            log.warning(
                "refused %s on workflow %s by %s: %s",
                decision,
                workflow_id,
                session.principal,
                error,
            )
            return refused(request, str(error), 409)
        log.info(
            "decision: %s workflow %s call %s by %s; reason %s",
            decision,
            workflow_id,
            call_id,
            session.principal,
            json.dumps(reason),
        )
        notice = "approved" if decision == "approve" else "denied"
        return RedirectResponse(f"/?notice={notice}", status_code=303)

    async def stylesheet(request: Request) -> Response:
        return PlainTextResponse(css, media_type="text/css")

    routes = [
        Route("/", listing),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/item/{key}", item_page, methods=["GET"]),
        Route("/item/{key}/decide", decide, methods=["POST"]),
        Route("/workflow", workflow_page, methods=["GET"]),
        Route("/workflow/decide", workflow_decide, methods=["POST"]),
        Route("/static/inbox.css", stylesheet),
    ]
    middleware = [
        Middleware(_SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(config.allowed_hosts)),
    ]
    return Starlette(routes=routes, middleware=middleware)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _duration(seconds: float) -> str:
    """``3d 4h``, ``5h 2m``, ``4m 10s``, ``12s``; negative: ``expired``."""
    if seconds <= 0:
        return "expired"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"
