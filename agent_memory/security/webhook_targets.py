"""Where a webhook may be delivered: the public internet only, unless the deployment allows its
own network (AGENT_MEMORY_WEBHOOK_ALLOW_PRIVATE=1).

An endpoint's host is checked when it is registered (a literal address; a name, by what it
resolves to) and again at every attempt: the name is resolved once, every address it resolves to
is checked, and the POST dials the checked address itself (`post_pinned`), with the URL's host
in the `Host` header and, for https, as the TLS server name the certificate is verified against.
A name that resolves to a public address when checked and to an internal one a moment later
(DNS rebinding) is never dialled at the second.

Refused: loopback, link-local, private, unique-local (fc00::/7), shared (100.64.0.0/10),
multicast, unspecified, reserved and every other address that is not globally reachable, the
IPv4-mapped, -compatible, 6to4 and NAT64 forms of those, and the cloud metadata addresses.
Allowing private targets admits the internal classes; metadata, multicast and unspecified
addresses stay refused.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Final

import httpx

from agent_memory.core.errors import AgentMemoryError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Instance metadata and host services of the major clouds: never a webhook receiver.
METADATA_ADDRESSES: Final = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
    "169.254.170.2",    # AWS ECS task metadata
    "fd00:ec2::254",    # AWS over IPv6
    "100.100.100.200",  # Alibaba Cloud
    "168.63.129.16",    # Azure wire server
))
_UNIQUE_LOCAL: Final = ipaddress.ip_network("fc00::/7")
_NAT64: Final = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE: Final = ipaddress.ip_network("::/96")
# Classes no deployment setting admits.
ALWAYS_REFUSED: Final = frozenset({"metadata", "multicast", "unspecified"})
# The forms socket.inet_aton reads as an IPv4 address besides the dotted quad (127.1, 0x7f.1, 2130706433).
_NUMERIC_HOST: Final = re.compile(r"[0-9a-fA-FxX.]+")


class RefusedAddress(AgentMemoryError):
    """A webhook host that is, or resolves to, an address deliveries may not reach."""

    def __init__(self, host: str, address: IPAddress, kind: str):
        super().__init__(f"{host} is {address}, a {kind} address")
        self.host, self.address, self.kind = host, address, kind


class UnresolvedName(AgentMemoryError):
    """A webhook host whose name resolves to no address."""


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if any(address in net for net in _NAT64) or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_class(address: IPAddress) -> str | None:
    """None for a public address; otherwise its class (`loopback`, `private`, `metadata`, …)."""
    if address in METADATA_ADDRESSES:
        return "metadata"
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return "link-local"
        if address.ipv4_mapped is not None:  # dialled as the IPv4 address it maps
            return address_class(address.ipv4_mapped)
        embedded = _embedded_ipv4(address)
        if embedded is not None and (kind := address_class(embedded)) is not None:
            return kind
    checks = (("unspecified", address.is_unspecified), ("loopback", address.is_loopback),
              ("multicast", address.is_multicast), ("link-local", address.is_link_local),
              ("unique-local", isinstance(address, ipaddress.IPv6Address) and address in _UNIQUE_LOCAL),
              ("reserved", address.is_reserved), ("private", address.is_private),
              ("non-public", not address.is_global))
    return next((kind for kind, applies in checks if applies), None)


def refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """The class that refuses `address` under this policy; None when it may be dialled."""
    kind = address_class(address)
    if kind is None or (allow_private and kind not in ALWAYS_REFUSED):
        return None
    return kind


def literal_address(host: str) -> IPAddress | None:
    """The address a URL's host names literally (any form a resolver would read as one), else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_HOST.fullmatch(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


@dataclass(frozen=True)
class Resolver:
    """Resolves a webhook host: by the system's resolver, or by the DNS server `nameserver`
    (`host` or `host:port`; AGENT_MEMORY_WEBHOOK_NAMESERVER) when set."""

    nameserver: str | None = None
    timeout: float = 5.0

    async def addresses(self, host: str) -> list[IPAddress]:
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        found = await (self._dns(host) if self.nameserver else self._system(host))
        if not found:
            raise UnresolvedName(host)
        return list(dict.fromkeys(found))

    async def _system(self, host: str) -> list[IPAddress]:
        try:
            infos = await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo(
                host, None, type=socket.SOCK_STREAM), self.timeout)
        except (OSError, TimeoutError, UnicodeError):
            raise UnresolvedName(host) from None
        return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos
                if info[0] in (socket.AF_INET, socket.AF_INET6)]

    async def _dns(self, host: str) -> list[IPAddress]:
        import dns.asyncresolver
        import dns.exception

        assert self.nameserver is not None
        server, port = split_nameserver(self.nameserver)
        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers, resolver.port, resolver.lifetime = [server], port, self.timeout
        found: list[IPAddress] = []
        for rdtype in ("A", "AAAA"):
            try:
                answer = await resolver.resolve(host, rdtype, raise_on_no_answer=False)
            except dns.exception.DNSException:
                continue
            found += [ipaddress.ip_address(record.address) for record in answer]
        return found


def url_host(url: str) -> str:
    """The URL's host as it is resolved and sent: ASCII (an international name in its IDNA
    form), an IPv6 address without brackets. ValueError for a URL that has none."""
    try:
        host = httpx.URL(url).raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeError) as exc:
        raise ValueError(f"{url[:80]!r} has no valid host") from exc
    if not host:
        raise ValueError(f"{url[:80]!r} has no host")
    return host


def split_nameserver(value: str) -> tuple[str, int]:
    """`192.0.2.53`, `192.0.2.53:5353`, `[2001:db8::53]:5353` → (address, port)."""
    match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(\d{1,5}))?|([0-9.]+)(?::(\d{1,5}))?|([0-9A-Fa-f:]+)", value)
    if match is None:
        raise ValueError(f"{value!r} is not a DNS server address (e.g. 192.0.2.53 or 192.0.2.53:5353)")
    address = match.group(1) or match.group(3) or match.group(5)
    port = int(match.group(2) or match.group(4) or 53)
    ipaddress.ip_address(address)
    if not 1 <= port <= 65535:
        raise ValueError(f"{value!r} has port {port}: use 1 to 65535")
    return address, port


async def checked_addresses(resolver: Resolver, host: str, *, allow_private: bool) -> list[IPAddress]:
    """Every address `host` resolves to, each allowed; RefusedAddress names the first that is
    not, UnresolvedName a name that resolves to none."""
    addresses = await resolver.addresses(host)
    for address in addresses:
        kind = refusal(address, allow_private=allow_private)
        if kind is not None:
            raise RefusedAddress(host, address, kind)
    return addresses


async def post_pinned(http: httpx.AsyncClient, url: str, address: IPAddress, *, content: bytes,
                      headers: dict[str, str]) -> httpx.Response:
    """POST to `url` over a connection to `address` (checked by the caller): the URL's host
    goes in the `Host` header and, for https, is the TLS server name the certificate is checked
    against. The client keeps no connection alive, so no connection made for one name carries a
    request for another."""
    target = httpx.URL(url)
    host = url_host(url)
    authority = (f"[{host}]" if ":" in host else host) + (f":{target.port}" if target.port is not None else "")
    extensions = {"sni_hostname": host} if target.scheme == "https" and literal_address(host) is None else {}
    return await http.post(target.copy_with(host=str(address)), content=content,
                           headers={**headers, "Host": authority}, extensions=extensions)


def is_tls_failure(exc: BaseException) -> bool:
    """An httpx error caused by the TLS handshake (a certificate, a protocol mismatch)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
