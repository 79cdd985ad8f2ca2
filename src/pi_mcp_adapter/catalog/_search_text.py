"""Turning tool metadata and queries into search terms.

Everything here is plain string processing with no state beyond small caches, shared by every
ranking in :mod:`._search_rankings`:

- :func:`split_words` breaks identifiers and prose into lower-case words (``getUserProfile``,
  ``get_user_profile``, ``get-user-profile`` and ``get.user.profile`` all give
  ``get user profile``);
- :func:`stem` strips common English inflections with a few suffix rules, so that ``files``,
  ``searching`` and ``created`` meet ``file``, ``search`` and ``create``;
- :data:`QUERY_STOPWORDS` drops the filler of natural-language requests ("could you please");
- :data:`VERB_SYNONYMS` maps common action verbs to their everyday equivalents, and
  :data:`ABBREVIATIONS` shorthand to the words it stands for;
- :func:`find_values` finds the argument values in a request (paths, URLs, e-mail addresses,
  file names, quoted text), which say little about which tool is wanted;
- :func:`split_clauses` splits a request into its steps, and :func:`named_products` finds the
  words after "use", "with", "on"... that may name the server a step should use.

Chinese and Japanese text has no spaces between words, so runs of those characters become
overlapping character pairs (bigrams): ``天气预报`` gives ``天气 气预 预报``, and a request
``查询天气`` meets a description ``获取天气信息`` on ``天气``. :func:`cjk_glosses` gives the
English words of common Chinese words of tool descriptions and requests (``读取`` read,
``文件`` file), so a Chinese request meets an English description and the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Literal

__all__ = [
    "ABBREVIATIONS",
    "QUERY_STOPWORDS",
    "VERB_SYNONYMS",
    "ValueKind",
    "ValueSpan",
    "cjk_glosses",
    "document_terms",
    "find_values",
    "is_cjk",
    "named_products",
    "normalize_identifier",
    "split_clauses",
    "split_words",
    "stem",
    "terms",
]

# Lower-to-upper and acronym-to-word boundaries: "getUserID" -> "get User ID",
# "HTTPServer" -> "HTTP Server", "v2Api" -> "v2 Api".
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
# The plural of an acronym ("URLs", "IDs", "PRs", "listAPIs"): its singular, rather than the
# acronym-to-word split above, which would read "UR Ls".
_ACRONYM_PLURAL = re.compile(r"([A-Z]{2,})s(?![a-z])")
_WORD = re.compile(r"[^\W_]+")
# Han ideographs (with extension A and compatibility forms), kana: scripts written without
# spaces between words.
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
_HAS_CJK = re.compile(f"[{_CJK_CHARS}]")


def split_words(text: str) -> list[str]:
    """Lower-case words of ``text``, with identifiers split at case changes and separators.

    Letters and digits stay together (``v2``, ``s3``, ``gpt4o``), so version-like names keep
    their meaning; any other character (``_ - . / : space``) separates words. An acronym's
    plural is its singular (``URLs`` gives ``url``). Runs of Chinese or Japanese characters
    become their overlapping character pairs (a lone character stays itself), because those
    scripts do not separate words and a pair is the most common word length.
    """
    singular = _ACRONYM_PLURAL.sub(r"\1", text)
    words: list[str] = _WORD.findall(_CAMEL_BOUNDARY.sub(" ", singular).lower())
    if not _HAS_CJK.search(text):
        return words
    out: list[str] = []
    for word in words:
        if not _HAS_CJK.search(word):
            out.append(word)
            continue
        position = 0
        for run in _CJK_RUN.finditer(word):
            if run.start() > position:
                out.append(word[position : run.start()])
            chars = run.group(0)
            out.extend(
                [chars] if len(chars) == 1 else [chars[i : i + 2] for i in range(len(chars) - 1)]
            )
            position = run.end()
        if position < len(word):
            out.append(word[position:])
    return out


# English words for the everyday Chinese words of tool descriptions and requests: actions and
# the things tools act on. General vocabulary only (no product names), in simplified and
# traditional spelling where they differ.
_CJK_GLOSS_TEXT = """
    读取 read | 讀取 read | 读 read | 写入 write | 寫入 write | 写 write | 保存 save | 存储 store
    搜索 search | 查找 find | 查询 query | 查詢 query | 检索 search | 查看 show | 显示 show
    删除 delete | 刪除 delete | 创建 create | 建立 create | 新建 create | 添加 add | 增加 add
    获取 get | 獲取 get | 取得 get | 列出 list | 列表 list | 发送 send | 發送 send | 下载 download
    上传 upload | 提交 submit commit | 运行 run | 执行 execute | 修改 edit | 编辑 edit | 更新 update
    移动 move | 重命名 rename | 比较 compare | 转换 convert | 翻译 translate | 总结 summarize
    摘要 summary | 分析 analyze | 计算 calculate | 记住 remember | 记录 record | 打开 open
    文件 file | 檔案 file | 文件夹 folder directory | 目录 directory | 目錄 directory
    时间 time | 時間 time | 几点 time | 当前 current | 现在 current | 时区 timezone | 日期 date
    天气 weather | 天氣 weather | 预报 forecast | 图片 image | 图像 image | 照片 photo
    邮件 email | 郵件 email | 消息 message | 网页 web page | 網頁 web page | 链接 link
    状态 status | 狀態 status | 分支 branch | 仓库 repository | 代码 code | 坐标 coordinate
    位置 location | 地图 map | 文章 article | 新闻 news | 价格 price | 股票 stock
    用户 user | 日历 calendar | 事件 event | 任务 task | 数据库 database | 表格 table
    知识图谱 knowledge graph | 节点 node | 关系 relation | 实体 entity | 日志 log
    提交记录 commit log
