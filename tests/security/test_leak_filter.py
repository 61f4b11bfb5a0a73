"""The leak filter's evidence lookup on the real Postgres: the rows the server-side prefilter
returns are a superset of those in which the filter's own (Python) matching finds a marker, so
the filter decides exactly as if it had read every message of the subject; and markers found in
the cited messages need no further lookup."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from agent_memory.core.models import Message, Session
from agent_memory.security.leak_filter import (
    _ROWS_MENTIONING_SQL,
    _containing,
    _Evidence,
    emails,
    filter_items,
    identifier_tokens,
    phone_digits,
)
from agent_memory.store.db import tenant_transaction

# Pieces chosen for the edges of the matching: case, LIKE's metacharacters in e-mail local parts,
# characters whose Python lower-case is ASCII (KELVIN SIGN, I WITH DOT ABOVE), digits that are not
# ASCII, separators inside phone numbers, and a backslash.
PIECES = ("Kim", "kim", "KIM", "k\u212aim", "L\u0130N", "lin", "ana_b", "ana%b", "a\\b", "ops-7", "x.y",
          "ana_b@example.com", "Ana%B@Example.COM", "\u212aim@example.org", "lin.w@ex-ample.io",
          "+1 (415) 555-0199", "415.555.0199", "4155550199", "\u0664\u0661\u0665-555-0199", "2019-2023",
          "room 1500000", "call 020 7946 0958", "ok", "the", "and", "met", "at", "Oslo", "\u00e9t\u00e9")


def _text(rng: random.Random) -> str:
    return " ".join(rng.choices(PIECES, k=rng.randint(1, 8)))


def _markers(text: str) -> tuple[set[str], set[str], set[str]]:
    return identifier_tokens(text), set(emails(text)), set(phone_digits(text))


async def _append(client, tenant: str, subject: str, texts: list[str], rng: random.Random | None = None) -> None:
    """Messages m0, m1, ...; with `rng`, random speakers and image captions too."""
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    messages = [Message(message_id=f"m{i}", turn_index=i, role="user", content=text,
                        speaker=rng.choice((None, "Lin", "kim", "ana_b@example.com")) if rng else None,
                        image_caption=rng.choice((None, None, _text(rng))) if rng else None,
                        created_at=t0 + timedelta(minutes=i))
                for i, text in enumerate(texts)]
    await client.append_messages(tenant, subject, Session(session_id="s1", started_at=t0, messages=messages))


async def test_the_prefilter_returns_every_row_the_filter_would_match(client, services, tenant):
    rng = random.Random(7)
    texts = [_text(rng) for _ in range(120)]
    await _append(client, tenant, "lin", texts, rng)
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT message_id, content, speaker, image_caption FROM messages "
                                 "WHERE tenant_id = %s AND subject_id = %s", (tenant, "lin"))
        rows = {r[0]: tuple(r[1:]) for r in await cur.fetchall()}
        tokens, addresses, phones = set(), set(), set()
        for row in rows.values():
            t, e, p = _markers(" ".join(part for part in row if part))
            tokens |= t
            addresses |= e
            phones |= p
        tokens |= {"nobody", "kim2", "a_b"}  # markers in no message
        addresses |= {"nobody@example.com"}
        phones |= {"5550000000"}
        checked = found = 0
        for kind, needles in (("token", tokens), ("email", addresses), ("phone", phones)):
            for needle in sorted(needles):
                if not needle.isascii():
                    continue  # the filter reads every message for these
                params = {"tenant": tenant, "subject": "lin",
                          "texts": [_containing(needle.lower(), loose="ki")] if kind != "phone" else [],
                          "digits": [_containing(needle)] if kind == "phone" else []}
                cur = await conn.execute(_ROWS_MENTIONING_SQL, params)
                returned = set(await cur.fetchall())
                for row in rows.values():
                    evidence = _Evidence()
                    evidence.add([row])
                    matches = {"token": evidence.has_token, "email": evidence.has_email,
                               "phone": evidence.has_phone}[kind](needle)
                    found += matches
                    assert not matches or row in returned, (kind, needle, row)
                checked += 1
    assert checked > 40 and found > 100  # the corpus exercises the matching, not only misses


async def test_the_filter_keeps_what_any_own_message_says_and_drops_the_rest(client, services, tenant):
    await _append(client, tenant, "kim", ["hi"])  # kim is another subject of the tenant
    filler = [f"note {n} about Oslo" for n in range(200)]
    said = ["Mail me at Ana%B@Example.COM", "my number: +1 (415) 555-0199", "\u212aIM@example.org is Kim's",
            "kim and I met", "office 020 7946 0958"]
    await _append(client, tenant, "lin", [*filler, *said])
    cited = ["m0"]  # cites a filler message: every marker below is found by the lookup, not the citation
    items = {"ana%b@example.com wrote": True, "call 415-555-0199": True, "kim@example.org": True,
             "Kim said so": True, "020-7946-0958": True,
             "ana_b@example.com wrote": False,  # '_' is not a wildcard: another address
             "call 415-555-0100": False, "kim@example.com": False}
    kept, report = await filter_items(services.pool, services.redis, tenant, "lin", list(items), text_of=str,
                                      cited_of=lambda _: cited, id_of=str)
    assert kept == [text for text, keep in items.items() if keep]
    assert report.reasons == {"email": 2, "phone": 1}

    # Found in the cited message itself: kept the same way.
    kept, report = await filter_items(services.pool, services.redis, tenant, "lin", ["call 4155550199"],
                                      text_of=str, cited_of=lambda _: [f"m{len(filler) + 1}"], id_of=str)
    assert kept == ["call 4155550199"] and report.dropped == 0
