"""The offline extractor v4's mechanisms, each on phrasing that no rule names word for word:
dropped subjects, verb classes of moving and changing jobs, the segmenter's value boundaries in
Chinese, corrections that name the wrong value instead of the slot, laughter as tone, and amounts
that are budgets by the words around them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.core.models import KnownFact, Message
from agent_memory.providers.offline import RuleFactExtractor
from agent_memory.providers.offline.zh_segment import leading_noun

AT = datetime(2024, 5, 8, 10, 0, tzinfo=UTC)


def facts(*contents: str, known: dict[str, str] | None = None):
    messages = [Message(message_id=f"m{i}", turn_index=i, role="user", content=c, created_at=AT + timedelta(minutes=i))
                for i, c in enumerate(contents)]
    current = [KnownFact(namespace=k.split("/")[0], key=k.split("/")[1], value=v) for k, v in (known or {}).items()]
    result = asyncio.run(RuleFactExtractor().extract(messages, current_facts=current))
    return {(f.operation, f"{f.namespace}/{f.key}", f.value) for f in result.facts}


@pytest.mark.parametrize(("text", "expected"), [
    ("relocated back to Tampere after the whole Oulu thing, so good to be home", ("assert", "location/home_city", "Tampere")),
    ("headed back north to Leeds last month, the south was too pricey", ("assert", "location/home_city", "Leeds")),
    ("been back in Ghent since march, way closer to my sister", ("assert", "location/home_city", "Ghent")),
    ("got poached by Zalando, couldn't say no", ("assert", "work/employer", "Zalando")),
    ("quit Aldi, I'm at Tesco now, the hours are better", ("assert", "work/employer", "Tesco")),
    ("bumped my bike budget up to €900, the cheap ones kept breaking", ("assert", "budget/bike", "€900")),
    ("tied the knot in a tiny ceremony last saturday", ("assert", "relationship/status", "married")),
])
def test_verb_classes_and_dropped_subjects(text, expected):
    assert expected in facts(text)


@pytest.mark.parametrize("text", [
    "my brother relocated back to Tampere",
    "my sister got poached by Zalando",
    "I don't think I moved back to Leeds for good",
])
def test_someone_else_or_a_hedge_stores_nothing_of_it(text):
    assert not {f for f in facts(text) if f[1] in ("location/home_city", "work/employer")}


@pytest.mark.parametrize(("raw", "name"), [("合肥快一年了", "合肥"), ("健身房那种氛围", "健身房"), ("无锡啊不对", "无锡"),
                                           ("米哈游了", "米哈游")])
def test_the_segmenter_ends_a_chinese_value_at_the_first_function_word(raw, name):
    assert leading_noun(raw) == name


def test_a_correction_that_names_the_wrong_value_finds_its_slot_among_the_current_facts():
    # Nothing in the sentence says "employer"; the wrong value does.
    assert facts("wait, it's Globex actually, not Initech, I mixed them up",
                 known={"work/employer": "Initech", "location/home_city": "Oslo"}) == {
        ("correct", "work/employer", "Globex")}
    assert ("correct", "location/home_city", "芜湖") in facts("说错了，其实是芜湖，不是合肥。",
                                                             known={"location/home_city": "合肥"})


def test_a_slip_corrected_in_the_same_message_is_not_a_correction_of_itself():
    found = facts("I live in Graz. sorry, I meant Linz! Graz is where my parents are")
    assert {f[2] for f in found if f[1] == "location/home_city"} == {"Linz"}


def test_laughter_is_tone_in_a_message_that_goes_on_and_a_hedge_in_a_bare_quip():
    long_one = asyncio.run(RuleFactExtractor().extract([Message(
        message_id="a", turn_index=0, role="user", created_at=AT,
        content="finally got the keys!! so yeah, I live in Porto now lol. still sleeping on a mattress")])).facts
    quip = asyncio.run(RuleFactExtractor().extract([Message(
        message_id="b", turn_index=0, role="user", created_at=AT, content="lol I live in Porto now")])).facts
    assert [f.confidence for f in long_one] == [0.9]
    assert [f.confidence for f in quip] == [0.4]


def test_a_tag_question_does_not_turn_a_statement_into_a_question():
    assert ("assert", "relationship/status", "single") in facts("single again and honestly? loving it")


@pytest.mark.parametrize(("text", "expected"), [
    # Lower-case chat: a known city is a place, a name no dictionary has is an organisation.
    ("living in porto now, the rent is way better", ("assert", "location/home_city", "porto")),
    ("started at wealthsimple last week, still learning the ropes", ("assert", "work/employer", "wealthsimple")),
    # Profile-style self descriptions and lists.
    ("About me: Ines, 31, lives in Aarhus, works as a sound engineer.", ("assert", "location/home_city", "Aarhus")),
    ("Name: Ines. Employer: Vestas. Role: sound engineer.", ("assert", "work/employer", "Vestas")),
    ("life update: new job (Klarna), new flat, new cat (Pesto)", ("assert", "pet/pesto", "cat")),
    # Amounts in words are budgets by the words around them.
    ("I've got fifteen hundred quid to spend on a new bike", ("assert", "budget/bike", "fifteen hundred quid")),
    # Chinese: the segmenter ends the value, GeoNames knows which names are cities.
    ("目前在宁波，平时就在宁波上班。", ("assert", "location/home_city", "宁波")),
    ("近况：换了工作（米哈游），搬了家。", ("assert", "work/employer", "米哈游")),
])
def test_names_in_lower_case_lists_and_chinese_are_found_by_what_they_are(text, expected):
    assert expected in facts(text)


@pytest.mark.parametrize("text", [
    "started at noon, finished late",          # "noon" is a word, not an employer
    "moved to a bigger desk at work",          # "a bigger desk" is no city
    "我在京东上班，做运营",                        # 京东 is a company, not a city
])
def test_common_words_are_not_taken_for_names(text):
    assert not {f for f in facts(text) if f[1] == "location/home_city"
                or (f[1] == "work/employer" and f[2] in {"noon", "a bigger desk"})}


def test_an_answer_to_the_assistants_question_fills_the_slot_it_asks_about():
    def answered(question: str, answer: str):
        messages = [Message(message_id="q", turn_index=0, role="assistant", content=question, created_at=AT),
                    Message(message_id="a", turn_index=1, role="user", content=answer,
                            created_at=AT + timedelta(minutes=1))]
        return {(f.namespace, f.key, f.value) for f in asyncio.run(RuleFactExtractor().extract(messages)).facts}

    assert ("location", "home_city", "Tucson") in answered("Are you still in Phoenix?", "No, Tucson now. Moved in May.")
    assert ("work", "employer", "小米") in answered("还在华为吗？", "早不在了，现在在小米")
    assert ("budget", "bike", "$900") in answered("What's your budget for the new bike?", "$900")
    assert ("relationship", "status", "in a relationship") in answered("你有对象吗？", "有，谈了两年了")


@pytest.mark.parametrize(("text", "known", "expected"), [
    ("the missus reckons I need a haircut", {}, ("assert", "relationship/status", "married")),
    ("me and my other half have been together since uni", {}, ("assert", "relationship/status", "in a relationship")),
    ("my ex-husband has the kids this weekend", {}, ("assert", "relationship/status", "divorced")),
    ("I'm not with Marco anymore. it's fine", {}, ("end", "relationship/status", "")),
    ("Hazel (my greyhound) refuses to go out in the rain", {}, ("assert", "pet/hazel", "dog")),
    ("I make my living as a tattoo artist", {}, ("assert", "work/job", "tattoo artist")),
    ("wrong company in my last message: Oracle → Okta.", {"work/employer": "Oracle"},
     ("correct", "work/employer", "Okta")),
    ("我们家的团子是只橘猫，特别能吃", {}, ("assert", "pet/团子", "cat")),
    ("被派去拉萨支援一个月，今天刚落地", {}, ("assert", "travel/trip_city", "拉萨")),
    ("我说反了，我是讨厌榴莲，喜欢榴莲的是我老公。", {"preference/榴莲": "like"}, ("correct", "preference/榴莲", "dislike")),
])
def test_more_ways_of_saying_a_fact_an_end_or_a_correction(text, known, expected):
    assert expected in facts(text, known=known)


def conversation(*turns: str):
    """Turns alternate as written: "A:" opens an assistant turn, anything else is the user's."""
    messages = [Message(message_id=f"t{i}", turn_index=i, role="assistant" if t.startswith("A:") else "user",
                        content=t.removeprefix("A:").strip(), created_at=AT + timedelta(minutes=i))
                for i, t in enumerate(turns)]
    return {(f.operation, f"{f.namespace}/{f.key}", f.value)
            for f in asyncio.run(RuleFactExtractor().extract(messages)).facts}