"""
_CJK_GLOSSES: dict[str, tuple[str, ...]] = {
    entry.split()[0]: tuple(entry.split()[1:])
    for line in _CJK_GLOSS_TEXT.splitlines()
    for entry in line.split("|")
    if entry.split()
}
_CJK_GLOSS_PATTERN = re.compile("|".join(sorted(_CJK_GLOSSES, key=len, reverse=True)))


def cjk_glosses(text: str) -> list[str]:
    """The English words of the common Chinese words in ``text`` (longest words first, each
    once): ``读取文件`` gives ``read file``. Empty for text without Chinese characters."""
    if not _HAS_CJK.search(text):
        return []
    found: dict[str, None] = {}
    for match in _CJK_GLOSS_PATTERN.finditer(text):
        found.update(dict.fromkeys(_CJK_GLOSSES[match.group(0)]))
    return list(found)


def is_cjk(word: str) -> bool:
    """Whether ``word`` is (a pair of) Chinese or Japanese characters."""
    return bool(_HAS_CJK.match(word))


def normalize_identifier(text: str) -> str:
    """A canonical spelling of a name, for "is this query this tool's name" comparisons.

    Case and separators are ignored: ``Search-Records``, ``search_records``,
    ``searchRecords`` and "search records" all give ``searchrecords``, and ``get_urls`` is
    ``getURLs`` (their search words differ: an acronym's plural reads as its singular).
    """
    return "".join(char for char in text.lower() if char.isalnum())


_VOWELS = frozenset("aeiouy")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Strip the common English inflections of ``word`` (a lower-case word).

    A deliberately light stemmer: plural ``-s``/``-es``/``-ies``, ``-ing``, ``-ed``,
    ``-ation``, and a final silent ``-e``, with a doubled final consonant undone
    (``mapping`` -> ``map``). Short words and words with digits are kept as they are; the rules
    only fire when a real stem (three letters or more, with a vowel) remains. Both sides of
    the index use it, so the stem only has to be consistent, not a dictionary word.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    w = word
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "shes", "ches", "xes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix, replacement in (("ation", "ate"), ("ing", ""), ("ed", "")):
        if w.endswith(suffix):
            base = w[: -len(suffix)] + replacement
            if len(base) >= 4 and _VOWELS.intersection(base[:-1]):
                w = base
                if replacement == "" and len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
                    w = w[:-1]  # mapping -> mapp -> map; keeps "install", "access"
            break
    if len(w) >= 4 and w.endswith("e"):
        w = w[:-1]
    return w


# Words that carry no information about which tool is wanted: articles, pronouns,
# auxiliaries and the politeness and sequencing of a spoken request. Only general English;
# nothing here is specific to any tool catalog.
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each either
    else etc few for from further had has have having he her here hers herself him himself his
    how i if in into is it its itself just let lets me might more most must my myself need
    needs no nor not now of off on once only or other our ours ourselves out over own please
    same shall she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up us very was we were what when where
    which while who whom why will with within without would you your yours yourself
    yourselves im ive tell want wants wanted like sure kindly first second third next finally
    afterwards later lastly via per another something anything everything thing things
"""
QUERY_STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())

