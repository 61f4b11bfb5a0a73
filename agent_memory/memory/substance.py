"""The substance gate: whether a session is worth an episode.

A session of fewer than MIN_EPISODE_MESSAGES messages, or one of nothing but small talk, gets no
episode: its summary step makes no provider call (the gate's result is recorded in its place, with
the session's notes), so no summary is paid for and no episode is written or embedded. Its facts
are extracted and committed as for any session. The commit counts each gated session once
(`episodes_gated:{reason}`, shown by `agent-memory stats`).

Small talk is judged per sentence: a message is small talk when every sentence in it is a greeting,
thanks, an acknowledgement, a reaction, an emoji or filler, i.e. nothing is left of it once such
phrases, emoji and punctuation are taken away.
"""

from __future__ import annotations

import re
from typing import Literal

from psycopg_pool import AsyncConnectionPool

from agent_memory.core.models import Message, SummaryResult
from agent_memory.providers.notes import write_observations
from agent_memory.store.counters import read_counts

MIN_EPISODE_MESSAGES = 4
GateReason = Literal["too_short", "small_talk"]
GATE_REASONS: tuple[GateReason, ...] = ("too_short", "small_talk")
GATED_COUNTER = "episodes_gated"  # the operator counter, per reason: episodes_gated:too_short

# English phrases of small talk, longest first where one contains another. A name may follow a
# greeting or thanks ("Hi Lin", "Thanks, Sam").
_EN_PHRASES = [
    r"how (?:are|r) (?:you|u|things)(?: doing)?(?: today)?", r"how(?:'s| is) (?:it going|everything|your day|life)",
    r"what(?:'s| is) up", r"how about you", r"and (?:you|u)", r"(?:you|u) too", r"me too", r"same here",
    r"nice (?:to )?(?:meet|see|chat with|talk(?:ing)? to) (?:you|u)", r"good to (?:hear|see (?:you|u)|know)",
    r"good (?:morning|afternoon|evening|night|day)", r"have a (?:nice|good|great|lovely) (?:day|one|evening|night|weekend)",
    r"(?:see|talk to|catch) (?:you|u|ya)(?: later| soon| tomorrow)?", r"talk (?:later|soon)",
    r"thank (?:you|u)(?: (?:so|very) much| a lot| again)?(?: for (?:asking|everything|the help|your help|helping))?",
    r"thanks(?: (?:so|very) much| a lot| again| a ton)?(?: for (?:asking|everything|the help|your help|helping))?",
    r"(?:you(?:'re| are)|ur) welcome", r"no (?:worries|problem|prob)", r"(?:sounds|looks) (?:good|great|fine|perfect)",
    r"got it", r"makes sense", r"that(?:'s| is) (?:great|good|nice|cool|awesome|fine|ok|okay|perfect|funny|amazing)",
    r"i(?:'m| am) (?:fine|good|great|ok|okay|well|alright|doing (?:well|good|fine|great))",
    r"all (?:right|good)", r"i see", r"love (?:it|that)", r"take care", r"good luck",
]
_EN_WORDS = (
    "hi hii hey heya hello hallo yo sup howdy greetings morning evening night bye goodbye byebye cya gn gm "
    "thanks thx ty tysm cheers welcome ok okay k kk okey alright sure yes yeah yep yup ya no nope nah np "
    "lol lmao rofl haha hahaha hehe hihi hah heh xd wow woah whoa oh ooh ah aah aw aww hmm hm um umm uh uhh er "
    "cool nice great awesome perfect fine good right exactly indeed totally definitely absolutely true same "
    "please pls plz there well so anyway again too"
).split()
_EN_SMALL_TALK = re.compile(
    r"\b(?:" + "|".join(_EN_PHRASES) + r"|" + "|".join(sorted(_EN_WORDS, key=len, reverse=True)) + r")\b", re.I)
_EN_ADDRESSED = re.compile(r"\b(?i:hi|hey|hello|thanks(?: so much| a lot)?|thank you(?: so much)?|bye|see you|"
                           r"morning|night)[,\s]+[A-Z][a-z]+\b")  # the name capitalised
_ZH_SMALL_TALK = re.compile(
    r"你好|您好|大家好|哈喽|嗨|早上好|早安|午安|下午好|晚上好|晚安|再见|拜拜|回头见|谢谢你?|多谢|感谢|辛苦了|不客气|"
    r"没关系|没事|没问题|好的|好滴|好吧|好呀|好啊|好|行|可以|嗯+|哦+|噢+|啊+|呀|哇+|哈+|嘿+|呵+|嘻+|对的|对|是的|是啊|"
    r"收到|明白了?|了解|知道了|你也是|在吗|最近怎么样|你怎么样|还好|挺好的?|不错|太好了|真棒|厉害|加油|"
    r"[了啦呢吧嘛哟喔]")
_EMOTICON = re.compile(r"(?:[:;=8xX][-^']?[)(DPpOo3/\\|*]+|<3+|\^_*\^|[Tt]_[Tt]|[oO]_[oO])")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


def small_talk_sentence(sentence: str) -> bool:
    """Whether nothing is left of a sentence once greetings, thanks, acknowledgements, reactions,
    fillers, emoji and punctuation are taken away."""
    text = _EMOTICON.sub(" ", sentence)
    text = _EN_ADDRESSED.sub(" ", text)
    text = _EN_SMALL_TALK.sub(" ", text)
    text = _ZH_SMALL_TALK.sub("", text)
    return not re.search(r"[^\W_]", text)  # letters, digits or CJK left: it says something


def small_talk(message: Message) -> bool:
    """A message is small talk when every sentence in it is (an empty message too)."""
    return all(small_talk_sentence(s) for s in _SENTENCES.split(message.content) if s.strip())


def gate_reason(messages: list[Message]) -> GateReason | None:
    """Why the session gets no episode, or None when it is worth one."""
    if len(messages) < MIN_EPISODE_MESSAGES:
        return "too_short"
    if all(small_talk(m) for m in messages):
        return "small_talk"
    return None


class EpisodeGate:
    """Stands in for the summarizer of a session without substance: its result (no sentences,
    the session's notes) is recorded under its own name and version in the summarizer's place."""

    name = "episode-gate"
    version = "1"

    def result(self, messages: list[Message], reason: GateReason) -> SummaryResult:
        return SummaryResult(provider=self.name, sentences=[], token_count=0, gated=reason,
                             observations=write_observations(messages))


async def gated_counts(pool: AsyncConnectionPool, tenant_id: str) -> dict[str, int]:
    """Sessions the gate kept from an episode, per reason, and their total."""
    counts = await read_counts(pool, tenant_id, [f"{GATED_COUNTER}:{r}" for r in GATE_REASONS])
    by_reason: dict[str, int] = {r: counts[f"{GATED_COUNTER}:{r}"] for r in GATE_REASONS}
    return {"total": sum(by_reason.values()), **by_reason}
