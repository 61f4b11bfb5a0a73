"""Word lists the rules map onto the vocabulary: species and breeds, job titles, relationship
words, budget purposes, given names and kinship words, canonical values across languages."""

from __future__ import annotations

import re

from agent_memory.core.vocabulary import BUDGET_PURPOSES
from agent_memory.providers.offline.gazetteer import is_dictionary_word, is_first_name, leading_city
from agent_memory.providers.offline.values import _CJK, _clean, _has_cjk

_SPECIES = {"puppy": "dog", "pup": "dog", "doggo": "dog", "kitten": "cat", "kitty": "cat", "bunny": "rabbit",
            "guinea pigs": "guinea pig", "geckos": "gecko", "tortoises": "tortoise", "betta": "fish", "小猫": "cat", "猫咪": "cat", "猫": "cat", "小狗": "dog", "狗狗": "dog", "狗": "dog",
            "兔子": "rabbit", "小兔子": "rabbit", "鹦鹉": "parrot", "仓鼠": "hamster", "金鱼": "fish", "鱼": "fish",
            "乌龟": "turtle", "dogs": "dog", "cats": "cat", "puppies": "dog", "kittens": "cat", "rabbits": "rabbit",
            "hamsters": "hamster", "birds": "bird", "turtles": "turtle", "goldfish": "fish", "budgie": "parrot"}
_BREEDS = {"greyhound": "dog", "labrador": "dog", "lab": "dog", "poodle": "dog", "beagle": "dog", "husky": "dog",
           "corgi": "dog", "terrier": "dog", "retriever": "dog", "shepherd": "dog", "bulldog": "dog",
           "dachshund": "dog", "chihuahua": "dog", "pug": "dog", "collie": "dog", "spaniel": "dog",
           "tabby": "cat", "siamese": "cat", "persian": "cat",
           # Common breeds and casual breed names (a breed said alone names the species).
           "westie": "dog", "springer": "dog", "cocker": "dog", "cockapoo": "dog", "cavapoo": "dog",
           "labradoodle": "dog", "goldendoodle": "dog", "schnauzer": "dog", "shih tzu": "dog",
           "rottweiler": "dog", "doberman": "dog", "pomeranian": "dog",
           "yorkie": "dog", "dalmatian": "dog", "whippet": "dog", "lurcher": "dog", "staffie": "dog",
           "staffy": "dog", "pitbull": "dog", "pittie": "dog", "mastiff": "dog", "malamute": "dog",
           "samoyed": "dog", "shiba": "dog", "akita": "dog", "vizsla": "dog", "weimaraner": "dog",
           "sheepdog": "dog", "bloodhound": "dog", "basset": "dog",
           "mutt": "dog", "heeler": "dog", "kelpie": "dog", "frenchie": "dog", "sausage dog": "dog",
           "dachshunds": "dog", "mongrel": "dog", "newfie": "dog", "bernese": "dog",
           "ragdoll": "cat", "maine coon": "cat", "sphynx": "cat", "moggy": "cat",
           "moggie": "cat", "calico": "cat", "tortie": "cat", "tomcat": "cat", "british shorthair": "cat",
           "cockatoo": "parrot", "macaw": "parrot", "lovebird": "parrot", "parakeet": "parrot",
           "african grey": "parrot", "bearded dragon": "lizard", "leopard gecko": "gecko", "corn snake": "snake"}
_EN_SPECIES = (r"(?P<s>dogs?|pup(?:py|pies)?|doggo|cats?|kitt(?:en|ens|y)|rabbits?|bunny|hamsters?|parrots?|budgie|"
               r"birds?|goldfish|betta(?:\s+fish)?|fish|turtles?|tortoises?|guinea\s+pigs?|geckos?|horse|snakes?|lizards?|"
               r"ferrets?|chinchillas?|hedgehogs?|cockatiels?|canar(?:y|ies)|iguanas?|axolotls?|gerbils?|mice|rats?|"
               + "|".join(sorted(_BREEDS, key=len, reverse=True)) + ")")
_ZH_BREEDS = {"柯基": "dog", "泰迪": "dog", "金毛": "dog", "哈士奇": "dog", "柴犬": "dog", "比熊": "dog", "拉布拉多": "dog",
              "边牧": "dog", "博美": "dog", "京巴": "dog", "萨摩": "dog", "雪纳瑞": "dog", "阿拉斯加": "dog", "布偶": "cat", "英短": "cat", "美短": "cat", "暹罗": "cat", "蓝猫": "cat",
              "二哈": "dog", "德牧": "dog", "萨摩耶": "dog", "贵宾": "dog", "法斗": "dog", "腊肠": "dog", "吉娃娃": "dog",
              "中华田园犬": "dog", "田园犬": "dog", "串串": "dog", "马尔济斯": "dog", "杜宾": "dog", "罗威纳": "dog",
              "三花": "cat", "狸花": "cat", "橘猫": "cat", "大橘": "cat", "加菲": "cat", "缅因": "cat", "无毛猫": "cat",
              "蓝白": "cat", "银渐层": "cat", "金渐层": "cat", "奶牛猫": "cat", "虎斑": "cat", "豚鼠": "guinea pig",
              "荷兰猪": "guinea pig", "龙猫": "chinchilla", "玄凤": "parrot", "虎皮鹦鹉": "parrot", "八哥": "bird",
              "刺猬": "hedgehog", "守宫": "gecko", "蜥蜴": "lizard", "雪貂": "ferret",
              "巴西龟": "turtle", "草龟": "turtle", "陆龟": "tortoise", "垂耳兔": "rabbit", "侏儒兔": "rabbit", "柯尔鸭": "duck"}
