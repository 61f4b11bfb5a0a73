"""Subject analysis: whether the words before a match leave the user (or "we") as the subject of
the clause, in English and in Chinese."""

from __future__ import annotations

import re

from agent_memory.providers.offline.values import _has_cjk
from agent_memory.providers.offline.zh_segment import names_a_person

_SELF_WORDS = frozenset(
    "i i'm i've i'd i'll im ive we we're we've we'd we'll me myself us am are is was were have has had will "
    "just finally recently also really actually honestly still now so well oh yeah yes yep ok okay guess what big "
    "news good bad great hey hi hello weirdly anyway anyways btw currently already then sorry totally officially "
    "happily too literally basically kinda pretty much last this next year month week weekend spring summer fall "
    "autumn winter today yesterday lol haha and but since because as of course, um uh hmm alright right sadly "
    "luckily fortunately unfortunately surprisingly funny enough update quick heads up fyi mostly newly lately "
    "one two three four five six seven eight nine ten few couple a my our the been being be got get gotten started start starting began begun stopped kept not no never don't didn't can't cannot won't isn't wasn't aren't haven't though although even when while since wow omg yay whew phew thankfully somehow eventually even apparently, guys folks all in all at long "
    "only never ever again the after before months weeks years ago days back".split())
_EN_THIRD = re.compile(
    r"\b(?:my|our|his|her|their|your)\s+(?:\w+\s+)?(?:friend|friends|brother|sister|mom|mum|mother|dad|father|son|"
    r"daughter|kids?|children|colleague|coworker|co-worker|boss|neighbou?r|cousin|aunt|uncle|grandma|grandpa|"
    r"grandmother|grandfather|roommate|parents|family|niece|nephew|in-laws?|classmate|teammate)s?(?:'s)?\b"
    r"|\b(?:he|she|they|someone|somebody|a friend|everyone|nobody|people)\b", re.I)
_EN_FIRST = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|we|we're|we've|we'd)\b", re.I)
_ZH_ALLOWED = re.compile(
    r"(?:我们|咱们|我|咱|俺|本人|自己|现在|目前|最近|刚刚|刚|已经|已|去年|今年|前年|上个?月|上周|上个?星期|这周|"
    r"本周|下周|这个?月|明天|后天|今天|昨天|大前天|前天|也|都|就|一直|还|终于|马上|又|才|正在|正|总算|其实|本来|"
    r"平时|一般|从小|早就|早已|再|继续|真的|很|超|挺|特别|非常|好|嗯|哎|唉|啊|哈+|对|是啊|是的|好吧|嘿|诶|所以|"
    r"然后|而且|但是|不过|可是|结果|后来|如今|这两年|这几年|这些年|这阵子|前阵子|年初|年底|月初|上半年|下半年|"
    r"开始|改|重新|正式|决定|还是|依然|仍然|仍|是|没有|没|不再|不|别|(?:和|跟|与)(?:女朋友|男朋友|对象|老公|老婆|未婚夫|未婚妻|爱人|另一半|家人)|在[^\s,.!?;:。]{1,10}?|\d+年|[一二三四五六七八九十两\d]+(?:年|个月|个星期|周|天)前|一年前|半年前|从此|以后|之后|以前|总之|说实话|老实说|对了|顺便说一下|"
    r"告诉你|跟你说|报告|好消息|坏消息|唉呀|哎呀|天哪|哇|呜呜|总|居然|竟然|果然|反正|毕竟|原来|难怪|怪不得|没想到|\s)*")
_ZH_THIRD = re.compile(r"(?:我|我们|俺)?(?:单位|公司|学校|工厂|爸妈|爹妈|老爸老妈|公婆|岳父母|妈妈?|爸爸?|父母|爷爷|奶奶|外公|外婆|姥姥|姥爷|哥哥?|姐姐?|弟弟?|妹妹?|"
                       r"儿子|女儿|孩子|老公|老婆|朋友|同事|同学|室友|邻居|领导|老板|表哥|表姐|表弟|表妹|堂哥|"
                       r"舅舅|叔叔|阿姨|姑姑|家人|爱人|丈夫|妻子|媳妇|男朋友|女朋友|对象|老伴|闺蜜|男友|女友|未婚夫|未婚妻)|[他她]们?|别人|大家")


# Words before a person that make them an object or a companion, not the subject ("被同事带着", "跟朋友").
_ZH_NOT_SUBJECT = re.compile(r"(?:被|跟|和|同|给|陪|带|与|帮|替|为|让|叫|请|找|随|跟着|随着|在|去|到|回|进|从|离开)(?:我|俺|咱)?(?:的|们)?$")