@pytest.mark.parametrize(("turns", "expected"), [
    # A self-introduction: a given name (a census list) or a word no dictionary has.
    (("Hi there, I'm Grace, new here",), ("assert", "profile/name", "Grace")),
    (("hello, I am Oksana, I moved here for my studies",), ("assert", "profile/name", "Oksana")),
    # A signature under the message, in either language.
    (("see you tomorrow and thanks again!\n\n- Oksana",), ("assert", "profile/name", "Oksana")),
    (("帮我润色一下这段话：“王经理您好，材料已发您邮箱，请查收。——市场部 周晓彤”",), ("assert", "profile/name", "周晓彤")),
    # Correcting how the assistant addressed us, and answering how to be addressed.
    (("A: Morning, Dan! How did the interview go?", "Daniel, please. And it went well"), ("assert", "profile/name", "Daniel")),
    (("A: 我该怎么称呼你？", "叫我小满就行"), ("assert", "profile/name", "小满")),
])
def test_names_said_in_passing(turns, expected):
    assert expected in conversation(*turns)


@pytest.mark.parametrize("text", ["I'm Canadian, eh, so the cold doesn't bother me", "I'm Sorry, that came out wrong",
                                  "This is Amazing, thank you"])
def test_a_capitalised_adjective_is_no_name(text):
    assert not {f for f in facts(text) if f[1] == "profile/name"}