# A species is named by its head character (橘猫, 垂耳兔, 巴西龟, 柴犬) or a breed.
_ZH_SPECIES = (r"(?P<s>小兔子|兔子|小猫|猫咪|小狗|狗狗|鹦鹉|仓鼠|金鱼|乌龟|" + "|".join(sorted(_ZH_BREEDS, key=len, reverse=True))
               + r"|(?:橘|黑|白|花|狸花|三花|奶)?猫|(?:土|小|大|老)?狗|(?:[" + _CJK + r"](?<![只条个头匹那这]))?(?:犬|兔|龟)|鱼)")


def _species(said: str) -> str:
    if _has_cjk(said) and said not in _SPECIES:
        head = {"猫": "cat", "狗": "dog", "犬": "dog", "兔": "rabbit", "龟": "turtle", "鱼": "fish"}
        return _ZH_BREEDS.get(said) or head.get(said[-1], said)
    s = re.sub(r"\s+", " ", said.lower())
    s = "fish" if s.startswith("betta") else s
    return _SPECIES.get(s) or _BREEDS.get(s) or s


# Agentive nouns name jobs ("researcher", "hygienist", "attendant"); these agentive nouns do not.
_JOB_SUFFIX = re.compile(r"(?:er|or|ist|yst|ian|ant|ent|ect|eer|ee|ista|man|woman|ive|ary|ic|ch)$")
_JOB_NOUNS = {"nurse", "chef", "cook", "lead", "midwife", "vet", "coach", "pilot", "judge", "clerk", "barista",
              "intern", "nanny", "medic", "paramedic", "ceo", "cto", "cfo", "pm", "dj", "model", "tailor",
              "surgeon", "physician", "attorney", "engineer", "mechanic", "maid", "cop", "soldier"}
_NOT_JOBS = {"jobs", "work", "fan", "lover", "beginner", "runner", "reader", "believer", "member", "user", "owner", "customer",
             "follower", "survivor", "smoker", "drinker", "eater", "sleeper", "worrier", "dreamer", "partner",
             "parent", "resident", "citizen", "foreigner", "stranger", "introvert", "extrovert", "newbie",
             "volunteer", "gamer", "sucker", "talker", "thinker", "listener", "learner", "winner", "loser",
             "other", "mother", "father", "brother", "sister", "daughter", "grandmother", "grandfather",
             "neighbor", "neighbour", "person", "human", "man", "woman", "monster", "character", "hater",
             "baker's", "fighter", "dancer", "singer", "swimmer", "hiker", "climber", "cyclist", "player",
             "collector", "traveler", "traveller", "walker", "cheater", "boomer", "millennial", "patient",
             "vegetarian", "vegan", "pescatarian", "romantic", "optimist", "pessimist", "perfectionist",
             "ambassador", "advocate", "supporter", "donor", "visitor", "tourist", "guest", "regular", "teenager",
             "immigrant", "migrant", "refugee", "native", "relative", "participant", "applicant", "recipient",
             "adult", "child", "kid", "veteran", "newcomer", "homeowner", "homebody", "nerd", "geek", "fanatic",
             "addict", "servant", "descendant", "catholic", "muslim", "christian", "atheist",
             "student's", "bit", "lot", "mess", "wreck", "night", "morning", "cat", "dog"}
_JOB_FIXED = {"student", "teacher", "tutor", "nurse", "doctor", "lawyer", "engineer"}
_ZH_JOB_TAIL = (r"(?:工程师|程序员|老师|教师|医生|护士|学生|研究生|大学生|博士生|设计师|律师|会计师|会计|厨师|"
                r"经理|作家|记者|司机|教授|科学家|研究员|分析师|销售|画家|艺术家|演员|歌手|警察|公务员|军人|"
                r"农民|店主|创业者|自由职业者|实习生|编辑|翻译|摄影师|建筑师|药剂师|咨询师|顾问|总监|主管|助理|"
                r"专员|开发|运营|测试|主任|老板|总裁|总经理|行政|人事|客服|前台|文员|导游|保安|快递员|"
                r"外卖员|医师|技师|工人|店员|空姐|空乘|秘书|律师助理|架构师|策划|主播|博主|UP主|店长|骑手|教练|护工|保姆|"
                r"厨子|司机|法官|检察官|飞行员|程序猿|产品经理|设计|老师傅|私教|全职宝妈|全职妈妈|宝妈|家庭主妇|全职太太|领班|店长|"
                r"电工|钳工|焊工|木工|瓦工|水电工|电焊工|仓管|库管|网管|[" + _CJK + r"]{1,3}?(?:员|师|手))")