def _zh_own_clause(local: str) -> bool:
    """A Chinese clause drops its subject; it is the user's unless it names somebody else as its
    subject (a relative, a colleague, 他/她, a person's name) with no 我 after them."""
    for m in reversed(list(_ZH_THIRD.finditer(local))):
        if _ZH_NOT_SUBJECT.search(local[:m.start()]):
            continue
        return bool(re.search(r"我(?![妈爸哥姐弟妹老朋同室])|咱", local[m.end():]))
    return not names_a_person(local) or bool(re.search(r"我|咱", local))


def _clause_start(sentence: str, start: int) -> int:
    cut = max(sentence.rfind(ch, 0, start) for ch in ",;:、—(")
    return cut + 1


def _subject_ok(sentence: str, start: int) -> bool:
    """Whether the clause before `start` leaves the user (or "we") as the subject."""
    prefix = sentence[:start]
    local = prefix[_clause_start(sentence, start):]
    if _has_cjk(local) or (not local.strip() and _has_cjk(sentence)):
        if _ZH_ALLOWED.fullmatch(local) is None and not _zh_own_clause(local):
            return False
        # A subjectless clause continues the sentence's subject: "我妈住在杭州，喜欢跳舞".
        if not re.search(r"我|咱", local) and not re.match(r"\s*(?:我|咱|俺)", sentence[start:]):
            before = prefix[:_clause_start(sentence, start)]
            third = [t for t in _ZH_THIRD.finditer(before) if not _ZH_NOT_SUBJECT.search(before[:t.start()])]
            if third and not re.search(r"我(?![妈爸哥姐弟妹老朋同室])|咱", before[third[-1].end():]):
                return False
        return True
    # English: the local clause may only hold first-person words, adverbs, time words, interjections.
    local = re.split(r"\b(?:and|but|so|because|since|then)\b", local, flags=re.I)[-1]
    # A fronted adverbial ("For the notebook I can …", "In March we moved …") is not a subject.
    local = re.sub(r"^\s*(?:for|on|at|in|with|after|since|from|by|during|as\s+for)\b.*?(?=\b(?:I|we)\b)", "", local,
                   flags=re.I)
    local = re.sub(r"^\s*\w+[\s-]?wise\b,?", "", local, flags=re.I)  # "work wise im a farrier"
    words = re.findall(r"[a-z']+", local.lower())
    if any(w not in _SELF_WORDS for w in words) and not _predicate_of_self(local):
        return False
    # The match itself may open with the subject ("My brother's in Calgary; I'm in Regina").
    opens_with_self = re.match(r"\s*(?:(?-i:I)\b|I'm\b|I've\b|we\b|we're\b|we've\b)", sentence[start:], re.I) is not None
    if not opens_with_self and not any(w in {"i", "i'm", "i've", "i'd", "i'll", "im", "ive", "we", "we're", "we've", "we'd", "we'll"}
                                       for w in words):
        third = list(_EN_THIRD.finditer(prefix))
        if third and not _EN_FIRST.search(prefix[third[-1].end():]):
            return False
    return True


_FIRST_PERSON = {"i", "i'm", "i've", "i'd", "i'll", "im", "ive", "we", "we're", "we've", "we'd", "we'll"}
_IRREGULAR_PAST = frozenset(
    "got went came took made found left bought sold felt kept began begun quit split flew drove ran put set "
    "brought caught gave had heard held knew lost met paid said saw sent spent stood told thought won wrote "
    "ended finally just threw chose drew grew rode ate drank swore wore broke spoke woke stole froze bit hid "
    "shook forgot understood became".split())


def _predicate_of_self(local: str) -> bool:
    """The clause before a match is the user's own predicate: it opens with "I"/"we" (after
    fillers) and names nobody else after it, or it opens with a verb (a dropped subject:
    "bumped my laptop budget up to …", "ended up in Perth")."""
    words = re.findall(r"[A-Za-z']+", local)
    lower = [w.lower() for w in words]
    mine = [i for i, w in enumerate(lower) if w in _FIRST_PERSON]
    if mine:
        # The last "I"/"we" is the clause's subject; what comes before it is an adverbial ("after a
        # year in Seattle we …", "aaand I've …").
        rest = " ".join(words[mine[-1] + 1:])
        return not _EN_THIRD.search(rest) and not re.search(r"\b(?-i:[A-Z])[a-z]+", rest)
    for w in lower:
        if w in _SELF_WORDS:
            continue
        # The first content word: a verb form means the subject was dropped.
        return (w.endswith("ed") or w.endswith("ing") or w in _IRREGULAR_PAST) and not _EN_THIRD.search(local)
    return True
