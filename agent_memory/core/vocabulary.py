"""The key vocabulary (docs/recall.md, "What gets written"): one thing has one key, whatever the provider.

`canonical_extraction` maps every fact of an extraction onto the vocabulary. It is applied in one
place, the extract_facts activity, before the result is recorded, so the rule extractor, a remote
model and a small local model all write `location/home_city`, never `location/city` beside it
(the conflict checker compares keys: two spellings of one thing would be two facts).

- Aliases of a namespace/key go to the canonical key (`location/city`, `profile/home_city` →
  `location/home_city`; `work/occupation` → `work/job`; a trip's key → `travel/trip_city`).
- Preferences are `preference/<object>` = like | dislike: `dislike/<x>` becomes `preference/<x>`
  = dislike, "love"/"enjoy"/"likes" become like; a generic key (`preference/food` = "sushi")
  takes the object from the value.
- Languages spoken are `language/<language>` = its name, one fact per language.
- Budgets are `budget/<canonical purpose>` (`BUDGET_PURPOSES`, else `general`); pets
  `pet/<name in lower case>` = species in English.
- A temporary fact without an end ends DEFAULT_TEMPORARY_DAYS after it was observed.

The mapping is idempotent, and the rule extractor's output (already canonical) passes through
unchanged. Values are kept as said except where the vocabulary fixes them (polarities,
relationship statuses, diet restrictions, spicy food, species).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import timedelta

from agent_memory.core.models import ExtractedFact, ExtractionResult

__all__ = ["BUDGET_PURPOSES", "DEFAULT_TEMPORARY_DAYS", "VOCABULARY_VERSION", "canonical_extraction",
           "canonical_fact", "key_slug"]

# Part of the extraction's operation key and recorded request: a changed mapping makes a new
# operation instead of reusing a result normalised the old way.
VOCABULARY_VERSION = "3"  # 2: van, suv, truck, ute, motorbike, scooter are car budgets; 3: language/<language>

# A temporary fact (a trip, a stay) whose end the extractor could not resolve ends this many days
# after it was observed: most trips are shorter, and an unended trip must not stay the subject's
# whereabouts for ever.
DEFAULT_TEMPORARY_DAYS = 14

_CJK = "\u3400-\u9fff\uf900-\ufaff"
_MAX_KEY = 60

# --- keys ------------------------------------------------------------------------------------------

_ALIASES: dict[tuple[str, str], tuple[str, str]] = {}


def _alias(target: tuple[str, str], *sources: str) -> None:
    for source in sources:
        namespace, key = source.split("/")
        _ALIASES[(namespace, key)] = target


_alias(("profile", "name"), "profile/full_name", "profile/first_name", "profile/preferred_name", "profile/nickname",
       "profile/user_name", "name/name", "name/full_name")
_alias(("location", "home_city"), "location/city", "location/home", "location/current_city", "location/residence",
       "location/city_of_residence", "location/place_of_residence", "location/lives_in", "location/living_in",
       "location/location", "profile/home_city", "profile/city", "profile/location",
       "profile/residence", "home/city", "residence/city")
_alias(("travel", "trip_city"), "location/trip_city", "location/trip", "location/destination",
       "location/travel_destination", "location/trip_destination", "location/travel_city", "location/current_trip",
       "trip/city", "trip/destination", "trip/location", "trip/place", "trip/trip_city")
_alias(("work", "job"), "work/job_title", "work/occupation", "work/title", "work/role", "work/position",
       "work/profession", "profile/job", "profile/job_title", "profile/occupation", "profile/profession",
       "job/title", "job/job", "occupation/occupation")
_alias(("work", "employer"), "work/company", "work/company_name", "work/employer_name", "work/workplace",
       "work/organization", "work/organisation", "profile/employer", "profile/company", "job/employer",
       "job/company")
_alias(("relationship", "status"), "relationship/relationship_status", "relationship/marital_status",
       "relationship/relationship", "profile/marital_status", "profile/relationship_status",
       "profile/relationship")
_alias(("diet", "restriction"), "diet/diet", "diet/dietary_restriction", "diet/diet_type", "diet/type",
       "diet/dietary_preference", "profile/diet")
_alias(("diet", "spicy"), "diet/spicy_food", "diet/spice", "diet/spiciness")

# A key of the travel namespace that names the trip's place (not its dates or budget).
_TRIP_WORDS = re.compile(r"(?:^|_)(?:trip|city|destination|place|location|visit|visiting|vacation|holiday|stay)(?:_|$)")

_PREFERENCE_NAMESPACES = {"preference": None, "preferences": None, "like": "like", "likes": "like",
                          "dislike": "dislike", "dislikes": "dislike", "hobby": "like", "hobbies": "like",
                          "interest": "like", "interests": "like"}
# Keys that name a kind of thing, not the thing: the object is then the value.
_GENERIC_OBJECTS = re.compile(r"^(?:favou?rite(?:_\w+)?|food|drink|music|hobby|activity|sport|thing|item|object|"
                              r"genre|cuisine|band|artist|game|show|movie|film|book|colou?r|dish|snack|"
                              r"beverage|preference|like|dislike|interest)s?$")
_PET_NAMESPACES = {"pet", "pets", "animal", "animals"}

# Budget purposes (docs/recall.md): the words that name each, in the order they are tried.
BUDGET_PURPOSES: dict[str, tuple[str, ...]] = {
    "computer": ("laptop", "notebook", "computer", "pc", "macbook", "电脑", "笔记本"),
    "phone": ("phone", "iphone", "smartphone", "mobile", "手机"),
    "trip": ("trip", "travel", "vacation", "holiday", "旅游", "旅行", "度假", "出行"),
    "housing": ("rent", "apartment", "flat", "housing", "房租", "租房"),
    "food": ("grocery", "groceries", "food", "meals", "伙食", "买菜", "吃饭"),
    "renovation": ("renovation", "remodel", "remodeling", "装修"),
    "wedding": ("wedding", "婚礼", "结婚"),
    "bike": ("bike", "bicycle", "自行车", "单车"),  # before car: 自行车 holds 车
    "car": ("car", "van", "suv", "truck", "ute", "motorbike", "scooter", "车", "买车"),
    "house": ("house", "home_purchase", "home purchase", "down payment", "买房", "房子", "首付"),
}
_BUDGET_KEY = re.compile(r"(?:^|_)budget(?:_|$)|预算")


def key_slug(text: str) -> str:
    """A namespace or key as stored: lower case, runs of non-word characters one underscore
    (Chinese stays as written: \\w is Unicode-aware)."""
    return re.sub(r"\W+", "_", unicodedata.normalize("NFKC", text).lower()).strip("_")[:_MAX_KEY]


def _purpose(words: str) -> str:
    """The canonical purpose a budget key names ("laptop", "monthly_rent", "电脑"), else general."""
    if words in BUDGET_PURPOSES:
        return words
    parts = set(words.split("_"))
    for canonical, names in BUDGET_PURPOSES.items():
        for name in names:
            if re.search(f"[{_CJK}]", name) or "_" in name:
                if name in words:
                    return canonical
            elif name in parts or f"{name}s" in parts:
                return canonical
    return "general"


# --- values ----------------------------------------------------------------------------------------


def _plain(value: str) -> str:
    text = unicodedata.normalize("NFKC", value).casefold().strip()
    return " ".join(text.split()).strip(".!。！")


_POLARITY = {
    **dict.fromkeys(("like", "likes", "liked", "love", "loves", "loved", "enjoy", "enjoys", "enjoyed", "fan",
                     "a fan", "favorite", "favourite", "prefer", "prefers", "preferred", "positive", "喜欢", "爱",
                     "热爱", "很喜欢", "爱好"), "like"),
    **dict.fromkeys(("dislike", "dislikes", "disliked", "hate", "hates", "hated", "not a fan", "does not like",
                     "doesn't like", "don't like", "do not like", "negative", "不喜欢", "讨厌"), "dislike"),
}
_STATUS = {
    **{s: s for s in ("single", "in a relationship", "engaged", "married", "divorced", "widowed")},
    "dating": "in a relationship", "taken": "in a relationship", "in relationship": "in a relationship",
    "partnered": "in a relationship", "widow": "widowed", "widower": "widowed", "separated": "divorced",
    "单身": "single", "恋爱": "in a relationship", "恋爱中": "in a relationship", "订婚": "engaged",
    "已婚": "married", "结婚": "married", "离婚": "divorced", "离异": "divorced", "丧偶": "widowed",
}
_RESTRICTION = {"vegetarian": "vegetarian", "vegan": "vegan", "pescatarian": "pescatarian",
                "pescetarian": "pescatarian", "吃素": "vegetarian", "素食": "vegetarian", "素食者": "vegetarian",
                "纯素": "vegan"}
_SPICY = {"no spicy food": "no spicy food", "eats spicy food": "eats spicy food",
          **dict.fromkeys(("no", "none", "avoids spicy food", "no spicy", "doesn't eat spicy food",
                           "does not eat spicy food", "can't eat spicy food", "dislikes spicy food", "不吃辣",
                           "不能吃辣"), "no spicy food"),
          **dict.fromkeys(("yes", "eats spicy", "likes spicy food", "loves spicy food", "can eat spicy food",
                           "能吃辣", "吃辣", "爱吃辣"), "eats spicy food")}
_SPECIES = {"puppy": "dog", "pup": "dog", "doggo": "dog", "dogs": "dog", "a dog": "dog", "kitten": "cat",
            "kitty": "cat", "cats": "cat", "a cat": "cat", "bunny": "rabbit", "tortoises": "tortoise",
            "goldfish": "fish", "budgie": "parrot", "小猫": "cat", "猫咪": "cat", "猫": "cat", "小狗": "dog",
            "狗狗": "dog", "狗": "dog", "兔子": "rabbit", "小兔子": "rabbit", "鹦鹉": "parrot", "仓鼠": "hamster",
            "金鱼": "fish", "鱼": "fish", "乌龟": "turtle"}
_KNOWN_SPECIES = frozenset({"dog", "cat", "rabbit", "hamster", "parrot", "bird", "fish", "turtle", "horse", "snake",
                            "lizard", "ferret", "guinea pig", "mouse", "rat", "tortoise", "gecko", "gerbil",
                            "chinchilla", "hedgehog", *_SPECIES})


def _mapped(value: str, table: dict[str, str]) -> str:
    """The vocabulary's value for `value`, or `value` as said when the table has none."""
    return table.get(_plain(value), value)