@pytest.mark.parametrize(("text", "expected"), [
    ("took Pepper, our cockapoo, to the groomer this morning", ("assert", "pet/pepper", "dog")),
    # The pronoun refers to the pet named in a possessive before it.
    ("had to pay for Loki's jabs today. He's a two-year-old husky and hates the vet", ("assert", "pet/loki", "dog")),
    ("the rabbits, Clover and Bramble, dug under the fence again", ("assert", "pet/bramble", "rabbit")),
    ("we adopted a kitten last week, a little tabby we've named Sprout", ("assert", "pet/sprout", "cat")),
    ("家里两个主子：年糕是只布偶，汤圆是只柯基", ("assert", "pet/汤圆", "dog")),
])
def test_pets_named_in_passing_by_breed_list_or_pronoun(text, expected):
    assert expected in facts(text)


def test_a_cat_person_is_no_cat():
    assert not {f for f in facts("Went to Maria's place. She's a cat person through and through") if f[1].startswith("pet/")}


@pytest.mark.parametrize(("text", "expected", "absent"), [
    ("a ten-day course in Lyon starting Monday, then back to work", ("assert", "travel/trip_city", "Lyon"),
     "location/home_city"),
    ("on placement in Leeds until June, then home to Bristol", ("assert", "travel/trip_city", "Leeds"), None),
    ("on placement in Leeds until June, then home to Bristol", ("assert", "location/home_city", "Bristol"), None),
    ("I'm in Tallinn, if that matters for the delivery options", ("assert", "location/home_city", "Tallinn"), None),
    ("I'm in Tallinn for a conference, back Friday", ("assert", "travel/trip_city", "Tallinn"), "location/home_city"),
    ("I am staying in Pune only, since 2015, near the university", ("assert", "location/home_city", "Pune"),
     "travel/trip_city"),
    ("这周都在东京，盯展会的布置，周六回来", ("assert", "travel/trip_city", "东京"), "location/home_city"),
    ("苏州住了快五年了，越来越喜欢", ("assert", "location/home_city", "苏州"), None),
])
def test_a_stay_is_a_trip_and_a_long_stay_a_home(text, expected, absent):
    found = facts(text)
    assert expected in found
    assert absent is None or not {f for f in found if f[1] == absent}


