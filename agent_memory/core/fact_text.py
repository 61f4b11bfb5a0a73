"""How a fact reads in the lexical index, the vector index and the prompt: a short sentence
("lives in Shanghai"), so a question in plain words ("where does she live?") finds it."""

from __future__ import annotations

import unicodedata

# (namespace, key) or namespace → how the value reads; {v} is the value.
PHRASES: dict[tuple[str, str] | str, str] = {
    ("profile", "name"): "is named {v}",
    ("location", "home_city"): "lives in {v} (home city)",
    ("travel", "trip_city"): "is traveling to {v} (trip)",
    ("work", "job"): "works as {v} (job)",
    ("work", "employer"): "works at {v} (employer)",
    ("diet", "restriction"): "eats {v} (diet)",
    ("diet", "spicy"): "diet: {v}",
    "preference": "likes {v}",
    "dislike": "dislikes {v}",
    "pet": "has a pet {k}: {v}",
    "budget": "budget for {k}: {v}",
}


def fact_parts(namespace: str, key: str, value: str) -> tuple[str, str, str]:
    """`fact_text` in three parts: what comes before the part that names this fact's object, that
    part, and what comes after ("likes ", "jazz", ""; "is allergic to ", "peanuts", " (diet: …)"), so
    facts said together can share one line ("likes jazz, tea")."""
    phrase = PHRASES.get((namespace, key)) or PHRASES.get(namespace)
    readable_key = key.replace("_", " ")
    if namespace == "preference" and value.strip().lower() in ("like", "dislike"):
        # preference/<object> holds a polarity: "likes jazz", "dislikes durian".
        return f"{value.strip().lower()}s ", readable_key, ""
    if phrase is None:
        if key.startswith("allergy_"):
            return "is allergic to ", value, " (diet: food to avoid)"
        if key.startswith("avoid_"):
            return "does not eat ", value, " (diet: food to avoid)"
        return f"{namespace} {readable_key}: ", value, ""
    if "{k}" in phrase:
        return phrase.format(v=value, k=readable_key), "", ""  # the key is the object: nothing shared
    before, _, after = phrase.partition("{v}")
    return before, value, after


def fact_text(namespace: str, key: str, value: str) -> str:
    return "".join(fact_parts(namespace, key, value))


def fact_line(namespace: str, key: str, value: str) -> str:
    """`fact_text` as a prompt shows it: a pet's key is the lower-case slug of its name, shown
    capitalised again ("has a pet Waffles: dog")."""
    return "".join(fact_line_parts(namespace, key, value))


def fact_line_parts(namespace: str, key: str, value: str) -> tuple[str, str, str]:
    if namespace == "pet" and key.isascii() and key.replace("_", "").isalpha():
        key = key.replace("_", " ").title().replace(" ", "_")
    return fact_parts(namespace, key, value)


def normalise_value(value: str) -> str:
    """A value as compared: NFKC, case-folded, single-spaced, without a closing full stop."""
    text = unicodedata.normalize("NFKC", value).casefold().strip()
    return " ".join(text.split()).rstrip(".!。！")