# Everyday synonyms of the action verbs tool names are built from. General English only:
# each group is a set of words people use interchangeably when asking for the same action.
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("get", "fetch", "retrieve", "read", "obtain", "load", "lookup"),
    ("create", "add", "new", "make", "insert", "generate"),
    ("delete", "remove", "erase", "drop", "destroy", "forget"),
    ("list", "show", "enumerate", "browse"),
    ("search", "find", "query", "lookup", "discover", "locate"),
    ("update", "modify", "edit", "change", "set", "patch"),
    ("send", "post", "publish", "submit"),
    ("run", "execute", "invoke", "start", "launch", "trigger"),
    ("stop", "cancel", "halt", "terminate", "kill", "abort"),
    ("write", "save", "store", "put", "persist", "remember", "memorize", "memorise"),
    ("check", "verify", "validate"),
    ("download", "export"),
    ("upload", "import"),
    ("summarize", "summary", "summarise"),
    ("analyze", "analyse", "analysis", "inspect", "examine"),
    ("convert", "transform", "translate"),
    ("info", "detail", "information", "details", "describe"),
    # Everyday names of the things tools act on.
    ("directory", "folder", "dir"),
    ("image", "picture", "photo", "screenshot"),
    ("sum", "total", "add"),
)


def _build_synonyms(groups: Iterable[tuple[str, ...]]) -> Mapping[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in groups:
        stems = {stem(word) for word in group}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return MappingProxyType({k: frozenset(v) for k, v in table.items()})


VERB_SYNONYMS: Mapping[str, frozenset[str]] = _build_synonyms(_SYNONYM_GROUPS)
"""Stem -> stems of its everyday synonyms (the keys and values are already stemmed)."""

# Shorthand people type for words tool texts spell out ("merge my PR", "the repo", "DM Anna").
# Read only when the catalog lacks the short form and has every word of the long one: a
# catalog that says "repo" itself matches it directly. Only unambiguous forms: "temp", "min",
# "desc" or "cal" could mean two things.
_ABBREVIATION_TEXT = {
    "pr": "pull request",
    "repo": "repository",
    "db": "database",
    "msg": "message",
    "dm": "direct message",
    "env": "environment",
    "doc": "document",
    "k8s": "kubernetes",
    "auth": "authentication",
    "img": "image",
    "pic": "picture",
    "addr": "address",
    "num": "number",
    "txn": "transaction",
    "qty": "quantity",
    "avg": "average",
    "stats": "statistics",
    "acct": "account",
    "org": "organization",
    "vm": "virtual machine",
    "appt": "appointment",
}
ABBREVIATIONS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        stem(short): tuple(stem(w) for w in long.split())
        for short, long in _ABBREVIATION_TEXT.items()
    }
)
"""Stem of a shorthand -> stems of the words it stands for."""