@pytest.mark.parametrize(("turns", "known", "expected"), [
    # A starred respelling fixes the value it most resembles.
    (("finally moved to Prto, unpacking forever", "*Porto, autocorrect strikes again"), {},
     ("correct", "location/home_city", "Porto")),
    (("it's 900 a month not 1100, I misread my own notes",), {"budget/housing": "1100 a month"},
     ("correct", "budget/housing", "900 a month")),
    (("团子不是仓鼠，是豚鼠，我一直说错",), {"pet/团子": "hamster"}, ("correct", "pet/团子", "guinea pig")),
    (("刚发现打错字了😅 是晓雯，不是晓文",), {"profile/name": "晓文"}, ("correct", "profile/name", "晓雯")),
])
def test_corrections_by_respelling_by_number_and_by_subject(turns, known, expected):
    assert expected in facts(*turns, known=known)


@pytest.mark.parametrize(("text", "expected"), [
    ("在字节待了三年了，卷不动了", ("assert", "work/employer", "字节")),
    ("北漂第五年，还是租房", ("assert", "location/home_city", "北京")),
    ("在一家三甲医院任护士长，夜班多", ("assert", "work/job", "护士长")),
    ("装修计划取消了，那笔装修预算也没了", ("end", "budget/renovation", "")),
    ("finally retired last Friday, the garden awaits", ("end", "work/job", "")),
    ("I do nights as a forklift operator down at the depot", ("assert", "work/job", "forklift operator")),
    ("Three months vegan and I feel great", ("assert", "diet/restriction", "vegan")),
])
def test_more_phrasings_of_jobs_homes_and_ends(text, expected):
    assert expected in facts(text)


@pytest.mark.parametrize("text", ["等孩子毕业了想搬去厦门，现在还走不开", "闺蜜下周结婚，我当伴娘"])
def test_an_intent_or_a_role_at_a_wedding_stores_no_home_or_job(text):
    assert not {f for f in facts(text) if f[1] in ("location/home_city", "work/job")}


@pytest.mark.parametrize(("turns", "expected"), [
    (("we bought this terrace in Whitby in 2015 and we're not going anywhere",), ("assert", "location/home_city", "Whitby")),
    (("the wedding fund's been bumped up to £9,000 after the car sold",), ("assert", "budget/wedding", "£9,000")),
    (("A: Thanks, Maya! Anything else?", "ha, it's Mia not Maya. but thanks"), ("assert", "profile/name", "Mia")),
    (("took Ziggy and Luna out at dawn. both collies, both nuts",), ("assert", "pet/luna", "dog")),
    (("she's my ex now, we're not together anymore",), ("end", "relationship/status", "")),
    (("I've never cared for opera, all that wailing",), ("assert", "preference/opera", "dislike")),
    (("搁大连待了大半辈子，海鲜吃不腻",), ("assert", "location/home_city", "大连")),
    (("在成都打拼第三年，房租又涨了",), ("assert", "location/home_city", "成都")),
    (("狗狗豆包最近老是挠耳朵，要去医院吗",), ("assert", "pet/豆包", "dog")),
    (("射箭不玩了，太费钱",), ("end", "preference/射箭", "")),
    (("本人一枚平平无奇的测试工程师",), ("assert", "work/job", "测试工程师")),
])
def test_phrasings_of_the_seventh_round(turns, expected):
    assert expected in conversation(*turns)


