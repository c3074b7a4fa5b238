"""`permits.Client`: a host's operations against the approval service (`permitd`), over HTTP.

The service holds the ledger; a host holds a **host key** (`permitd keys add --agents A,B`) and acts only
for its agents. Everything a host does is here — the tools offered to the model, decide, call, the status of
a proposal (long-polled), withdraw, the execution protocol (claim → confirm or refuse → receipt), settle, the
task's end and its lease (take, renew, release), and reading standing rules and budgets — and nothing a
person does: the client has no approve,
reject, revoke, resolve, rule-making or ceiling-raising method, and the service refuses those routes to a
host key (`Refused(kind="person_only")`).

It speaks HTTP with the standard library only (`http.client`; `https://` URLs use the system's
certificates), opens one connection per request (a `Client` is shared by any number of threads), and ignores
`http_proxy` and friends (a ledger's service is not reached through a proxy by accident).

**Results** are the typed objects of the embedded runtime (`Proposal`, `Decision`, `StandingRule`,
`BudgetStatus`, `OfferedTool`, `Task`), read from the service's JSON into the runtime's own records, and
`permits.Claimed` for an execution. **Errors** are the same hierarchy as `permits.Runtime`'s:

- `Refused` — the service or its runtime refused; `kind` is the service's error code: a refusal of the
  runtime (`never`, `stale`, `claimed`, `not_claimed`, `budget`, `not_holder`, …) or of the key
  (`not_your_agent`, `host_only`, `person_only`);
- `NotFound` — no such proposal, execution, task, rule or budget (`kind`, `id`);
- `InputError` — a wrong type, NaN, bytes for a str, an integer beyond 64 bits, a body nested deeper or
  larger than the service takes: raised **before anything is sent**;
- `StoreError` — the service's store failed (503): nothing of the operation was recorded;
- `TableError` — the service's runtime has no current table (409 `table`);
- `ServiceError` — no answer, or not the API's (`code`: `unreachable`, `timeout`, `bad_answer`,
  `unauthorized`, `internal`; `status`; `sent`).

**Retries.** A request that got no answer (the connection failed, reset or timed out) or a 503 is sent
again, up to `retries` times with a growing pause, **only where a repeat cannot do anything twice**: every
read, `decide`, `call` (the same operation key and claim token answer the same proposal or the same alone
execution), `claim`, `confirm`, `refuse` and `receipt` (the same claim token answers the same; the stored
receipt once it is done), `end_task` (ending an ended task changes nothing), `take_task` (a repeat by the
same holder takes the next fence: the lease the lost answer carried is fenced, never used), `renew_task`,
`release_task` (releasing again changes nothing) and `wait`. `withdraw` and
`settle` are retried only when the connection was refused (nothing reached the service): a repeat of one
that was done is refused (`status`, `not_conclusive`), so read the proposal or the budget to learn what
happened.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from permits._errors import Error, InputError, NotFound, Refused, ServiceError, StoreError, TableError
from permits._permits import (
    BudgetStatus,
    Claimed,
    Decision,
    Evidence,
    Failed,
    Lease,
    OfferedTool,
    Proposal,
    StandingRule,
    Task,
    Unknown,
    _decode,
    _encode,
    _evidence,
)

__all__ = ["Client", "MAX_WAIT_SECONDS"]

#: The longest one long poll waits on the service (`?wait=` is cut to it there); `Client.wait` polls again
#: for a longer timeout.
MAX_WAIT_SECONDS = 60

#: What `Client.execute`'s `admits` answers: `None` (the host's permissions admit the agent's account and the
#: person it runs as) or `(principal, reason)` with `principal` `"agent"` or `"person"`.
Admission = tuple[Literal["agent", "person"], str] | None

_NOT_FOUND_KINDS = {
    "unknown_proposal": "proposal",
    "unknown_rule": "rule",
    "unknown_budget": "budget",
    "unknown_execution": "execution",
    "unknown_task": "task",
}
# Refused before the runtime was asked: the body or the query did not fit (the client checks first, so these
# mean a service of another version).
_INPUT_CODES = {"malformed_json", "unknown_field", "invalid_request", "too_deep", "invalid_query", "body_too_large"}


def _member(answer: Any, name: str) -> Any:
    """`answer[name]`, or `ServiceError("bad_answer")` when the answer has no such member."""
    if not isinstance(answer, dict) or name not in answer:
        raise ServiceError("bad_answer", f"the service's answer has no `{name}`: {answer!r}"[:300])
    return answer[name]


def _read(kind: str, value: Any) -> Any:
    """A record of the service's answer as the runtime's typed object; `ServiceError("bad_answer")` when it
    is not one (a service of another version)."""
    try:
        return _decode(kind, value)
    except (ValueError, TypeError, KeyError) as e:
        raise ServiceError("bad_answer", f"the service's answer does not read as a {kind}: {e}") from None


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise InputError(f"{name} must be a str, not `{type(value).__name__}`")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{name} is a str that is not valid Unicode (a lone surrogate)") from None
    return value


def _chain(via: Sequence[str] | None) -> list[dict[str, str]]:
    """`["Agent.Skill", …]` (nearest first) as the service takes a chain: `[{"agent", "skill"}, …]`."""
    if via is None:
        return []
    if isinstance(via, (str, bytes)) or not isinstance(via, Sequence):
        raise InputError(f'via is a list of "Agent.Skill" strs, nearest first, not `{type(via).__name__}`')
    links = []
    for link in via:
        text = _text("a link of via", link)
        agent, dot, skill = text.partition(".")
        if not dot or not agent or not skill or "." in skill:
            raise InputError(f'each link of via is "Agent.Skill" (two names joined by one `.`), not `{text}`')
        links.append({"agent": agent, "skill": skill})
    return links


def _maybe_text(name: str, value: object) -> str | None:
    return None if value is None else _text(name, value)


def _seconds(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise InputError(f"{name} must be whole seconds from 0 to 2**63-1 (an int), not {value!r}")
    return value


def _duration(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{name} must be a positive, finite number of seconds, not {value!r}")
    return float(value)


def _arguments(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"the arguments must be a dict of the tool's parameters, not `{type(value).__name__}`")
    return value


def _segment(name: str, value: object) -> str:
    return urllib.parse.quote(_text(name, value), safe="")


def _lease(value: object) -> dict[str, Any]:
    """A `permits.Lease` as a body presents it: `{"holder", "fence"}` (the service takes the key from the call
    or the execution)."""
    if not isinstance(value, Lease):
        raise InputError(f"lease is a permits.Lease (what take_task answered), not `{type(value).__name__}`")
    return {"holder": value.holder, "fence": value.fence}


def _with_lease(body: dict[str, Any], lease: Lease | None) -> dict[str, Any]:
    if lease is not None:
        body["lease"] = _lease(lease)
    return body


class Client:
    """A host's connection to the approval service at `url` (`http://127.0.0.1:7878`) with a host key.

    `timeout` is how many seconds a request waits to connect and for each part of the answer (a long poll
    gets its wait on top) before it is `ServiceError("timeout")`; `retries` is how many times
    a request that may be repeated safely is sent again after no answer or a 503 (see the module's
    documentation), pausing `backoff` seconds, then twice that, and so on.

    Raises `InputError` for a URL that is not `http://` or `https://` or a key that is not a str.
    """

    def __init__(self, url: str, key: str, *, timeout: float = 30.0, retries: int = 2, backoff: float = 0.2) -> None:
        parsed = urllib.parse.urlsplit(_text("url", url))
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise InputError(f"url must be http://HOST[:PORT] or https://HOST[:PORT], not {url!r}")
        if parsed.query or parsed.fragment:
            raise InputError(f"url has no query or fragment, not {url!r}")
        token = _text("key", key).strip()
        if not token or any(c in token for c in "\r\n\x00"):
            raise InputError("key must be the token `permitd keys add` printed, on one line")
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
            raise InputError(f"retries must be an int from 0 to 10, not {retries!r}")
        self._scheme = parsed.scheme
        self._host = parsed.hostname
        try:
            self._port = parsed.port
        except ValueError:
            raise InputError(f"url has a port that is not a number from 0 to 65535: {url!r}") from None
        self._base = parsed.path.rstrip("/")
        self._auth = f"Bearer {token}"
        self._timeout = _duration("timeout", timeout)
        self._retries = retries
        self._backoff = 0.0 if backoff == 0 else _duration("backoff", backoff)
        self._tls = ssl.create_default_context() if parsed.scheme == "https" else None
        self.url = f"{parsed.scheme}://{parsed.netloc}{self._base}"

    def __repr__(self) -> str:
        return f"permits.Client({self.url!r})"

    # -----------------------------------------------------------------------------------------------------
    # Transport

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._tls is not None:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._tls)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _once(self, method: str, path: str, body: bytes | None, timeout: float) -> tuple[int, Any]:
        connection = self._connection(timeout)
        try:
            try:
                connection.connect()
            except ConnectionRefusedError as e:
                raise ServiceError("unreachable", f"cannot reach {self.url}: {e}", sent=False) from e
            except socket.timeout as e:
                raise ServiceError("timeout", f"{self.url} did not accept a connection in {timeout:g} s", sent=False) from e
            except OSError as e:
                raise ServiceError("unreachable", f"cannot reach {self.url}: {e}", sent=False) from e
            headers = {"authorization": self._auth, "accept": "application/json"}
            if body is not None:
                headers["content-type"] = "application/json"
            try:
                connection.request(method, self._base + path, body=body, headers=headers)
                response = connection.getresponse()
                status = response.status
                text = response.read()
            except socket.timeout as e:
                raise ServiceError("timeout", f"{method} {path}: no answer from {self.url} in {timeout:g} s") from e
            except (OSError, http.client.HTTPException) as e:
                raise ServiceError("unreachable", f"{method} {path}: the connection to {self.url} failed: {e}") from e
        finally:
            connection.close()
        try:
            return status, json.loads(text)
        except ValueError:
            shown = text[:200].decode("utf-8", "replace")
            raise ServiceError(
                "bad_answer", f"{method} {path}: {self.url} answered {status} with something not JSON: {shown!r}", status
            ) from None

    def _request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        safe: bool,
        about: tuple[str, str] | None = None,
        wait: float = 0.0,
    ) -> Any:
        """One request: the answer's JSON on 200, else the error it means (see the module's documentation).

        `safe`: the request may be repeated after no answer (it cannot do anything twice). `about`: the
        record a 404 is about, `(kind, id)`. `wait`: seconds the service may hold the request (a long poll).
        """
        data = None if body is None else bytes(_encode(dict(body)))
        attempt = 0
        while True:
            try:
                status, answer = self._once(method, path, data, self._timeout + wait)
                if status == 200:
                    return answer
                raise self._error(method, path, status, answer, about)
            except (ServiceError, StoreError) as e:
                retry = isinstance(e, StoreError) or e.code in ("unreachable", "timeout")
                if not (retry and (safe or (isinstance(e, ServiceError) and not e.sent))):
                    raise
                if attempt >= self._retries:
                    raise
            if self._backoff:
                time.sleep(self._backoff * 2**attempt)
            attempt += 1

    def _error(self, method: str, path: str, status: int, answer: Any, about: tuple[str, str] | None) -> Error:
        error = answer.get("error") if isinstance(answer, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("code"), str):
            return ServiceError("bad_answer", f"{method} {path}: {self.url} answered {status}: {answer!r}", status)
        code: str = error["code"]
        message = str(error.get("message", ""))
        if status == 404:
            kind = _NOT_FOUND_KINDS.get(code) or (about[0] if about else "route")
            return NotFound(kind, about[1] if about else path, message)
        if status == 401:
            return ServiceError("unauthorized", message, status)
        if status == 503:
            return StoreError(message)
        if code in _INPUT_CODES:
            return InputError(f"the service refused the request ({code}): {message}")
        if code == "table":
            return TableError("table", message)
        if status in (403, 409, 413, 422):
            return Refused(code, message)
        return ServiceError(code, f"{method} {path}: {status} {code}: {message}", status)

    # -----------------------------------------------------------------------------------------------------
    # The service and what an agent is offered

    def health(self) -> dict[str, Any]:
        """`GET /healthz`: `{"ok": True, "table_digest", "version"}` (the service's version)."""
        answer: dict[str, Any] = self._request("GET", "/healthz", safe=True)
        return answer

    def table(self) -> dict[str, Any]:
        """The table in force: `format`, `compiler`, `source_digest`, `table_digest`, and the package's
        `proposal_lifetime_seconds` and `grant_lifetime_seconds`."""
        answer: dict[str, Any] = self._request("GET", "/v1/table", safe=True)
        return answer

    def _offer(self, agent: str, skill: str, mode: str | None, via: Sequence[str] | None) -> Any:
        path = f"/v1/agents/{_segment('agent', agent)}/skills/{_segment('skill', skill)}/tools"
        query: dict[str, str] = {}
        if mode is not None:
            query["mode"] = _text("mode", mode)
        links = _chain(via)
        if links:
            query["via"] = ",".join(f"{link['agent']}.{link['skill']}" for link in links)
        if query:
            path += "?" + urllib.parse.urlencode(query)
        return self._request("GET", path, safe=True)

    def offered_tools(
        self, agent: str, skill: str, *, mode: str | None = None, via: Sequence[str] | None = None
    ) -> list[OfferedTool]:
        """The tools to offer the model in `skill` (never a `never` one), in the skill's order, each with its
        label, parameters and level (`None` when a condition on the arguments decides it); with `mode`, for
        calls in that mode (a tool `never` in it is not offered; an unknown mode offers nothing); with `via`
        (`["Agent.Skill", …]`, nearest first), for calls delegated along that chain (a tool a link makes
        `never` is not offered; an undeclared chain offers nothing)."""
        return [_read("offered_tool", t) for t in _member(self._offer(agent, skill, mode, via), "tools")]

    def levels(
        self, agent: str, skill: str, *, mode: str | None = None, via: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        """Every tool of `skill` with the table's level for it, `never` ones included, in the skill's order;
        with `mode`, the levels in that mode; with `via`, along that delegation chain."""
        offer = self._offer(agent, skill, mode, via)
        return [(str(_member(item, "tool")), str(_member(item, "level"))) for item in _member(offer, "levels")]

    # -----------------------------------------------------------------------------------------------------
    # Decide and call

    def decide(
        self,
        agent: str,
        skill: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        requester: str | None = None,
        mode: str | None = None,
        via: Sequence[str] | None = None,
    ) -> Decision:
        """The decision for one call, standing rules included (recorded in the service's audit); `mode` is the
        mode the call is made in (none: no mode); `via` its delegation chain, `["Agent.Skill", …]` nearest
        first, root last (an undeclared link makes it `never`; the key must be a host key for every agent of
        the chain, else `Refused(kind="not_your_agent")`)."""
        body = {
            "agent": _text("agent", agent),
            "skill": _text("skill", skill),
            "tool": _text("tool", tool),
            "arguments": _arguments(arguments),
            "requester": _maybe_text("requester", requester),
            "mode": _maybe_text("mode", mode),
            "via": _chain(via),
        }
        decision: Decision = _read("decision", self._request("POST", "/v1/decide", body, safe=True))
        return decision

    def call(
        self,
        agent: str,
        skill: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        operation_key: str,
        claim_token: str,
        why: str = "",
        requester: str | None = None,
        evidence: Sequence[Evidence | dict[str, Any]] | None = None,
        destination: str | None = None,
        covered_version: str | None = None,
        shown: Mapping[str, str] | None = None,
        instruction_version: str | None = None,
        lifetime: int | None = None,
        mode: str | None = None,
        via: Sequence[str] | None = None,
        lease: Lease | None = None,
    ) -> Claimed | Proposal:
        """One tool call of the agent, in the task `operation_key`.

        `alone` → a `Claimed` execution (`A-n`), admitted and claimed with `claim_token`: check your
        permissions, then `confirm` (or `refuse`), run it, and send the `receipt` — or hand it to `execute`.
        `propose` → a `Proposal` for a person (`wait` for it). `never` → `Refused(kind="never")` with the
        reason, and nothing is made. A retry with the same operation key and claim token answers the same.

        The service cannot ask the host, so the host states here what its callbacks would answer: the
        `covered_version` of the subject now (for a tool with `version P.F`), how arguments read to a person
        (`shown`, by parameter name: `{"repair": "Ticket T-7"}`), and the `instruction_version`. `lifetime`
        (seconds) shortens the proposal's. `mode` is the mode the call is made in: the task's first call binds
        it, and a later call of the task in another mode (or none) is `Refused(kind="never")`. `via` is the
        call's delegation chain, `["Agent.Skill", …]` nearest first, root last: the key must be a host key
        for every agent of it, and the chain's root is the task's. `lease` presents the task's lease the host
        holds (`take_task`): while the task is leased, only a call presenting its current lease is made
        (`Refused(kind="not_holder")`).
        """
        body: dict[str, Any] = {
            "agent": _text("agent", agent),
            "skill": _text("skill", skill),
            "tool": _text("tool", tool),
            "arguments": _arguments(arguments),
            "requester": _maybe_text("requester", requester),
            "mode": _maybe_text("mode", mode),
            "via": _chain(via),
            "operation_key": _text("operation_key", operation_key),
            "claim_token": _text("claim_token", claim_token),
            "why": _text("why", why),
            "evidence": [] if evidence is None else _evidence(evidence),
            "destination": _maybe_text("destination", destination),
            "covered_version": _maybe_text("covered_version", covered_version),
            "instruction_version": _maybe_text("instruction_version", instruction_version),
        }
        if shown is not None:
            if not isinstance(shown, Mapping):
                raise InputError(f"shown must be a dict of str by parameter name, not `{type(shown).__name__}`")
            body["shown"] = {_text("a key of shown", k): _text(f"shown[{k!r}]", v) for k, v in shown.items()}
        if lifetime is not None:
            body["lifetime_seconds"] = _seconds("lifetime", lifetime)
        _with_lease(body, lease)
        answer = self._request("POST", "/v1/calls", body, safe=True)
        if isinstance(answer, dict) and answer.get("outcome") == "alone":
            claimed: Claimed = _read("claimed", _member(answer, "execution"))
            return claimed
        proposal: Proposal = _read("proposal", _member(answer, "proposal"))
        return proposal

    # -----------------------------------------------------------------------------------------------------
    # Proposals

    def proposal(self, proposal_id: str) -> Proposal:
        """The proposal as it is now."""
        path = f"/v1/proposals/{_segment('proposal_id', proposal_id)}"
        p: Proposal = _read("proposal", self._request("GET", path, safe=True, about=("proposal", proposal_id)))
        return p

    def wait(self, proposal_id: str, timeout: float = MAX_WAIT_SECONDS, *, status: str | None = None) -> Proposal:
        """The proposal as soon as its status is not `status` (by default, its status when asked), or as it is
        when `timeout` seconds have passed. Long-polls the service (`?wait=`, at most 60 s a request, again
        for a longer timeout): no answer is lost to a status that changed between two polls."""
        timeout = _duration("timeout", timeout)
        segment = _segment("proposal_id", proposal_id)
        about = ("proposal", proposal_id)
        deadline = time.monotonic() + timeout
        known: str = self.proposal(proposal_id).status if status is None else _text("status", status)
        while True:
            left = math.ceil(deadline - time.monotonic())
            if left <= 0:
                return self.proposal(proposal_id)
            wait = min(left, MAX_WAIT_SECONDS)
            query = urllib.parse.urlencode({"wait": wait, "status": known})
            path = f"/v1/proposals/{segment}?{query}"
            p: Proposal = _read("proposal", self._request("GET", path, safe=True, about=about, wait=wait))
            if p.status != known:
                return p

    def proposals(self, *, status: str | None = None) -> list[Proposal]:
        """This key's agents' proposals, oldest first (at most 1000), only those in `status` if given."""
        path = "/v1/proposals"
        if status is not None:
            path += "?" + urllib.parse.urlencode({"status": _text("status", status)})
        return [_read("proposal", p) for p in _member(self._request("GET", path, safe=True), "proposals")]

    def withdraw(self, proposal_id: str) -> Proposal:
        """The agent withdraws its waiting proposal → `withdrawn`, final. Not repeated after a lost answer
        (read the proposal)."""
        path = f"/v1/proposals/{_segment('proposal_id', proposal_id)}/withdraw"
        p: Proposal = _read("proposal", self._request("POST", path, {}, safe=False, about=("proposal", proposal_id)))
        return p

    # -----------------------------------------------------------------------------------------------------
    # The execution protocol

    def execution(self, execution_id: str) -> Claimed:
        """An execution (`P-n` or `A-n`) as it is now, without its claim token."""
        path = f"/v1/executions/{_segment('execution_id', execution_id)}"
        c: Claimed = _read("claimed", self._request("GET", path, safe=True, about=("execution", execution_id)))
        return c

    def _step(self, execution_id: str, step: str, body: dict[str, Any]) -> Claimed:
        path = f"/v1/executions/{_segment('execution_id', execution_id)}/{step}"
        c: Claimed = _read("claimed", self._request("POST", path, body, safe=True, about=("execution", execution_id)))
        return c

    def claim(
        self,
        execution_id: str,
        token: str,
        *,
        destination: str | None = None,
        covered_version: str | None = None,
        instruction_version: str | None = None,
        lease: Lease | None = None,
    ) -> Claimed:
        """Claims a granted proposal's execution with the host's claim token (unique per execution: e.g.
        `secrets.token_hex(16)`, kept until the receipt is sent). The service rechecks everything — the
        grant, the table, the `destination` the host is about to use, the `covered_version` of the subject
        now (a change since the proposal is `Refused(kind="stale")`) — and answers whom it runs as
        (`accounts`, `runs_as`). The same token again answers the same; another token is
        `Refused(kind="claimed")`. An alone execution (`A-n`) was claimed by its call: this answers it again.
        `lease`: the task's lease the host holds; while the task is leased, a claim without its current lease is
        `Refused(kind="not_holder")`, even with a valid grant."""
        body: dict[str, Any] = {"token": _text("token", token)}
        for name, value in (
            ("destination", destination),
            ("covered_version", covered_version),
            ("instruction_version", instruction_version),
        ):
            if value is not None:
                body[name] = _text(name, value)
        return self._step(execution_id, "claim", _with_lease(body, lease))

    def confirm(self, execution_id: str, token: str, *, lease: Lease | None = None) -> Claimed:
        """The host's permissions admit the agent's accounts and the person → `sending`: run it now. `lease`: the
        task's lease the host holds (a host that lost it cannot confirm: `Refused(kind="not_holder")`)."""
        return self._step(execution_id, "confirm", _with_lease({"token": _text("token", token)}, lease))

    def refuse(
        self,
        execution_id: str,
        token: str,
        *,
        principal: Literal["agent", "person"],
        reason: str,
        lease: Lease | None = None,
    ) -> Claimed:
        """The host's permissions refuse the agent's account (`principal="agent"`) or the person it runs as
        (`"person"`), saying why → `failed`, final; nothing ran. `lease`: the task's lease the host holds."""
        if principal not in ("agent", "person"):
            raise InputError(f'principal is "agent" or "person", not {principal!r}')
        body: dict[str, Any] = {"token": _text("token", token), "principal": principal, "reason": _text("reason", reason)}
        return self._step(execution_id, "refuse", _with_lease(body, lease))

    def receipt(self, execution_id: str, token: str, result: Any) -> Claimed:
        """Reports the outcome of a confirmed execution: `result` is the receipt (any JSON: `done`), or
        `permits.Failed(reason)` (it certainly did not take effect: `failed`) or `permits.Unknown(reason)`
        (started, outcome not confirmed: `unknown`). A repeat answers the same and changes nothing. It takes no
        lease: what ran is recorded whoever holds the task now (settling it needs the lease)."""
        body: dict[str, Any] = {"token": _text("token", token)}
        if isinstance(result, Failed):
            body.update(outcome="failed", reason=result.reason)
        elif isinstance(result, Unknown):
            body.update(outcome="unknown", reason=result.reason)
        else:
            body.update(outcome="done", receipt=result)
        return self._step(execution_id, "receipt", body)

    def execute(
        self,
        execution_id: str,
        token: str,
        run: Callable[[Claimed], Any],
        *,
        admits: Callable[[Claimed], Admission] | None = None,
        destination: str | None = None,
        covered_version: str | None = None,
        instruction_version: str | None = None,
        lease: Lease | None = None,
    ) -> Claimed:
        """The whole protocol for one execution: `claim`; `admits(claimed)` (the host's permissions: `None`
        admits, `(principal, reason)` refuses → `refuse`, and the refused execution is returned); `confirm`;
        `run(claimed)` (the tool: its return value is the receipt, or a `permits.Failed` / `permits.Unknown`);
        `receipt`. A tool that raises is reported `unknown` (it may have acted) and its exception re-raised.
        Nothing runs twice: an execution that is already `done` is returned with its stored receipt, and one
        an earlier attempt with this token confirmed (`sending`: that attempt may have run the tool) is
        returned as it is, for the host to report what that attempt did with `receipt`. `lease` (the task's
        lease the host holds) is presented to the claim, the confirmation and the refusal: a host that lost it
        gets `Refused(kind="not_holder")` before anything runs."""
        claimed = self.claim(
            execution_id,
            token,
            destination=destination,
            covered_version=covered_version,
            instruction_version=instruction_version,
            lease=lease,
        )
        if claimed.status != "granted" or claimed.confirmed:
            # Done (its stored receipt), failed, or confirmed by an earlier attempt with this token, which may
            # have run the tool: nothing runs again (report that attempt's outcome with `receipt`).
            return claimed
        refusal = admits(claimed) if admits is not None else None
        if refusal is not None:
            principal, reason = refusal
            return self.refuse(execution_id, token, principal=principal, reason=reason, lease=lease)
        claimed = self.confirm(execution_id, token, lease=lease)
        if claimed.status != "sending":
            return claimed
        try:
            result = run(claimed)
        except BaseException as e:
            self.receipt(execution_id, token, Unknown(f"the tool raised {type(e).__name__}: {e}"))
            raise
        return self.receipt(execution_id, token, result)

    def settle(self, holder: str, receipt: dict[str, Any], *, lease: Lease | None = None) -> BudgetStatus:
        """Settles a spend that was sent (`holder`: `P-n` or `A-n`) with the other side's conclusive receipt
        (`{"operation", "amount", "outcome": "accepted" | "rejected"}`); the budget afterwards. Not repeated
        after a lost answer (read the budget). `lease`: the task's lease the host holds (while the task is
        leased, only its current holder settles: `Refused(kind="not_holder")`)."""
        if not isinstance(receipt, dict):
            raise InputError(f"receipt must be a dict, not `{type(receipt).__name__}`")
        body = _with_lease({"holder": _text("holder", holder), "receipt": receipt}, lease)
        answer = self._request("POST", "/v1/settle", body, safe=False, about=("execution", holder))
        budget: BudgetStatus = _read("budget", _member(answer, "budget"))
        return budget

    # -----------------------------------------------------------------------------------------------------
    # Tasks, standing rules, budgets (read)

    def task(self, operation_key: str) -> Task:
        """The task bound to an operation key (by its first call)."""
        path = f"/v1/tasks/{_segment('operation_key', operation_key)}"
        t: Task = _read("task", _member(self._request("GET", path, safe=True, about=("task", operation_key)), "task"))
        return t

    def end_task(self, operation_key: str) -> Task:
        """Ends a task: its task rules end; the key keeps its binding. Ending an ended task changes nothing."""
        path = f"/v1/tasks/{_segment('operation_key', operation_key)}/end"
        answer = self._request("POST", path, {}, safe=True, about=("task", operation_key))
        t: Task = _read("task", _member(answer, "task"))
        return t

    def _lease_op(self, operation_key: str, step: str, body: dict[str, Any]) -> Lease:
        path = f"/v1/tasks/{_segment('operation_key', operation_key)}/lease{step}"
        answer = self._request("POST", path, body, safe=True, about=("task", operation_key))
        lease: Lease = _read("lease", _member(answer, "lease"))
        return lease

    def take_task(self, operation_key: str, holder: str, seconds: int) -> Lease:
        """Takes the task `operation_key` for `holder` (a name the host chooses, one per worker) for `seconds`
        (1 to 86400): the `Lease`, with its fence. Present it (`lease=`) to every call, claim, confirmation and
        settlement under the key; renew it while the work goes on. `Refused(kind="not_holder")` while another
        holder's lease is held; `kind="not_your_agent"` when the task is bound to an agent the key does not
        host (a key no call bound yet: any host key takes it)."""
        body = {"holder": _text("holder", holder), "seconds": _seconds("seconds", seconds)}
        return self._lease_op(operation_key, "", body)

    def renew_task(self, lease: Lease, seconds: int) -> Lease:
        """Renews a lease the host holds for `seconds` from now, keeping its fence. `Refused(kind="not_holder")`
        when another fence is current (the task was taken over)."""
        body = _lease(lease)
        body["seconds"] = _seconds("seconds", seconds)
        return self._lease_op(lease.key, "/renew", body)

    def release_task(self, lease: Lease) -> Lease:
        """Releases a lease before it expires: another host may take the task now. Releasing again changes
        nothing; `Refused(kind="not_holder")` when another fence is current."""
        body = _lease(lease)
        return self._lease_op(lease.key, "/release", body)

    def lease(self, operation_key: str) -> Lease | None:
        """The lease on `operation_key` as the service's store has it (expired and released ones included), or
        `None` when the key was never leased."""
        path = f"/v1/tasks/{_segment('operation_key', operation_key)}/lease"
        value = _member(self._request("GET", path, safe=True, about=("task", operation_key)), "lease")
        if value is None:
            return None
        lease: Lease = _read("lease", value)
        return lease

    def rules(self) -> list[StandingRule]:
        """Every standing rule, revoked ones included, oldest first."""
        return [_read("rule", r) for r in _member(self._request("GET", "/v1/rules", safe=True), "rules")]

    def budgets(self) -> list[BudgetStatus]:
        """Every budget of the table as it stands now."""
        return [_read("budget", b) for b in _member(self._request("GET", "/v1/budgets", safe=True), "budgets")]

    def budget(self, name: str) -> BudgetStatus:
        """One budget as it stands now."""
        path = f"/v1/budgets/{_segment('name', name)}"
        b: BudgetStatus = _read("budget", _member(self._request("GET", path, safe=True, about=("budget", name)), "budget"))
        return b
