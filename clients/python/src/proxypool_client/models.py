"""What the client API answers, as typed objects.

Each object is read from the answer's JSON with the fields this package knows; any field a
newer server adds is kept in `raw`, so an older client neither breaks nor hides it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional
from urllib.parse import quote


def _opt_str(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def _opt_int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


@dataclass(frozen=True)
class Proxy:
    """One extracted proxy: this client's alone until `usable_until`, or until the client
    gives it back (`returned`: its username and password are then no longer shown)."""

    id: str
    protocol: str
    host: str
    port: int
    upstream: str
    usable_until: int
    """Milliseconds since the epoch; stop using the proxy after this."""
    expires_at: int
    """Milliseconds since the epoch; the vendor's hard expiry."""
    username: Optional[str] = None
    password: Optional[str] = None
    region: Optional[str] = None
    carrier: Optional[str] = None
    city: Optional[str] = None
    state: Optional[str] = None
    asn: Optional[str] = None
    returned: bool = False
    """The client gave the proxy back (`Client.return_proxy`): stop using it."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Proxy":
        return cls(
            id=str(data["id"]),
            protocol=str(data["protocol"]),
            host=str(data["host"]),
            port=int(data["port"]),
            upstream=str(data["upstream"]),
            usable_until=int(data["usable_until"]),
            expires_at=int(data["expires_at"]),
            username=_opt_str(data.get("username")),
            password=_opt_str(data.get("password")),
            region=_opt_str(data.get("region")),
            carrier=_opt_str(data.get("carrier")),
            city=_opt_str(data.get("city")),
            state=_opt_str(data.get("state")),
            asn=_opt_str(data.get("asn")),
            returned=bool(data.get("returned", False)),
            raw=dict(data),
        )

    @property
    def url(self) -> str:
        """The proxy as a URL with its credentials, for `requests` or any HTTP client
        (`socks5h://` for a SOCKS5 proxy, so the proxy resolves the site's name)."""
        scheme = "socks5h" if self.protocol == "socks5" else self.protocol
        credentials = ""
        if self.username is not None:
            credentials = quote(self.username, safe="")
            if self.password is not None:
                credentials += ":" + quote(self.password, safe="")
            credentials += "@"
        return f"{scheme}://{credentials}{self.host}:{self.port}"

    def requests_proxies(self) -> Dict[str, str]:
        """`{"http": url, "https": url}`, as `requests` takes it in `proxies=`."""
        return {"http": self.url, "https": self.url}


@dataclass(frozen=True)
class Extraction:
    """The answer of `POST /v1/extractions` (and of `GET /v1/extractions/{id}`)."""

    id: str
    requested: int
    returned: int
    created_at: int
    proxies: List[Proxy]
    replayed: bool = False
    """True when the server answered a retry with the same key from its stored answer."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], replayed: bool = False) -> "Extraction":
        return cls(
            id=str(data["id"]),
            requested=int(data["requested"]),
            returned=int(data["returned"]),
            created_at=int(data["created_at"]),
            proxies=[Proxy.from_json(p) for p in data.get("proxies", [])],
            replayed=replayed,
            raw=dict(data),
        )


@dataclass(frozen=True)
class Cooldown:
    """A proxy kept off one registrable domain until `until` (ms since the epoch)."""

    proxy_id: str
    domain: str
    until: int
    strikes: int
    forget_at: int
    project: Optional[str] = None
    """The project whose clients it binds; None for a shared cooldown."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Cooldown":
        return cls(
            proxy_id=str(data["proxy_id"]),
            domain=str(data["domain"]),
            until=int(data["until"]),
            strikes=int(data["strikes"]),
            forget_at=int(data["forget_at"]),
            project=_opt_str(data.get("project")),
        )


@dataclass(frozen=True)
class Feedback:
    """The answer of `POST /v1/feedback`."""

    outcome: str
    """`cooling`, `cleared` or `queued` (by session, for the gateway that holds it)."""
    domain: str
    verdict: str
    returned: bool
    proxy_id: Optional[str] = None
    session: Optional[str] = None
    cooldown: Optional[Cooldown] = None
    ttl_ms: Optional[int] = None
    feedback_id: Optional[str] = None
    expires_at: Optional[int] = None
    replacement: Optional[Extraction] = None
    replacement_error: Optional[Mapping[str, str]] = None
    """The replacement could not be made (the feedback itself was applied)."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Feedback":
        cooldown = data.get("cooldown")
        replacement = data.get("replacement")
        return cls(
            outcome=str(data["outcome"]),
            domain=str(data["domain"]),
            verdict=str(data["verdict"]),
            returned=bool(data.get("returned", False)),
            proxy_id=_opt_str(data.get("proxy_id")),
            session=_opt_str(data.get("session")),
            cooldown=Cooldown.from_json(cooldown) if cooldown else None,
            ttl_ms=_opt_int(data.get("ttl_ms")),
            feedback_id=_opt_str(data.get("feedback_id")),
            expires_at=_opt_int(data.get("expires_at")),
            replacement=Extraction.from_json(replacement) if replacement else None,
            replacement_error=data.get("replacement_error"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class UpstreamUsage:
    """One upstream's counts: gateway requests and tunnels, the failed ones, payload bytes
    each way, proxies handed out by extractions."""

    upstream: str
    requests: int
    failures: int
    bytes_up: int
    bytes_down: int
    extracted: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "UpstreamUsage":
        return cls(
            upstream=str(data["upstream"]),
            requests=int(data["requests"]),
            failures=int(data["failures"]),
            bytes_up=int(data["bytes_up"]),
            bytes_down=int(data["bytes_down"]),
            extracted=int(data["extracted"]),
        )


@dataclass(frozen=True)
class UsageBucket:
    """One minute or one hour, from `start_ms`."""

    start_ms: int
    upstreams: List[UpstreamUsage]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "UsageBucket":
        return cls(
            start_ms=int(data["start_ms"]),
            upstreams=[UpstreamUsage.from_json(u) for u in data.get("upstreams", [])],
        )


@dataclass(frozen=True)
class ClientUsage:
    """One client's usage: totals, the last hour by minute, the last day by hour."""

    client: str
    totals: List[UpstreamUsage]
    minutes: List[UsageBucket]
    hours: List[UsageBucket]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ClientUsage":
        return cls(
            client=str(data["client"]),
            totals=[UpstreamUsage.from_json(u) for u in data.get("totals", [])],
            minutes=[UsageBucket.from_json(b) for b in data.get("minutes", [])],
            hours=[UsageBucket.from_json(b) for b in data.get("hours", [])],
        )

    def total(self, name: str) -> int:
        """One count (`requests`, `failures`, `bytes_up`, `bytes_down`, `extracted`)
        summed over every upstream."""
        return sum(int(getattr(u, name)) for u in self.totals)


@dataclass(frozen=True)
class Usage:
    """The answer of `GET /v1/usage`."""

    as_of_ms: int
    minute_ms: int
    hour_ms: int
    clients: List[ClientUsage]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Usage":
        return cls(
            as_of_ms=int(data["as_of_ms"]),
            minute_ms=int(data["minute_ms"]),
            hour_ms=int(data["hour_ms"]),
            clients=[ClientUsage.from_json(c) for c in data.get("clients", [])],
            raw=dict(data),
        )

    def of(self, client: str) -> Optional[ClientUsage]:
        """One client's usage, if the answer holds it."""
        return next((c for c in self.clients if c.client == client), None)


@dataclass(frozen=True)
class Me:
    """The answer of `GET /v1/me`: the client the token belongs to."""

    client: str
    project: str
    admin: bool
    allowed_upstreams: List[str]
    allowed_regions: List[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Me":
        return cls(
            client=str(data["client"]),
            project=str(data["project"]),
            admin=bool(data["admin"]),
            allowed_upstreams=[str(u) for u in data.get("allowed_upstreams", [])],
            allowed_regions=[str(r) for r in data.get("allowed_regions", [])],
        )
