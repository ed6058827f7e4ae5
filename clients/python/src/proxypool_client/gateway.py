"""The gateway: proxy URLs with username selectors, and what its answers say.

The gateway reads its routing choices from the proxy username, the way commercial
gateways do: `CLIENT[-region-R | -country-R][-city-C][-state-S][-asn-A][-carrier-C]
[-upstream-U][-protocol-P][-session-S][-sesstime-MIN | -idle-MIN][-rotate-...][-newip]
[-inspect]`.
:func:`gateway_username` writes one from keyword arguments and checks each value against
the gateway's grammar, so a typo is an :class:`~proxypool_client.errors.InvalidArgument`
here rather than a 400 on every request. Since `-` separates the selectors, a city of
several words is written with `_` (`New York` becomes `new_york`, the form the pool
stores).

`-inspect` asks the gateway to inspect the request's https tunnel: it ends the client's
TLS itself, with a certificate for the site that it issues from its own CA (which the
client must trust), and sends each request inside on to the site over TLS of its own. It
then sees every https request as it sees plain http: it retries a ban through another
proxy, cools the proxy down for the site, and names the proxy in the answer's headers, so
a ban is reported by proxy id. The gateway also sees the traffic in the clear. A client
whose `inspection` is `allowed` opts in per username; `on` inspects every tunnel without
the flag; `off` (the default) refuses it.

The gateway listens for its proxy protocol in the clear (`http://`), inside TLS
(`https://`, its TLS listener, so the proxy password never crosses the network in the
clear; the client must trust the listener's certificate) and as SOCKS5.

Every answer the gateway forwards names the proxy that carried it
(`X-Proxypool-Proxy`), the ticket that lets this client report that proxy
(`X-Proxypool-Ticket`, good for 15 minutes), how many proxies were tried
(`X-Proxypool-Attempts`) and, in a sticky session, whether the session is `new`, `pinned`
or `reassigned` (`X-Proxypool-Session`); a refusal of the gateway's own names its code in
`X-Proxypool-Error`. :class:`GatewayAnswer` reads them.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Union
from urllib.parse import quote

from .errors import InvalidArgument

# Client ids as the server takes them; they may contain `-` (the gateway splits at the
# longest known client id).
_CLIENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# Region, carrier and upstream labels (matched in any case).
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]{0,63}$")
_SESSION = re.compile(r"^[A-Za-z0-9_.]{1,64}$")
_ASN = re.compile(r"^(?:[Aa][Ss])?([0-9]{1,10})$")
_ROTATE = re.compile(r"^(?:([0-9]{1,12})([sm]?)|least|request)$")
MAX_GEO_VALUE = 64
MAX_ROTATE_REQUESTS = 1_000_000
SCHEMES = ("http", "https", "socks5", "socks5h")
# The keyword arguments of gateway_username beyond the client: the gateway's keys.
SELECTOR_KEYS = (
    "region", "country", "city", "state", "asn", "carrier", "upstream", "protocol",
    "session", "sesstime", "idle", "rotate", "newip", "inspect",
)


def check_selector_keys(where: str, selectors: Dict[str, Any]) -> None:
    """Refuses a key the gateway does not know, naming `where` it came from."""
    unknown = sorted(str(key) for key in selectors if key not in SELECTOR_KEYS)
    if unknown:
        raise InvalidArgument(f"{where}: unknown selector {', '.join(unknown)} (known: {', '.join(SELECTOR_KEYS)})")


def canonical_place(key: str, value: str) -> str:
    """A city or state as the pool stores it: lower case, words joined by one `_`.

    Spaces, `-`, `+` and `_` separate words; anything else but letters and digits is
    refused, as the gateway refuses it."""
    words: List[str] = []
    word = ""
    for char in value.strip():
        if char.isspace() or char in "-+_":
            if word:
                words.append(word)
                word = ""
        elif char.isalnum():
            # Lower-casing may add a combining mark (İ is i and a dot above); the pool
            # drops them, so the gateway compares `istanbul`.
            word += "".join(c for c in char.lower() if not unicodedata.combining(c))
        else:
            raise InvalidArgument(
                f"{key} {value!r} must be letters and digits, words separated by spaces, '_', '-' or '+'"
            )
    if word:
        words.append(word)
    canonical = "_".join(words)
    if not canonical or len(canonical.encode()) > MAX_GEO_VALUE:
        raise InvalidArgument(f"{key} {value!r} must name a place in at most {MAX_GEO_VALUE} bytes")
    return canonical


def _label(key: str, value: str) -> str:
    if not isinstance(value, str) or not _LABEL.match(value):
        raise InvalidArgument(f"{key} {value!r} must be 1-64 characters of [A-Za-z0-9_], not starting with '_'")
    return value.lower()


def _minutes(key: str, value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"{key} must be a whole number of minutes >= 1, got {value!r}")
    return str(value)


def _rotate(value: Union[int, str]) -> str:
    valid_type = isinstance(value, (int, str)) and not isinstance(value, bool)
    text = str(value) if valid_type else ""
    match = _ROTATE.match(text) if valid_type else None
    if match is not None and match.group(1) is not None:
        number, unit = int(match.group(1)), match.group(2)
        if number < 1 or (not unit and number > MAX_ROTATE_REQUESTS):
            match = None
    if match is None:
        raise InvalidArgument(
            f"rotate {value!r} must be a number of requests from 1 to {MAX_ROTATE_REQUESTS}, "
            "a time such as '30s' or '5m', 'least' or 'request'"
        )
    return text


def new_session_id(prefix: str = "s") -> str:
    """A fresh random sticky-session id (`prefix` and 16 hex digits)."""
    return _session(f"{prefix}{uuid.uuid4().hex[:16]}")


def _session(value: str) -> str:
    if not isinstance(value, str) or not _SESSION.match(value):
        raise InvalidArgument(f"session {value!r} must be 1-64 characters of [A-Za-z0-9_.]")
    return value


def gateway_username(
    client: str,
    *,
    region: Optional[str] = None,
    country: Optional[str] = None,
    city: Optional[str] = None,
    state: Optional[str] = None,
    asn: Optional[Union[str, int]] = None,
    carrier: Optional[str] = None,
    upstream: Optional[str] = None,
    protocol: Optional[str] = None,
    session: Optional[str] = None,
    sesstime: Optional[int] = None,
    idle: Optional[int] = None,
    rotate: Optional[Union[int, str]] = None,
    newip: bool = False,
    inspect: bool = False,
) -> str:
    """The gateway username for `client` with these selectors.

    - `region` (or `country`, its other name), `city`, `state`, `asn`, `carrier`,
      `upstream`, `protocol`: only proxies with these labels.
    - `session`: a sticky session, one proxy (so one exit) for every request naming it;
      `sesstime` (minutes from its start) or `idle` (minutes after its last use) end it.
    - `rotate`: `N` requests per proxy, `"30s"`/`"5m"` per proxy, `"least"`, or
      `"request"` (a new pick per request; not with a session).
    - `newip`: leave the session's (or rotation's) proxy for another one.
    - `inspect`: have the gateway inspect https tunnels (see the module doc; the client
      must trust the gateway's CA, and its `inspection` must be `allowed` or `on`).
    """
    if not isinstance(client, str) or not _CLIENT_ID.match(client):
        raise InvalidArgument(
            f"client {client!r} must be 1-128 characters of [A-Za-z0-9._:-] starting with a letter or digit"
        )
    if region is not None and country is not None:
        raise InvalidArgument("region and country are one selector (country is region's other name): give one")
    parts = [client]

    def add(key: str, value: str) -> None:
        parts.extend((key, value))

    if region is not None:
        add("region", _label("region", region))
    if country is not None:
        add("country", _label("country", country))
    if city is not None:
        add("city", canonical_place("city", city))
    if state is not None:
        add("state", canonical_place("state", state))
    if asn is not None:
        match = _ASN.match(str(asn).strip())
        if match is None or int(match.group(1)) > 0xFFFFFFFF:
            raise InvalidArgument(f"asn {asn!r} must be a number, with or without 'AS' (AS7922)")
        add("asn", str(int(match.group(1))))
    if carrier is not None:
        add("carrier", _label("carrier", carrier))
    if upstream is not None:
        add("upstream", _label("upstream", upstream))
    if protocol is not None:
        if protocol not in ("http", "https", "socks5"):
            raise InvalidArgument(f"protocol {protocol!r} must be one of http, https, socks5")
        add("protocol", protocol)
    if session is not None:
        add("session", _session(session))
    if sesstime is not None and idle is not None:
        raise InvalidArgument("sesstime and idle are exclusive (from the session's start, or from its last use)")
    for key, minutes in (("sesstime", sesstime), ("idle", idle)):
        if minutes is not None:
            if session is None:
                raise InvalidArgument(f"{key} needs a session")
            add(key, _minutes(key, minutes))
    if rotate is not None:
        written = _rotate(rotate)
        if written == "request" and session is not None:
            raise InvalidArgument("rotate 'request' cannot go with a session (a session keeps its proxy)")
        add("rotate", written)
    for flag, value in (("newip", newip), ("inspect", inspect)):
        if not isinstance(value, bool):
            raise InvalidArgument(f"{flag} must be True or False, got {value!r}")
        if value:
            parts.append(flag)
    return "-".join(parts)


def gateway_url(
    client: str,
    password: str,
    host: str = "127.0.0.1",
    port: int = 18080,
    *,
    scheme: str = "http",
    region: Optional[str] = None,
    country: Optional[str] = None,
    city: Optional[str] = None,
    state: Optional[str] = None,
    asn: Optional[Union[str, int]] = None,
    carrier: Optional[str] = None,
    upstream: Optional[str] = None,
    protocol: Optional[str] = None,
    session: Optional[str] = None,
    sesstime: Optional[int] = None,
    idle: Optional[int] = None,
    rotate: Optional[Union[int, str]] = None,
    newip: bool = False,
    inspect: bool = False,
) -> str:
    """The gateway as a proxy URL, `http://USERNAME:PASSWORD@HOST:PORT`, with the
    selectors of :func:`gateway_username` in the username (percent-encoded, as URLs need).

    `scheme` is `http` (the gateway's HTTP listener), `https` (its TLS listener: the same
    proxy inside TLS, whose certificate the client must trust; with `requests`, the
    `verify` bundle) or `socks5`/`socks5h` (its SOCKS5 listener; `socks5h` lets the gateway
    resolve names; `requests` needs PySocks for either)."""
    if scheme not in SCHEMES:
        raise InvalidArgument(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    if not isinstance(password, str) or not password:
        raise InvalidArgument("password must be the gateway password")
    if not isinstance(host, str) or not host or any(c in host for c in "/@ "):
        raise InvalidArgument(f"host must be a host name or address, got {host!r}")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise InvalidArgument(f"port must be 1-65535, got {port!r}")
    username = gateway_username(
        client,
        region=region,
        country=country,
        city=city,
        state=state,
        asn=asn,
        carrier=carrier,
        upstream=upstream,
        protocol=protocol,
        session=session,
        sesstime=sesstime,
        idle=idle,
        rotate=rotate,
        newip=newip,
        inspect=inspect,
    )
    # An IPv6 address goes in brackets.
    netloc = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{scheme}://{quote(username, safe='')}:{quote(password, safe='')}@{netloc}:{port}"


def split_address(address: str) -> Dict[str, Any]:
    """`HOST:PORT` (as proxypool prints its listeners) as `{"host": ..., "port": ...}`."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise InvalidArgument(f"gateway address must be HOST:PORT, got {address!r}")
    return {"host": host.strip("[]"), "port": int(port)}


@dataclass(frozen=True)
class GatewayAnswer:
    """What the gateway said about one answer, from its `X-Proxypool-*` headers."""

    proxy_id: Optional[str] = None
    """The proxy that carried the answer (absent on the gateway's own refusals)."""
    ticket: Optional[str] = None
    """What `POST /v1/feedback` takes, with `proxy_id`, to report that proxy."""
    attempts: Optional[int] = None
    """How many proxies the gateway tried (more than 1 after a ban it retried)."""
    session: Optional[str] = None
    """In a sticky session: `new`, `pinned` (kept) or `reassigned`."""
    error: Optional[str] = None
    """The gateway's own refusal code (`auth_required`, `bad_selector`, ...)."""

    @classmethod
    def from_headers(cls, get: Callable[[str], Optional[str]]) -> "GatewayAnswer":
        """Reads the headers through `get(name)`, which returns a header's value or None
        (`response.headers.get` of `requests`; Scrapy's headers are decoded first)."""
        attempts = get("X-Proxypool-Attempts")
        return cls(
            proxy_id=get("X-Proxypool-Proxy"),
            ticket=get("X-Proxypool-Ticket"),
            attempts=int(attempts) if attempts and attempts.isdigit() else None,
            session=get("X-Proxypool-Session"),
            error=get("X-Proxypool-Error"),
        )