def _job_value(raw: str) -> str | None:
    v = _clean(re.sub(r"\s+(?:at|for|in|with|on|since|from)\b.*$", "", raw, flags=re.I), max_words=4)
    if not v:
        return None
    words = v.split()
    head = words[-1].lower()
    if head in _NOT_JOBS or any(w.lower() in {"fan", "bit", "lot", "huge", "big"} for w in words):
        return None
    if not (head in _JOB_NOUNS or head in _JOB_FIXED or _JOB_SUFFIX.search(head)):
        return None
    # Lower case, except acronyms ("UX researcher").
    return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)


_STATUS_WORDS = {"single": "single", "engaged": "engaged", "married": "married", "divorced": "divorced",
                 "widowed": "widowed", "a widow": "widowed", "a widower": "widowed", "dating": "in a relationship",
                 "in a relationship": "in a relationship", "seeing someone": "in a relationship",
                 "taken": "in a relationship"}
_ZH_STATUS = {"在一": "in a relationship", "复合": "in a relationship", "证早": "married", "证已": "married", "证领": "married",
              "又是": "single", "恢复": "single", "又单": "single", "老伴": "married", "母胎": "single", "在约": "in a relationship", "约会": "in a relationship", "求婚": "engaged", "被求": "engaged", "分了": "single", "离了": "divorced", "分手": "single", "单身": "single", "领证": "married", "结婚": "married", "已婚": "married",
              "订婚": "engaged", "嫁人": "married", "脱单": "in a relationship", "恋爱": "in a relationship",
              "在谈": "in a relationship", "离婚": "divorced", "离异": "divorced", "丧偶": "widowed"}
_PARTNER = {"girlfriend": "in a relationship", "boyfriend": "in a relationship", "partner": "in a relationship",
            "gf": "in a relationship", "bf": "in a relationship", "fiance": "engaged", "fiancé": "engaged",
            "fiancee": "engaged", "fiancée": "engaged", "husband": "married", "wife": "married",
            "hubby": "married", "spouse": "married", "wifey": "married", "missus": "married",
            "other half": "in a relationship", "better half": "in a relationship",
            "女朋友": "in a relationship", "男朋友": "in a relationship", "对象": "in a relationship",
            "未婚夫": "engaged", "未婚妻": "engaged", "老公": "married", "老婆": "married", "丈夫": "married",
            "妻子": "married", "爱人": "married", "媳妇": "married", "老伴": "married", "另一半": "in a relationship"}

# Budget purposes: one thing, one key ("notebook" and "laptop" budgets are one budget); the table is
# the vocabulary's, shared with every provider.
_PURPOSES = BUDGET_PURPOSES


def _purpose(*texts: str | None) -> str:
    """The canonical purpose named in the budget's own words, else anywhere in the sentence."""
    for text in texts:
        if not text:
            continue
        low = text.lower()
        for canonical, words in _PURPOSES.items():
            for w in words:
                if (_has_cjk(w) and w in low) or re.search(rf"\b{re.escape(w)}s?\b", low):
                    return canonical
    return "general"

def _may_be_given_name(word: str) -> bool:
    """A capitalised word that can be someone's name: a common given name, or no dictionary word
    and no city ("I'm Thanh" yes; "I'm Canadian", "I'm Sorry" no)."""
    low = word.lower()
    return low not in _NOT_NAMES and (is_first_name(low) or not is_dictionary_word(low)) and not leading_city(low)


_NOT_NAMES = frozenset(
    "back here home fine good ok okay sorry tired done new sure busy the just same nothing everything thanks thank "
    "hello hi hey again great nice glad happy welcome congrats me you we they it this that there life work today "
    "yesterday love hugs cheers oh wow yeah yes no well so still always never anyway also mom dad everyone "
    "someone all both guess what finally sadly honestly seriously totally really only excited and but or look "
    "looky see come right then now".split())
_ZH_SURNAMES = ("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任"
                "沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴"
                "莫孔向汤欧阳司马上官诸葛")
_ZH_NAME = rf"(?P<v>(?:[{_ZH_SURNAMES}][{_CJK}]{{1,2}}|[阿小老][{_CJK}]))"
_KIN = r"(?:grandma|grandpa|grandmother|grandfather|mom|mum|dad|mother|father|aunt|uncle|friend|neighbor|neighbour)"
_ZH_KIN = r"(?:奶奶|爷爷|外公|外婆|姥姥|姥爷|爸爸?|妈妈?|叔叔|舅舅|姑姑|阿姨|朋友|同事|老师|邻居|亲戚)"
# One value per meaning across languages, so "我吃素" confirms "I'm vegetarian" rather than
# superseding it.
_CANONICAL_VALUES = {"吃素": "vegetarian", "素食": "vegetarian", "纯素": "vegan", "蛋奶素": "vegetarian", "全素": "vegan"}