def test_a_demonstrative_taste_is_the_known_object_the_message_names_or_nothing():
    assert ("assert", "preference/榴莲", "dislike") in facts("上次吃完榴莲胃疼，现在闻到那味儿就想吐，讨厌死了",
                                                          known={"preference/榴莲": "like"})
    assert not {f for f in facts("现在闻到那味儿就想吐，讨厌死了") if f[1].startswith("preference/")}


@pytest.mark.parametrize(("turns", "expected"), [
    (("Baking hot again out here in Adelaide, 43 today. What can I make without turning the oven on?",),
     ("assert", "location/home_city", "Adelaide")),
    (("we loaded the van Sunday and went on back down to Mobile to be near my sister",),
     ("assert", "location/home_city", "Mobile")),
    (("looking at a used van, nothing over £6,000, what should I check?",), ("assert", "budget/car", "£6,000")),
    (("the renovation's been knocked down to 18k after the quote came in",), ("assert", "budget/renovation", "18k")),
    (("Another ten-hour day at Accenture and my eyes hurt",), ("assert", "work/employer", "Accenture")),
    (("the glamour of being a night porter, eh. what can I eat at 4am",), ("assert", "work/job", "night porter")),
    (("I'm not vegetarian any more, bacon won",), ("end", "diet/restriction", "vegetarian")),
    (("can't handle chilli at all since the surgery",), ("assert", "diet/spicy", "no spicy food")),
    (("Pickle's been barking at the postman all week. How do you calm a terrier down?",), ("assert", "pet/pickle", "dog")),
    (("write my landlord a note and end it with 'thanks, Mags' since that's what everyone calls me",),
     ("assert", "profile/name", "Mags")),
    (("A: What should I call you?", "Put Temitope on the letter. But Tope's fine for you"), ("assert", "profile/name", "Tope")),
    (("my old man Rocco (terrier, 12) has gone off his food",), ("assert", "pet/rocco", "dog")),
])
def test_phrasings_of_the_eighth_round(turns, expected):
    assert expected in conversation(*turns)


@pytest.mark.parametrize(("turns", "known", "expected"), [
    (("I told you Leeds before — it's Bradford actually, I just work in Leeds",), {"location/home_city": "Leeds"},
     ("correct", "location/home_city", "Bradford")),
    (("typo earlier, I'm at Monzo not Revolut",), {"work/employer": "Revolut"}, ("correct", "work/employer", "Monzo")),
    (("we had to let biscuit go this morning. the vet was lovely",), {"pet/biscuit": "dog"}, ("end", "pet/biscuit", "")),
    (("上次手滑打错了，我其实是京东的，不是淘宝",), {"work/employer": "淘宝", "work/job": "运营"},
     ("correct", "work/employer", "京东")),
])
def test_corrections_and_ends_of_known_facts_in_the_eighth_round(turns, known, expected):
    assert expected in facts(*turns, known=known)


@pytest.mark.parametrize(("text", "expected"), [
    ("从网易出来以后去了米哈游，到现在半年了", ("assert", "work/employer", "米哈游")),
    ("在腾讯熬了五年，终于升职了", ("assert", "work/employer", "腾讯")),
    ("住苏州这么多年还是吃不惯甜", ("assert", "location/home_city", "苏州")),
    ("这三天在厦门跑客户，晚上吃啥", ("assert", "travel/trip_city", "厦门")),
    ("上个礼拜领的证，现在改名字要去哪", ("assert", "relationship/status", "married")),
    ("离不开奶茶，一天两杯", ("assert", "preference/奶茶", "like")),
    ("做外贸的，最近汇率愁死了", ("assert", "work/job", "外贸")),
])
def test_chinese_phrasings_of_the_eighth_round(text, expected):
    assert expected in facts(text)


@pytest.mark.parametrize("text", ["周末想自己做个辣子鸡，教教我", "当面说清楚比较好", "做梦都想去冰岛"])
def test_making_a_dish_or_saying_it_face_to_face_is_no_job(text):
    assert not {f for f in facts(text) if f[1] == "work/job"}


