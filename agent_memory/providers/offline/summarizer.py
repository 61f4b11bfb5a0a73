"""Third-person summaries of a session, plus the observations (agent_memory.providers.notes).

The summarizer sees the messages only (no extracted facts), so each summary sentence is one salient
sentence of a turn rewritten in the third person, citing that turn:

- the speaker's self-references become the speaker: their name when it is a name, else "the user"
  (用户) or "the assistant" (助手); the first reference names them, later ones are "they/their"
  (自己), because a name does not say whether to write "she" or "he";
- a verb after "I" agrees with the name ("I live" → "Lin lives"); "you" becomes the other party;
- a statement without a self-reference is reported ("Lin said …", "林伟提到…");
- a request or a question becomes what was asked ("Can you suggest …?" → "Lin asked the assistant to
  suggest …", "哪里…？" → "林伟问哪里…"); other questions are left out rather than guessed at;
- of an unnamed assistant, only suggestions are kept ("You could try X" → "The assistant suggested that
  Lin try X"); its other talk is not memory of the user. A turn by a speaker named like a person is a
  person's, whatever its role (two people talking under one conversation), and is kept like the user's;
- after "said", the first word keeps its capital only when the session writes it capitalised inside a
  sentence (a name).

Nothing is added that the sentence did not say: no motive, feeling or relation is inferred, and
greetings, thanks and acknowledgements are dropped. Sentences are chosen by salience within the
token cap (estimate_tokens) and kept in the session's order. Pure stdlib and deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from agent_memory.core.models import Message, SummaryResult, SummarySentence
from agent_memory.providers.base import SUMMARY_TOKEN_CAP, estimate_tokens
from agent_memory.providers.hashing import _CJK_RUN, _LATIN_WORD, _STOPWORDS
from agent_memory.providers.notes import informative, write_observations

_CJK = "\u3400-\u9fff\uf900-\ufaff"
_HAS_CJK = re.compile(f"[{_CJK}]")
_IMAGE_TAGS = re.compile(r"\s*\[image:[^\]]*\]")
_SUMMARY_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")

# Speaker labels that name a role, not a person: such a speaker is "the user" / "the assistant".
_ROLE_WORDS = frozenset("user assistant system bot ai human model agent customer client me you 用户 助手 系统".split())
_NAME = re.compile(r"^[^\W\d_][^\W\d_'’.\- ]*(?:[ '’.\-][^\W\d_]+){0,3}$")

# A greeting, interjection or discourse marker opening a sentence: dropped before the rewrite.
_EN_OPENER = re.compile(
    r"^(?:(?:hi|hey|hello|wow|woah|whoa|oh|ah|aw+|omg|yay|haha|lol|ok|okay|yeah|yep|yes|well|so|anyway|also|and|"
    r"but|btw|by the way|good news|big news|news|update|guess what|fun fact|quick question|fyi)\b[\s,!.:;—-]*)+",
    re.I)
_ZH_OPENER = re.compile(r"^(?:(?:哈+|嗯+|哦+|啊+|哇+|好的|好吧|对了|另外|那个|话说|其实|顺便说一下|告诉你|挺好的?|还不错|不错|"
                        r"太好了|是的|对的?|没错)[，,！!。~～：:\s]*)+")
_LEAD_LABEL = re.compile(r"^[^:：.!?。！？]{1,24}[:：]\s*")  # "Big news: …", "Update: …"

# --- English --------------------------------------------------------------------------------------

_MODALS = frozenset("can could will would shall should may might must can't couldn't won't wouldn't shouldn't "
                    "mightn't mustn't cannot".split())
_IRREGULAR_PRESENT = {"have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't",
                      "am": "is", "'m": "is", "are": "is", "aren't": "isn't", "'ve": "has", "'re": "is",
                      "were": "was", "weren't": "wasn't"}
_PLURAL = {"am": "are", "'m": "are", "was": "were", "wasn't": "weren't", "'ve": "have", "'re": "are"}
_IRREGULAR_PAST = frozenset(
    "was were had did went got made took came saw left bought found began became gave knew met lost told thought "
    "felt kept sold spent wrote ran flew drove ate grew won paid said heard sent built brought caught taught fell "
    "forgot broke chose rode sang swam woke wore put cut quit read set let hurt hit cost held led lent meant slept "
    "stood understood sat shut spoke stole struck swore threw tore bit hid shook stuck sunk wasn't didn't hadn't "
    "used".split())
_ADVERB = re.compile(r"^(?:just|also|really|still|never|always|usually|often|recently|finally|actually|already|"
                     r"only|even|sometimes|now|mostly|rarely|seldom|totally|definitely|absolutely|currently|"
                     r"\w+ly)$", re.I)
_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|'[A-Za-z]+|[^A-Za-z']+|'")
_LOWERABLE_START = frozenset("the a an it its this that these those there here some many most all every each one "
                             "nothing everything something someone everyone no".split())
# A question asking the other party to do something, and a question about something.
_EN_REQUEST = re.compile(
    r"^(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|please\s+|(?:do\s+)?you\s+have\s+any\s+)?"
    r"(?P<verb>suggest|recommend|give|tell|help|find|share|show|explain|send|list|check|remind|book|plan|"
    r"draft|write|make|pick|look\s+up|point)\b(?P<rest>.*?)[?.!]*$", re.I)
_EN_ASK_FOR = re.compile(r"^(?:any|got\s+any|some)\s+(?P<what>(?:good\s+|other\s+|more\s+)?"
                         r"(?:ideas?|suggestions?|recommendations?|tips?|advice|thoughts?)\b.*?)\s*[?.!]*$", re.I)
_EN_WH = re.compile(r"^(?P<wh>what|where|when|how|which|who|why)(?P<mid>(?:\s+\w+){0,2}?)\s+"
                    r"(?P<aux>should|can|could|would|will|do|does|must|might)\s+(?P<subj>I|you|we)\s+(?P<rest>.+?)"
                    r"\s*[?]+$", re.I)
_EN_THERE = re.compile(r"^(?P<aux>is|are)\s+there\s+(?P<rest>.+?)\s*[?]+$", re.I)
# What the assistant suggests: "You could try X", "Try X", "I'd recommend X".
_EN_SUGGEST = re.compile(
    r"^(?:(?:maybe|perhaps)\s+)?(?:you\s+(?:could|might|should|can)\s+(?:also\s+)?(?P<verb>\w+)|"
    r"(?P<imp>try|consider|visit|check\s+out|book|bring|pack)\b|"
    r"i(?:'d|\s+would)?\s+(?:recommend|suggest)(?:ing)?)(?P<rest>.*?)[.!]*$", re.I)


def _third_singular(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR_PRESENT:
        return _IRREGULAR_PRESENT[low]
    if low in _MODALS or low in _IRREGULAR_PAST or low.endswith(("ed", "n't", "ing")) or not low.isalpha():
        return verb
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"


def _plural(verb: str) -> str:
    return _PLURAL.get(verb.lower(), verb)


@dataclass
class _Refs:
    """How one sentence refers to a party: the first reference names it, later ones are pronouns."""

    name: str  # "Lin", "the user"
    named: bool = False

    def subject(self) -> tuple[str, bool]:
        """(words, singular): the name the first time, then "they"."""
        if self.named:
            return "they", False
        self.named = True
        return self.name, True

    def possessive(self) -> str:
        if self.named:
            return "their"
        self.named = True
        return f"{self.name}'s"

    def object(self) -> str:
        if self.named:
            return "them"
        self.named = True
        return self.name


def _en_rewrite(sentence: str, speaker: _Refs, other: _Refs) -> str:
    """First and second person rewritten in the third person, verbs agreeing with their new subject."""
    tokens = _TOKEN.findall(sentence)
    out: list[str] = []
    agree: str | None = None  # "singular"/"plural": the next verb (after adverbs) agrees with it
    for token in tokens:
        low = token.lower()
        word = token
        if agree is not None and token.strip() and re.match(r"^'?[A-Za-z]", token):
            if _ADVERB.match(low):
                out.append(token)
                continue
            word = _third_singular(token) if agree == "singular" else _plural(token)
            if token.startswith("'"):
                word = " " + word  # "I'm" → "Lin is"
            agree = None
            out.append(word)
            continue
        if not token.strip() or not re.match(r"^[A-Za-z']", token):
            out.append(token)
            continue
        agree = None
        base, _, tail = low.partition("'")
        if base == "i" and low in ("i", "i'm", "i've", "i'll", "i'd"):
            words, singular = speaker.subject()
            out.append(words)
            agree = "singular" if singular else "plural"
            if tail:
                contraction = {"m": "'m", "ve": "'ve", "ll": " will", "d": " would"}[tail]
                if contraction.startswith("'"):
                    out.append(" " + (_third_singular(contraction) if singular else _plural(contraction)))
                else:
                    out.append(contraction)
                agree = None
        elif low in ("we", "we're", "we've", "we'll", "we'd"):
            words, _ = speaker.subject()
            out.append("they" if words == "they" else f"{words} and others")
            out.append({"we": "", "we're": " are", "we've": " have", "we'll": " will", "we'd": " would"}[low])
        elif low in ("me", "myself"):
            out.append(speaker.object() if low == "me" else "themselves")
        elif low in ("my", "our"):
            out.append(speaker.possessive())
        elif low in ("mine", "ours"):
            out.append(f"{speaker.possessive()}s" if speaker.named else f"{speaker.name}'s")
        elif low == "us":
            out.append("them")
        elif low in ("you", "you're", "you've", "you'll", "you'd"):
            if _is_subject_slot(out):
                words, singular = other.subject()
                out.append(words)
                if low == "you":
                    agree = "singular" if singular else "plural"
                else:
                    out.append({"you're": " is" if singular else " are", "you've": " has" if singular else " have",
                                "you'll": " will", "you'd": " would"}[low])
            else:
                out.append(other.object())
        elif low in ("your", "yours"):
            out.append(other.possessive() + ("s" if low == "yours" and other.named else ""))
        elif low in ("yourself",):
            out.append("themselves")
        else:
            out.append(token)
    return "".join(out).strip()


def _is_subject_slot(out: list[str]) -> bool:
    """Whether the next word starts a clause (so "you" there is a subject, not an object)."""
    text = "".join(out).rstrip()
    return not text or bool(re.search(r"(?:[,;:]|\b(?:and|but|or|because|if|when|while|that|so|since|as))$", text,
                                      re.I))


def _en_statement(sentence: str, speaker: _Refs, other: _Refs, proper: frozenset[str] = frozenset()) -> str | None:
    if re.search(r"\b(?:I|I'm|I've|I'll|I'd|my|me|mine|myself|we|we're|we've|our|us)\b", sentence, re.I):
        text = _en_rewrite(sentence, speaker, other)
    else:
        first, _, rest = sentence.partition(" ")
        # Reported after "said", the first word keeps its capital only if it is a name: one the session
        # writes capitalised where no sentence starts.
        lowerable = first.lower() in _LOWERABLE_START or (first[:1].isupper() and first not in proper)
        lowered = first.lower() + (" " + rest if rest else "") if lowerable else sentence
        said, _ = speaker.subject()
        text = f"{said} said {_en_rewrite(lowered, _Refs(speaker.name, True), other)}"
    return _finish(text)


def _en_question(sentence: str, speaker: _Refs, other: _Refs) -> str | None:
    body = sentence.strip()
    if m := _EN_REQUEST.match(body):
        who, _ = speaker.subject()
        target = other.object()
        rest = _en_rewrite(m["rest"], speaker, other)
        return _finish(f"{who} asked {target} to {m['verb'].lower()}{rest if rest.startswith(' ') else ' ' + rest}")
    if m := _EN_ASK_FOR.match(body):
        who, _ = speaker.subject()
        return _finish(f"{who} asked for {_en_rewrite(m['what'], speaker, other)}")
    if m := _EN_WH.match(body):
        who, _ = speaker.subject()
        subj = m["subj"].lower()
        aux = m["aux"].lower()
        new_subj = ("they" if subj in ("i", "we") else other.object())
        rest = _en_rewrite(m["rest"], speaker, other)
        if aux in ("do", "does"):
            verb, _, tail = rest.partition(" ")
            verb = _third_singular(verb) if new_subj != "they" else verb
            clause = f"{new_subj} {verb}{' ' + tail if tail else ''}"
        else:
            clause = f"{new_subj} {aux} {rest}"
        return _finish(f"{who} asked {m['wh'].lower()}{m['mid'].lower()} {clause}")
    if m := _EN_THERE.match(body):
        who, _ = speaker.subject()
        return _finish(f"{who} asked whether there {m['aux'].lower()} {_en_rewrite(m['rest'], speaker, other)}")
    return None  # another kind of question: left out rather than guessed at


def _en_suggestion(sentence: str, assistant: _Refs, user: _Refs) -> str | None:
    m = _EN_SUGGEST.match(sentence.strip())
    if m is None:
        return None
    rest = _en_rewrite(m["rest"], _Refs(assistant.name, True), _Refs(user.name, True)).strip()
    who, _ = assistant.subject()
    if m["verb"] or m["imp"]:
        verb = (m["verb"] or m["imp"]).lower()
        return _finish(f"{who} suggested that {user.name} {verb} {rest}")
    return _finish(f"{who} recommended {rest}") if rest else None


def _finish(text: str | None) -> str | None:
    if not text:
        return None
    text = re.sub(r"\s+", " ", text).strip().rstrip(" ,;:-—")
    text = re.sub(r"[.!?…~]+$", "", text)
    if not re.search(r"\w", text):
        return None
    return text[0].upper() + text[1:] + "."


# --- Chinese --------------------------------------------------------------------------------------

_ZH_REQUEST = re.compile(r"^(?:你|您)?(?:能|可以|能不能|可不可以|能否)?(?:请)?(?:帮我|给我|替我)?"
                         r"(?P<verb>推荐|介绍|建议|找|查|讲讲|说说|列|安排|提醒|订|写)(?P<rest>.*?)(?:吗|嘛|吧|呢)?[？?]*$")
# What the assistant suggests: "你可以试试…", "建议你…".
_ZH_SUGGEST = re.compile(r"^(?:你|您)?(?:可以|不妨|最好|建议|推荐)(?:你|您)?(?P<rest>.+)$")
_ZH_WH = re.compile(r"什么|哪|怎么|怎样|如何|几|多少|谁|为什么|为啥")
_ZH_TAIL = re.compile(r"(?:吗|呢|吧|呀|啊|哈|啦|哦|嘛)?[？?！!。.~～…\s]*$")


def _zh_rewrite(sentence: str, speaker: str, other: str) -> tuple[str, bool]:
    """(the sentence with 我/我们/你 replaced, whether it referred to the speaker)."""
    named = False

    def me(match: re.Match[str]) -> str:
        nonlocal named
        plural = match.group(0) in ("我们", "咱们")
        words = ("他们" if plural else "自己") if named else (f"{speaker}等人" if plural else speaker)
        named = True
        return words

    text = re.sub(r"我们|咱们|我", me, sentence)
    text = re.sub(r"你们|您|你", other, text)
    return text, named


def _zh_statement(sentence: str, speaker: str, other: str) -> str | None:
    text, named = _zh_rewrite(_ZH_TAIL.sub("", sentence), speaker, other)
    if not text:
        return None
    return (text if named else f"{speaker}提到{text}") + "。"


def _zh_question(sentence: str, speaker: str, other: str) -> str | None:
    body = sentence.strip()
    if m := _ZH_REQUEST.match(body):
        rest, _ = _zh_rewrite(_ZH_TAIL.sub("", m["rest"]), speaker, other)
        return f"{speaker}请{other}{m['verb']}{rest}。"
    if _ZH_WH.search(body):
        text, _ = _zh_rewrite(_ZH_TAIL.sub("", body), speaker, other)
        return f"{speaker}问{text}。"
    return None


# --- choosing -------------------------------------------------------------------------------------


def _terms(text: str) -> set[str]:
    lower = text.lower()
    words = {w for w in _LATIN_WORD.findall(_CJK_RUN.sub(" ", lower))
             if len(w) >= 3 and w not in _STOPWORDS and "'" not in w}  # contractions are function words
    bigrams = {run[i:i + 2] for run in _CJK_RUN.findall(lower) for i in range(len(run) - 1)}
    return words | bigrams


def _salience(text: str, doc_freq: Counter[str], role: str) -> float:
    terms = _terms(text)
    score = sum(math.log1p(doc_freq[t]) for t in terms) / math.sqrt(max(1, len(terms)))
    if re.search(r"\b(?:I|I'm|I've|my|me)\b|我", text):
        score += 1.0
    score += 0.5 * min(3, len(re.findall(r"(?<=\s)[A-Z][a-z]+", text)))  # capitalised, not sentence-initial
    if re.search(r"\d|[一二三四五六七八九十]月|星期|周[一二三四五六日]", text):
        score += 0.7
    if role == "user":
        score += 0.3
    else:
        score -= 1.0  # the user's own words before the assistant's suggestions
    if text.rstrip().endswith(("?", "？")):
        score -= 0.5
    return score


def _truncate(text: str, cap: int) -> str:
    """Longest prefix of text, cut at a word boundary (or between CJK characters), that fits."""
    cuts = [i for i in range(1, len(text) + 1)
            if i == len(text) or text[i].isspace() or _HAS_CJK.match(text[i - 1]) or _HAS_CJK.match(text[i])]
    best = ""
    for i in cuts:
        piece = text[:i].rstrip()
        if estimate_tokens(piece) > cap:
            break
        best = piece
    if not best:  # one unbroken token longer than the cap (a URL): cut between characters
        for i in range(1, len(text) + 1):
            if estimate_tokens(text[:i]) > cap:
                break
            best = text[:i]
    return best.rstrip(" ,;:")


def _is_name(speaker: str | None) -> bool:
    if not speaker:
        return False
    s = speaker.strip()
    return (bool(_NAME.match(s)) and s.lower() not in _ROLE_WORDS and not s.isupper()) or bool(
        re.fullmatch(f"[{_CJK}]{{1,4}}", s) and s not in _ROLE_WORDS)


def _label(message: Message, chinese: bool) -> str:
    if message.speaker and _is_name(message.speaker):
        return message.speaker.strip()
    if message.role == "user":
        return "用户" if chinese else "the user"
    return "助手" if chinese else "the assistant"


@dataclass(frozen=True)
class _Candidate:
    order: int
    text: str  # the third-person sentence
    source: str  # the sentence it rewrites (for salience)
    message: Message


def _proper_words(messages: list[Message]) -> frozenset[str]:
    """Words the session writes capitalised inside a sentence: names, not sentence starts."""
    return frozenset(w for m in messages for w in re.findall(r"(?<=[\w,;:] )([A-Z][\w'’-]*)", m.content)
                     if w != "I" and not w.isupper())


def _person(message: Message) -> bool:
    """Whether a turn is a person's: the user's, or one by a speaker named like a person (a second
    human in the conversation, whatever role the client gave it); an unnamed assistant is not."""
    return message.role == "user" or _is_name(message.speaker)


def _candidates(messages: list[Message]) -> list[_Candidate]:
    user_speaker = next((m for m in messages if m.role == "user"), None)
    assistant_speaker = next((m for m in messages if m.role != "user"), None)
    proper = _proper_words(messages)
    found: list[_Candidate] = []
    for message in messages:
        content = _IMAGE_TAGS.sub("", message.content.replace("’", "'"))
        for raw in _SUMMARY_SPLIT.split(content):
            sentence = raw.strip()
            if not re.search(r"\w", sentence):
                continue
            chinese = bool(_HAS_CJK.search(sentence))
            opener = _ZH_OPENER if chinese else _EN_OPENER
            body = _LEAD_LABEL.sub("", opener.sub("", sentence), count=1).strip() or sentence
            body = opener.sub("", body).strip() or body
            head, comma, tail = body.partition(",")
            if comma and len(_terms(head)) < 2 and len(_terms(tail)) >= 2:
                body = tail.strip()  # "It's great, my flat is …": the reaction says nothing
            if len(_terms(body)) < 2:
                continue  # "ok", "Thanks!", "It's fine." carry nothing
            question = body.rstrip().endswith(("?", "？"))
            if not question and not informative(body):
                continue
            speaker = _label(message, chinese)
            if message.role == "user":
                other = _label(assistant_speaker, chinese) if assistant_speaker else ("助手" if chinese else
                                                                                   "the assistant")
            else:
                other = _label(user_speaker, chinese) if user_speaker else ("用户" if chinese else "the user")
            text: str | None
            if chinese:
                if not _person(message):
                    suggested = _ZH_SUGGEST.match(body)
                    text = None if suggested is None or question else (
                        f"{speaker}建议{other}{_zh_rewrite(_ZH_TAIL.sub('', suggested['rest']), speaker, other)[0]}。")
                else:
                    text = (_zh_question if question else _zh_statement)(body, speaker, other)
            elif not _person(message):
                text = None if question else _en_suggestion(body, _Refs(speaker), _Refs(other))
            elif question:
                text = _en_question(body, _Refs(speaker), _Refs(other))
            else:
                text = _en_statement(body, _Refs(speaker), _Refs(other), proper)
            if text:
                found.append(_Candidate(len(found), text, body, message))
    return found


class ExtractiveSummarizer:
    """The offline summarizer (its provider name is historical: it rewrites, it no longer quotes)."""

    name = "extractive-summarizer"
    runs_in_worker = True  # computed in this process: its steps run as local activities
    # 2: observations; 3: with the question they answer; 4: greetings no longer hide statements;
    # 5: sentences rewritten in the third person, no speaker prefixes.
    version = "5"

    async def summarize(self, messages: list[Message], *, token_cap: int = SUMMARY_TOKEN_CAP) -> SummaryResult:
        candidates = _candidates(messages)
        if not candidates or token_cap <= 0:
            return SummaryResult(provider=self.name, sentences=[], token_count=0,
                                 observations=write_observations(messages))
        doc_freq: Counter[str] = Counter(t for c in candidates for t in _terms(c.source))
        ranked = sorted(candidates, key=lambda c: (-_salience(c.source, doc_freq, c.message.role), c.order))

        def joined(chosen: list[_Candidate]) -> str:
            return " ".join(c.text for c in sorted(chosen, key=lambda c: c.order))

        chosen: list[_Candidate] = []
        for candidate in ranked:  # greedy by salience; re-estimate the whole text, the estimate is not additive
            if estimate_tokens(joined([*chosen, candidate])) <= token_cap:
                chosen.append(candidate)
        if not chosen:
            best = ranked[0]
            piece = _truncate(best.text, token_cap)
            if piece:
                chosen = [_Candidate(best.order, piece, best.source, best.message)]
        chosen.sort(key=lambda c: c.order)
        sentences = [SummarySentence(text=c.text, source_message_ids=[c.message.message_id]) for c in chosen]
        return SummaryResult(provider=self.name, sentences=sentences, token_count=estimate_tokens(joined(chosen)),
                             observations=write_observations(messages))