def terms(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """Stemmed search terms of ``text``, in order, repeats kept."""
    words = split_words(text)
    if drop_stopwords:
        return [stem(w) for w in words if w not in QUERY_STOPWORDS]
    return [stem(w) for w in words]


@lru_cache(maxsize=1 << 16)
def document_terms(text: str) -> tuple[str, ...]:
    """``terms(text, drop_stopwords=True)``, remembered across index builds.

    A catalog is indexed again whenever a server connects or changes its tools, and nearly
    all of its texts are the same as last time; tokenising is most of the build's cost.
    """
    return tuple(terms(text, drop_stopwords=True))


# Imperative verbs people start a step of a request with. General English, used only to
# tell where one step of a request ends and the next begins.
_STEP_VERBS = (
    "get fetch retrieve read obtain load look find search query locate discover list show "
    "display enumerate browse create add make generate build insert write save store put "
    "update modify edit change set rename move copy delete remove erase drop clear cancel "
    "stop start run execute launch trigger deploy send post publish share email notify reply "
    "forward invite schedule book check verify validate test analyze analyse inspect examine "
    "compare summarize summarise translate convert transform export import download upload "
    "extract scrape crawl parse calculate compute estimate count track monitor log record open "
    "close reopen complete mark assign tag label sort filter merge approve reject archive "
    "restore tell give provide explain describe identify determine recommend suggest plan "
    "draft review register connect subscribe use remember note"
)
_VERB_ALTERNATION = "|".join(_STEP_VERBS.split())
# Where a request moves on to its next step: sentence ends, semicolons, the sequencing words
# people use to chain actions ("then", "after that", "finally"), and a comma or "and"
# followed by an imperative verb ("..., verify the wallet", "... and send it").
_CLAUSE_BREAK = re.compile(
    r"[.;!?\n]+(?:\s|$)|[。；！？]+\s*|[，,、]?\s*(?:然后|然後|接着|接著|之后|之後|最后|最後|并且|並且)"
    r"|,?\s+\b(?:and\s+then|then|after\s+that|afterwards|next|finally|also|lastly|"
    r"once\s+(?:you|that|done)|followed\s+by)\b,?"
    rf"|(?:,\s*(?:and\s+)?|\s+and\s+)(?:please\s+)?(?=(?:{_VERB_ALTERNATION})\b)",
    re.IGNORECASE,
)


# Words that only order or join the steps of a request ("First, ...", "Additionally, ...").
_DISCOURSE_TEXT = """
    then and also first second third fourth fifth next finally lastly afterwards
    additionally simultaneously meanwhile furthermore moreover thanks thank
"""
_DISCOURSE_WORDS = frozenset(_DISCOURSE_TEXT.split())
_LEADING_DISCOURSE = re.compile(
    rf"^(?:(?:{'|'.join(sorted(_DISCOURSE_WORDS))})\b[\s,]*)+", re.IGNORECASE
)
# A clause that starts like this states when or for what the next one happens ("Once you
# have the list, ...", "If it doesn't exist, create it", "For each issue, ..."): it is part
# of that step, not a step of its own.
_CONDITION_START = re.compile(
    r"^(?:if|once|after|when|whenever|before|while|until|unless|as\s+soon\s+as"
    r"|in\s+case|for\s+(?:each|every|all)|at\s+the\s+same\s+time|based\s+on)\b",
    re.IGNORECASE,
)


def split_clauses(text: str) -> list[str]:
    """The parts of a request that ask for different things, in order (at least one).

    Splits at sentence ends, sequencing words ("then", "next", "finally", "after that") and
    at a comma or "and" followed by an imperative verb, but never inside a value (quoted
    text, a code block, a path or URL). A part with no word of its own outside values
    ("First", "Thank you", a line of quoted JSON) joins its neighbour, and a condition
    ("Once you have the list", "If it doesn't exist", "For each issue") joins the step it
    conditions. The result is a heuristic used to spread results across the steps of a
    multi-step request; a one-step request comes back as a single clause.
    """
    values = find_values(text)
    spans: list[tuple[int, int]] = []
    start = 0
    for brk in _CLAUSE_BREAK.finditer(text):
        if brk.end() == brk.start() or any(
            v.start < brk.end() and brk.start() < v.end for v in values
        ):
            continue
        spans.append((start, brk.start()))
        start = brk.end()
    spans.append((start, len(text)))
    # Each part as [start, end, kind]: a step, a condition of the next step, a value with
    # no words around it (it belongs to the step before), or words that only order steps.
    parts: list[tuple[int, int, str]] = []
    for begin, end in spans:
        part = text[begin:end].strip(" ,")
        if not part:
            continue
        begin = text.index(part, begin)
        own = _LEADING_DISCOURSE.sub("", part)
        if _has_own_words(own):
            # "Once it's running, tell me its ID" holds its own step after the comma.
            alone = _CONDITION_START.match(own) and not re.search(r"[,，、]", own)
            kind = "condition" if alone else "step"
        else:
            kind = "value" if find_values(part) else "filler"
        parts.append((begin, begin + len(part), kind))
    merged: list[list[int]] = []
    pending: int | None = None  # where a condition or a filler waiting for its step starts
    for begin, end, kind in parts:
        if kind == "value" and merged:
            merged[-1][1] = end
        elif kind in ("condition", "filler") or (kind == "value" and not merged):
            pending = begin if pending is None else pending
        else:
            merged.append([begin if pending is None else pending, end])
            pending = None
    if pending is not None:
        if merged:
            merged[-1][1] = parts[-1][1]
        else:
            merged.append([pending, parts[-1][1]])
    return [text[b:e] for b, e in merged] or [text]


def _has_own_words(part: str) -> bool:
    """Whether ``part`` has a content word outside values and words that order steps."""
    plain = part
    for value in find_values(part):
        plain = plain[: value.start] + " " * (value.end - value.start) + plain[value.end :]
    return any(
        w not in _DISCOURSE_WORDS and not w.isdigit() for w in terms(plain, drop_stopwords=True)
    )


# "use X to ...", "with X", "on X", "from X", "via X": what follows names the product (the
# server) the user wants the step done with. Articles and possessives may come between. "in"
# and "to" are left out: they introduce places and recipients far more often ("in Paris").
_TOOL_CUE = re.compile(
    r"\b(?:use|using|with|on|from|via|through)\s+"
    r"(?:(?:the|my|our|your|a|an)\s+)?([^\W_][\w.\-]*)",
    re.IGNORECASE,
)


def named_products(text: str) -> list[str]:
    """Stemmed words that follow "use", "with", "on", "from", "via" in ``text``: the
    candidates for a product the request names ("use Slack to ...", "on GitHub"). Which of
    them are server names is for the catalog to say."""
    found: dict[str, None] = {}
    for match in _TOOL_CUE.finditer(text):
        name = match.group(1)
        # "GitHub" is the server "github" and also the words "git hub" of "GitHub MCP".
        found.update(dict.fromkeys(w for w in (stem(name.lower()), *terms(name)[:1]) if w))
    return [w for w in found if w not in QUERY_STOPWORDS]


ValueKind = Literal["quoted", "url", "email", "path", "date", "address", "hash"]


@dataclass(frozen=True, slots=True)
class ValueSpan:
    """An argument value written in a request: where it is and what kind of value it is."""

    start: int
    end: int
    kind: ValueKind


# Argument values people paste into requests. Their words describe the data, not the tool:
# "~/reports/q3-summary.md" is a file to write to, not a request for a summariser. Order
# matters: an earlier alternative wins where spans overlap.
_VALUE_PATTERNS: tuple[tuple[ValueKind, re.Pattern[str]], ...] = (
    (
        "quoted",
        # Inside straight quotes and backticks, the text starts and ends with a non-space:
        # "a `b` c `d" pairs as `b`, not as "` c `" (a stray quote would swallow the words
        # between two real ones).
        re.compile(
            r"```.*?```|`[^`\s](?:[^`\n]*[^`\s])?`|\"[^\"\s](?:[^\"\n]*[^\"\s])?\""
            r"|“[^”\n]+”|‘[^’\n]+’|「[^」\n]+」"
            r"|(?<!\w)'[^'\s](?:[^'\n]*[^'\s])?'(?!\w)",
            re.DOTALL,
        ),
    ),
    ("url", re.compile(r"\b(?:[a-z][a-z0-9+.\-]*://|www\.)[^\s\"'<>]+", re.IGNORECASE)),
    ("email", re.compile(r"\b[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+\b")),
    # Dates, an Ethereum-style address and hashes (a git commit, a transaction) say what
    # they are to a tool as a path does: a tool with a date, address or revision parameter
    # can take them.
    (
        "date",
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?\b"
            r"|\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?"
            r"|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
            r"\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}\b",
            re.IGNORECASE,
        ),
    ),
    ("address", re.compile(r"\b0x[0-9a-fA-F]{40}\b")),
    (
        # Hex of 7 to 40 characters with a digit and a letter (a git commit), or a 0x-hash.
        "hash",
        re.compile(r"\b0x[0-9a-fA-F]{64}\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    ),
    (
        "path",
        re.compile(
            # ~/x, ./x, ../x, /x/y, C:\\x, C:/x, and a/b/c with two or more separators.
            r"(?:(?<![\w/])(?:~|\.{1,2})?/[\w.\-~@%+]+(?:/[\w.\-~@%+]*)*"
            r"|\b[A-Za-z]:[\\/][^\s\"'<>]+"
            r"|\b[\w.\-]+(?:/[\w.\-]+){2,})"
        ),
    ),
    # A file name: a word, a dot and a short lower-case extension ("notes.md", "data.csv").
    ("path", re.compile(r"\b[\w\-]+\.(?:[a-z][a-z0-9]{0,4})\b(?!\.\w)")),
)


@lru_cache(maxsize=256)
def find_values(text: str) -> tuple[ValueSpan, ...]:
    """The argument values in ``text`` (quoted text, URLs, e-mail addresses, dates, hex
    addresses and hashes, paths and file names), in order and not overlapping. Cached: a
    query asks several times."""
    taken: list[ValueSpan] = []
    for kind, pattern in _VALUE_PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if kind in ("url", "path"):
                # Punctuation after a path or URL ends the sentence, not the value.
                end = start + len(match.group(0).rstrip(".,;:!?)"))
                if end == start:
                    continue
            if kind == "path" and not _looks_like_path(text[start:end]):
                continue
            if any(s.start < end and start < s.end for s in taken):
                continue
            taken.append(ValueSpan(start, end, kind))
    taken.sort(key=lambda s: s.start)
    return tuple(taken)


# Abbreviations that look like file names ("e.g", "i.e") and version-like decimals are not
# paths; a real one has a letter in its extension and is not just a number.
_NOT_FILE_NAMES = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m"})


def _looks_like_path(candidate: str) -> bool:
    if "/" in candidate or "\\" in candidate:
        return any(c.isalnum() for c in candidate)
    return candidate.lower() not in _NOT_FILE_NAMES and not candidate.replace(".", "").isdigit()
