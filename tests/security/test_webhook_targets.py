"""Where webhooks may go (agent_memory/security/webhook_targets.py): every non-public address class
is refused, in its IPv4, IPv6, IPv4-mapped and numeric spellings, and the metadata addresses even
where private targets are allowed; names are resolved by the system (localhost) or by a real DNS
server on a local port (AGENT_MEMORY_WEBHOOK_NAMESERVER), every address they resolve to checked."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections import Counter
from dataclasses import dataclass, field

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from agent_memory.security.webhook_targets import (
    RefusedAddress,
    Resolver,
    UnresolvedName,
    address_class,
    checked_addresses,
    literal_address,
    refusal,
    split_nameserver,
)

REFUSED = {
    "127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback",
    "10.1.2.3": "private", "172.16.0.1": "private", "192.168.1.1": "private",
    "169.254.169.254": "metadata", "fd00:ec2::254": "metadata", "100.100.100.200": "metadata",
    "169.254.1.1": "link-local", "fe80::1": "link-local",
    "fc00::1": "unique-local", "fd12:3456::1": "unique-local",
    "224.0.0.1": "multicast", "ff02::1": "multicast",
    "0.0.0.0": "unspecified", "::": "unspecified",
    "240.0.0.1": "reserved", "100.64.0.1": "non-public", "192.0.2.1": "private",
    # IPv4 inside IPv6: mapped, compatible, 6to4, NAT64.
    "::ffff:127.0.0.1": "loopback", "::ffff:169.254.169.254": "metadata", "::ffff:10.0.0.1": "private",
    "::127.0.0.1": "loopback", "2002:7f00:1::": "loopback", "64:ff9b::a00:1": "private",
}


def test_every_non_public_class_is_refused_and_public_addresses_pass():
    for text, kind in REFUSED.items():
        assert address_class(ipaddress.ip_address(text)) == kind, text
    for text in ("93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.215.14"):
        assert address_class(ipaddress.ip_address(text)) is None, text


def test_allowing_private_targets_admits_the_internal_classes_but_never_metadata():
    allowed = {text for text in REFUSED if refusal(ipaddress.ip_address(text), allow_private=True) is None}
    assert {"127.0.0.1", "::1", "10.1.2.3", "fc00::1", "169.254.1.1", "::ffff:10.0.0.1"} <= allowed
    for text in ("169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254", "224.0.0.1", "0.0.0.0", "::"):
        assert text not in allowed, text


def test_the_numeric_spellings_of_an_address_are_read_as_that_address():
    for host in ("127.1", "0x7f.0.0.1", "2130706433", "0177.0.0.1"):
        assert literal_address(host) == ipaddress.ip_address("127.0.0.1"), host
    assert literal_address("::ffff:7f00:1") == ipaddress.ip_address("::ffff:127.0.0.1")
    assert literal_address("example.org") is None and literal_address("cafe.be") is None


async def test_a_name_is_checked_by_every_address_it_resolves_to():
    system = Resolver()
    with pytest.raises(RefusedAddress) as refused:
        await checked_addresses(system, "localhost", allow_private=False)
    assert refused.value.kind == "loopback" and refused.value.host == "localhost"
    assert all(a.is_loopback for a in await checked_addresses(system, "localhost", allow_private=True))
    with pytest.raises(UnresolvedName):
        await checked_addresses(system, "no-such-host.invalid", allow_private=False)


@dataclass
class DnsServer:
    """A real DNS server on a local UDP port. `zone` maps a name to the A records of its answers,
    one per query, the last repeated; AAAA queries get no record, unknown names NXDOMAIN.
    `queries` counts the A queries per name."""

    zone: dict[str, list[str]] = field(default_factory=dict)
    queries: Counter[str] = field(default_factory=Counter)
    sock: socket.socket = field(default_factory=lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def start(self) -> DnsServer:
        self.sock.bind(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def stop(self) -> None:
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                data, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            query = dns.message.from_wire(data)
            question = query.question[0]
            name = question.name.to_text(omit_final_dot=True).lower()
            response = dns.message.make_response(query)
            if name not in self.zone:
                response.set_rcode(dns.rcode.NXDOMAIN)
            elif question.rdtype == dns.rdatatype.A:
                answers = self.zone[name]
                address = answers[min(self.queries[name], len(answers) - 1)]
                self.queries[name] += 1
                response.answer.append(dns.rrset.from_text(question.name, 0, "IN", "A", address))
            self.sock.sendto(response.to_wire(), peer)


@pytest.fixture
def dns_server():
    server = DnsServer().start()
    yield server
    server.stop()


async def test_names_resolved_by_the_configured_dns_server_are_checked(dns_server):
    dns_server.zone.update({"hooks.example": ["93.184.215.14"], "inside.example": ["10.0.0.7"],
                            "rebind.example": ["93.184.215.14", "127.0.0.1"]})
    resolver = Resolver(dns_server.address)
    assert await checked_addresses(resolver, "hooks.example", allow_private=False) == [
        ipaddress.ip_address("93.184.215.14")]
    with pytest.raises(RefusedAddress, match=r"10\.0\.0\.7, a private address"):
        await checked_addresses(resolver, "inside.example", allow_private=False)
    with pytest.raises(UnresolvedName):
        await checked_addresses(resolver, "unknown.example", allow_private=False)
    # A name that rebinds is checked at each resolution: public first, loopback the next time.
    assert await checked_addresses(resolver, "rebind.example", allow_private=False)
    with pytest.raises(RefusedAddress, match="loopback"):
        await checked_addresses(resolver, "rebind.example", allow_private=False)
    assert dns_server.queries == Counter({"hooks.example": 1, "inside.example": 1, "rebind.example": 2})


def test_a_nameserver_setting_is_an_address_with_an_optional_port():
    assert split_nameserver("192.0.2.53") == ("192.0.2.53", 53)
    assert split_nameserver("127.0.0.1:5353") == ("127.0.0.1", 5353)
    assert split_nameserver("[2001:db8::53]:5300") == ("2001:db8::53", 5300)
    for bad in ("dns.example", "1.2.3.4:99999", "[::1"):
        with pytest.raises(ValueError):
            split_nameserver(bad)