def _species(value: str) -> str:
    plain = _plain(value)
    return _SPECIES.get(plain, plain if plain in _KNOWN_SPECIES else value)


# --- facts -----------------------------------------------------------------------------------------


def canonical_fact(fact: ExtractedFact) -> ExtractedFact:
    """The fact with its canonical namespace, key and (where fixed) value, and a default end
    when it is temporary without one. The same fact when it is canonical already."""
    namespace, key, value = key_slug(fact.namespace) or fact.namespace, key_slug(fact.key) or fact.key, fact.value
    namespace, key = _ALIASES.get((namespace, key), (namespace, key))
    if namespace in ("travel", "trip", "trips") and _TRIP_WORDS.search(key) and not _BUDGET_KEY.search(key):
        namespace, key = "travel", "trip_city"
    if namespace in ("budget", "budgets") or (_BUDGET_KEY.search(key) and namespace not in _PREFERENCE_NAMESPACES):
        words = re.sub(r"(?:^|_)budget(?=_|$)|预算", "", key).strip("_")
        if not words and namespace in ("travel", "trip", "trips"):
            words = "trip"  # travel/budget
        namespace, key = "budget", _purpose(words)
    elif namespace in _PREFERENCE_NAMESPACES:
        polarity = _PREFERENCE_NAMESPACES[namespace]
        if _GENERIC_OBJECTS.match(key) and _plain(value) not in _POLARITY and key_slug(value):
            key, value = key_slug(value), polarity or "like"  # the object is in the value
        elif polarity is not None:
            value = polarity  # dislike/<x> = anything: the namespace says how it is taken
        namespace, value = "preference", _mapped(value, _POLARITY)
    elif namespace in _PET_NAMESPACES:
        namespace = "pet"
        if _plain(key.replace("_", " ")) in _KNOWN_SPECIES and _plain(value) not in _KNOWN_SPECIES \
                and key_slug(value):
            key, value = key_slug(value), key.replace("_", " ")  # pet/dog = "Rex" is pet/rex = dog
        value = _species(value)
    elif namespace in ("allergy", "allergies", "health", "medical") or (namespace, key) in (
            ("diet", "allergy"), ("diet", "allergies"), ("diet", "food_allergy")):
        if key in ("allergy", "allergies", "food_allergy", "food_allergies") and key_slug(value):
            namespace, key = "diet", f"allergy_{key_slug(value)}"[:_MAX_KEY]
        elif namespace in ("allergy", "allergies"):
            namespace, key = "diet", f"allergy_{key}"[:_MAX_KEY]
    elif namespace in ("language", "languages") or (namespace, key) in (
            ("profile", "language"), ("profile", "languages"), ("skills", "languages")):
        # One fact per language: language/<language> = its name ("languages/spoken" = "Spanish" too).
        if key_slug(value) and value.strip().lower() not in ("yes", "true", "fluent", "native"):
            namespace, key = "language", key_slug(value)[:_MAX_KEY]
        else:
            namespace = "language"
    if (namespace, key) == ("relationship", "status"):
        value = _mapped(value, _STATUS)
    elif (namespace, key) == ("diet", "restriction"):
        value = _mapped(value, _RESTRICTION)
    elif (namespace, key) == ("diet", "spicy"):
        value = _mapped(value, _SPICY)
    permanence = "temporary" if (namespace, key) == ("travel", "trip_city") else fact.permanence
    valid_until = fact.valid_until
    if permanence == "temporary" and valid_until is None and fact.operation != "end":
        valid_until = fact.observed_at + timedelta(days=DEFAULT_TEMPORARY_DAYS)
    changes = {name: new for name, new in (("namespace", namespace), ("key", key), ("value", value),
                                           ("permanence", permanence), ("valid_until", valid_until))
               if getattr(fact, name) != new}
    return fact.model_copy(update=changes) if changes else fact


def canonical_extraction(result: ExtractionResult) -> ExtractionResult:
    """Every fact of the extraction in the vocabulary (bookkeeping unchanged)."""
    facts = [canonical_fact(f) for f in result.facts]
    if all(new is old for new, old in zip(facts, result.facts, strict=True)):
        return result
    return result.model_copy(update={"facts": facts})