@pytest.mark.parametrize(("turns", "known", "expected"), [
    (("did I say Lidl before?? it's Aldi. no idea why I wrote that",), {"work/employer": "Lidl"},
     ("correct", "work/employer", "Aldi")),
    (("I called Nutmeg a rabbit last time, but she's a guinea pig, sorry",), {"pet/nutmeg": "rabbit"},
     ("correct", "pet/nutmeg", "guinea pig")),
    (("I keep calling Sam my boyfriend out of habit, he's my husband now",), {"relationship/status": "in a relationship"},
     ("correct", "relationship/status", "married")),
    (("scrap the sofa money, the car needed a new clutch",), {"budget/general": "£900"}, ("end", "budget/general", "")),
    (("Poundworld went bust and my job went with it",), {"work/employer": "Poundworld"}, ("end", "work/employer", "")),
])
def test_corrections_and_ends_said_sideways(turns, known, expected):
    assert expected in facts(*turns, known=known)


def test_not_with_a_person_ends_a_relationship_not_a_job():
    found = facts("I'm not with Oliver now, we split in March", known={"relationship/status": "in a relationship",
                                                                      "work/employer": "Boots"})
    assert ("end", "relationship/status", "") in found
    assert not {f for f in found if f[1] == "work/employer"}


@pytest.mark.parametrize(("text", "expected"), [
    ("I'm vegetarian and allergic to peanuts.", {("assert", "diet/restriction", "vegetarian"),
                                                 ("assert", "diet/allergy_peanuts", "peanuts")}),
    ("I'm a nurse and allergic to latex.", {("assert", "work/job", "nurse"), ("assert", "diet/allergy_latex", "latex")}),
    ("I have a dog and two cats.", {("assert", "pet/dog", "dog"), ("assert", "pet/cat", "cat")}),
    ("I work at Acme and hate my commute.", {("assert", "work/employer", "Acme"),
                                             ("assert", "preference/commute", "dislike")}),
])
def test_each_part_of_a_sentence_sharing_its_subject_states_its_own_fact(text, expected):
    assert facts(text) == expected


def test_the_past_reaches_a_conjunct_sharing_its_subject():
    messages = [Message(message_id="m0", turn_index=0, role="user", content="I used to live in Paris and work at Google.",
                        created_at=AT)]
    result = asyncio.run(RuleFactExtractor().extract(messages))
    assert {(f.namespace, f.key, f.value) for f in result.facts} == {("location", "home_city", "Paris"),
                                                                     ("work", "employer", "Google")}
    assert all(f.valid_until == AT and f.observed_at < AT for f in result.facts)  # states that held until then


@pytest.mark.parametrize("text", [
    "I'm not vegan and allergic to nothing.",
    "My sister is vegetarian and allergic to peanuts.",  # someone else's
])
def test_a_shared_subject_does_not_carry_a_fact_the_first_part_would_not_state(text):
    assert not {f for f in facts(text) if f[1].startswith(("diet/allergy", "work/employer"))}


@pytest.mark.parametrize("text", [
    "I'm really grateful to have a job I enjoy every day.",  # a time, not a thing liked
    "I just like playing for fun!",  # a manner
    "I also like holding them.",  # a pronoun whose referent is elsewhere
    "Knowing I'm helping create a more loving world is amazing.",  # a gerund that needs its clause
    "I'm in to help out with that.",  # "in to" is no town
    "Volunteering at the shelter made me feel great to help.",  # a causative, not a title
])
def test_what_follows_a_frame_without_naming_a_thing_states_no_fact(text):
    assert facts(text) == set()


@pytest.mark.parametrize(("text", "expected"), [
    ("I love action and sci-fi movies.", {("assert", "preference/action", "like"),
                                          ("assert", "preference/sci_fi_movies", "like")}),
    ("I love being around friends and having such a great time.",
     {("assert", "preference/being_around_friends", "like")}),
])
def test_a_hyphen_joins_a_word_and_an_item_naming_no_thing_is_no_fact(text, expected):
    assert facts(text) == expected
