"""Chinese questions as the English words the classifier and the target parser read.

``translate(text) -> Translation``: for text with Chinese characters (Traditional or Simplified, alone or
mixed with English terms: "GPU 1 為什麼閒置", "哪個 kernel 最耗時"), in order:

1. Full-width forms become ASCII (NFKC: "？" "，" "１"), 「」/『』 become quotes, 。/、 a full stop and comma.
2. Traditional characters become Simplified (OpenCC's ``t2s`` conversion), so one table serves both
   scripts; Taiwan words that stay different after it (记忆体, 显示卡, 执行绪, 频宽) are table words too.
3. Patterns with numbers are rewritten as the English the target parser reads (targets.py): ordinals
   of GPUs ("第二张卡" -> "second gpu", numbered as "the second GPU" is: the profile's second device),
   numbered GPUs ("1号卡", "卡1" -> "gpu 1"), steps ("第4次迭代", "第三步" -> "4th step", "3rd step": ordinals),
   windows ("30毫秒之后" -> "after 30 ms", "前20毫秒" -> "first 20 ms", "2秒到3秒之间" -> "between 2 s and 3 s"),
   "前3个" -> "top 3"; Chinese numerals up to 99 (一, 两, 十二, 二十).
4. Each run of Chinese characters is cut into words by jieba (its own dictionary, with this table's words
   added so they are kept whole); each word in WORDS becomes its English words, any other Chinese word is
   dropped. Text that is not Chinese (kernel names, "GPU 1", cudaMemcpy) is kept as written.

5. The English words are put in the order the intents' phrases are written in where Chinese orders them
   otherwise (WORD_ORDER): "受限于 CPU" -> "cpu bound", "驱动里" -> "in driver", a clause ending in
   "how long / how much / how many" starts with it ("trace 有多长" -> "how long trace"), and so does one ending
   in "where", which Chinese leaves in place ("时间都花到哪里去了" -> "where time all spend").

The result feeds the English pipeline unchanged (words.rewrite for the intents, targets.parse_targets):
a Chinese question routes and takes targets as its English twin does. ``recognized`` lists the table words
found; a question with Chinese and no recognized content word (only question words such as 为什么) is one
dashcam does not understand (language.py says so).

jieba is imported on the first Chinese question only, with its log and import warnings quiet (it reports
loading its dictionary on stderr); its dictionary comes with the package and the prefix cache it writes goes to the
temp folder. Text without Chinese characters is returned as it is.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from .han import has_chinese

_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

# Simplified word -> English words (after OpenCC's t2s). Question and function words are in QUESTION_WORDS.
QUESTION_WORDS = {
    "为什么": "why", "为啥": "why", "为何": "why", "怎么会": "why", "干嘛": "why", "什么": "what", "啥": "what",
    "甚么": "what", "哪个": "which", "哪些": "which", "哪一个": "which", "哪几个": "which", "哪": "which",
    "哪里": "where", "哪儿": "where", "在哪": "where", "怎么样": "how", "如何": "how", "怎么": "how",
    "怎样": "how", "多少": "how much", "多少个": "how many", "多少次": "how many times", "多少时间": "how much time",
    "多久": "how long", "多长时间": "how long", "多长": "how long",
    "几个": "how many", "多大": "how much", "是不是": "is", "是否": "is", "有没有": "any", "吗": "", "么": "",
    "呢": "", "吧": "", "啊": "", "呀": "", "的": "", "了": "", "过": "", "着": "", "地": "", "得": "",
    "个": "", "这个": "this", "这": "this", "这里": "here", "那个": "that", "我": "i", "我的": "my",
    "我们": "we", "你": "you", "它": "it", "是": "is", "有": "have", "在": "", "和": "and", "跟": "and", "与": "and",
    "及": "and", "以及": "and", "还有": "and also", "另外": "also", "并且": "and", "或": "or", "或者": "or",
    "还是": "or", "到底": "", "究竟": "", "请": "please", "帮我": "please", "帮": "please", "一下": "",
    "告诉": "tell", "告诉我": "tell me", "说实话": "honestly", "老实说": "honestly", "上": "on", "里": "in",
    "里面": "inside",
    "内": "in",
    "中": "in", "从": "from", "到": "to", "比": "than", "一": "one", "很": "very", "非常": "very",
    "都": "all", "就": "", "会": "will", "能": "can", "可以": "can", "应该": "should", "该": "should",
    "要": "", "不": "not", "没": "no", "没有": "no", "一直": "keep", "好像": "seem", "感觉": "feel",
    "看看": "show", "给我": "give me", "列出": "list", "显示": "show",
}
WORDS = {
    # the machine
    "卡": "gpu", "显卡": "gpu", "显示卡": "gpu", "设备": "device", "装置": "device", "主机": "host",
    "处理器": "cpu", "线程": "thread", "执行绪": "thread", "主线程": "main thread", "进程": "process",
    "内核": "kernel", "核函数": "kernel", "核心函数": "kernel", "算子": "kernel", "函数": "function",
    "函式": "function", "流": "stream", "多流": "streams", "节点": "node",
    # time and cost
    "时间": "time", "耗时": "time", "用时": "time", "耗": "consume", "占用": "consume", "霸占": "hog",
    "吃掉": "eat", "吃": "eat", "花": "spend", "花费": "spend", "花掉": "spend", "最": "most", "最多": "most",
    "最耗时": "take most time", "最长": "longest", "最久": "longest", "最慢": "slowest", "最快": "fastest",
    "第一个": "first", "头一个": "first", "之前": "before", "以前": "before", "这么晚": "so late", "太晚": "too late",
    "晚": "late", "最大": "biggest", "最早": "first", "最晚": "last", "结束": "end", "完成": "finish", "开始": "start",
    "最贵": "most expensive",
    "最重": "heaviest", "贵": "expensive", "重": "heavy",
    "占比": "share", "比例": "share", "百分比": "percent", "总共": "total", "一共": "total", "总": "total",
    "总计": "total", "平均": "average", "中位数": "median", "每": "per", "每秒": "per second",
    "启动到执行": "from launch to start",
    "启动到开始": "from launch to start", "每个": "each", "每次": "each",
    "一半": "half", "开销": "overhead", "代价": "cost", "成本": "cost", "拖慢": "slow down",
    # speed and trouble
    "慢": "slow", "变慢": "slow", "缓慢": "slow", "太慢": "too slow", "快": "fast", "更快": "faster",
    "加速": "speed up", "提速": "speed up", "性能": "performance", "效率": "performance", "瓶颈": "bottleneck",
    "卡在哪": "where is the bottleneck", "卡在哪里": "where is the bottleneck", "卡在": "stuck in",
    "卡住": "stuck", "问题": "problem", "异常": "problem", "不对劲": "wrong", "不对": "wrong", "奇怪": "weird",
    "可疑": "suspicious", "看起来": "look", "健康": "health", "健康检查": "health check", "体检": "health check",
    "检查": "check", "优化": "improve", "改进": "improve", "改善": "improve", "修": "fix", "修复": "fix",
    "先": "first", "首先": "first", "先优化": "improve first", "先修": "fix first", "先改": "fix first",
    "正常": "ok", "一切正常": "all good", "还可以": "ok", "还行": "ok", "跑": "run", "运行": "run", "让": "make",
    "跑满": "saturated", "吃满": "saturated", "满": "full", "空白": "white space", "这么多": "so much", "差": "poor",
    "很差": "poor", "糟糕": "terrible", "浪费": "waste",
    "解释": "explain", "说明": "explain", "老板": "boss", "总结": "summary", "摘要": "summary", "概要": "overview",
    "概况": "overview", "概览": "overview", "排序": "top", "排名": "top", "按": "by", "总览": "overview",
    # idleness and waiting
    "空闲": "idle", "闲置": "idle", "闲着": "idle", "空转": "idle", "闲": "idle", "没事做": "doing nothing",
    "无事可做": "doing nothing", "什么都不做": "doing nothing", "啥也不干": "doing nothing",
    "什么也不做": "doing nothing", "没活干": "doing nothing", "没事干": "doing nothing", "没活": "no work",
    "饿": "starved", "饿着": "starved", "吃不饱": "starved", "喂不饱": "starved", "饥饿": "starved",
    "利用率": "utilization", "使用率": "utilization", "忙": "busy", "忙碌": "busy", "空隙": "gap", "间隙": "gap",
    "空档": "gap", "空洞": "gap", "气泡": "bubble", "等": "wait", "等待": "wait", "等着": "wait", "停": "stall",
    "停下来": "stall", "停顿": "stall", "阻塞": "blocked", "同步": "synchronize", "同步等待": "synchronize wait",
    "忙什么": "doing what", "忙啥": "doing what", "在忙什么": "doing what", "之间": "between",
    "的时候": "while", "时候": "while", "期间": "while",
    "做": "do", "干": "do", "在做": "doing", "工作": "work", "活": "work",
    # copies and memory
    "拷贝": "copy", "复制": "copy", "传输": "transfer", "传": "transfer", "搬移": "transfer", "搬运": "transfer",
    "数据传输": "data transfer", "内存拷贝": "memory transfer", "数据": "data", "资料": "data",
    "数据加载": "data loader",
    "数据加载器": "data loader", "加载": "load", "载入": "load", "带宽": "bandwidth", "频宽": "bandwidth",
    "锁页内存": "pinned memory", "锁页": "pinned", "固定内存": "pinned memory", "页锁定": "pinned",
    "可分页": "pageable", "可分页内存": "pageable memory", "分页": "pageable", "内存": "memory",
    "记忆体": "memory", "显存": "gpu memory", "内存峰值": "peak memory", "显存峰值": "peak vram",
    "峰值": "peak", "分配": "allocate", "申请": "allocate", "释放": "free", "泄漏": "leak", "泄露": "leak",
    "缺页": "page fault", "页错误": "page fault", "页面错误": "page fault", "统一内存": "unified memory",
    "统一记忆体": "unified memory", "托管内存": "managed memory", "迁移": "migration", "预取": "prefetch",
    "显存不足": "out of memory", "爆显存": "out of memory",
    # launches and the API
    "启动": "launch", "发射": "launch", "下发": "launch", "启动延迟": "launch latency",
    "启动开销": "launch overhead", "延迟": "latency", "时延": "latency", "受限": "@bound@", "受限于": "@bound@",
    "受制于": "@bound@",
    "限制": "limit", "捕获": "capture", "图": "graph", "调用": "call", "呼叫": "call",
    "次数": "count", "启动次数": "launch count", "调用次数": "call count",
    "运行时": "runtime", "执行时": "runtime", "驱动": "driver", "驱动程式": "driver", "驱动程序": "driver",
    "队列": "queue", "排队": "queue",
    # communication and overlap
    "通信": "communication", "通讯": "communication", "集合通信": "collectives", "重叠": "overlap",
    "掩盖": "hidden", "隐藏": "hidden", "覆盖": "overlap", "暴露": "exposed", "露出": "exposed",
    "计算": "compute", "并行": "parallel", "并发": "concurrent", "同时": "concurrent", "串行": "serialized",
    # annotations and steps
    "区间": "range", "范围": "range", "区段": "range", "区域": "region", "标记": "marker", "标注": "annotation",
    "前向": "forward", "前向传播": "forward", "正向": "forward", "反向": "backward", "反向传播": "backward",
    "优化器": "optimizer", "迭代": "iteration", "步": "step", "步骤": "step", "训练步": "training step",
    "批次": "batch", "批": "batch", "轮": "epoch", "训练": "training", "循环": "loop", "波动": "variance",
    "抖动": "jitter", "每步": "per step", "每一步": "per step", "每次迭代": "every iteration",
    # small kernels
    "小": "small", "太小": "too small", "很小": "small", "小的": "small", "填满": "fill", "填不满": "fill",
    "占满": "fill", "线程块": "blocks", "块": "blocks", "网格": "grid", "占用率": "occupancy", "够不够": "enough",
    "足够": "enough", "够": "enough",
    # GPUs compared
    "比较": "compare", "对比": "compare", "相比": "compare", "比一比": "compare", "比起来": "compare",
    "比一下": "compare", "比下": "compare",
    "落后": "lag behind", "落后于": "lag behind", "拖后腿": "straggler", "掉队": "straggler", "负载": "load",
    "一样": "same", "相同": "same", "均衡": "balanced", "平衡": "balanced", "不均衡": "imbalanced",
    "不平衡": "imbalanced", "不同": "differ", "区别": "difference", "差别": "difference",
    "差异": "difference", "太少": "too few", "少": "few",
    "减少": "reduce", "减小": "reduce", "降低": "reduce", "增长": "grow", "增加": "grow", "上涨": "grow",
    "其他": "other",
    "其它": "other", "别的": "other",
    # what the profile is
    "用了": "used", "使用": "use", "用": "use", "采集": "capture", "抓取": "capture", "录制": "capture",
    "持续": "run", "文件": "file", "版本": "version", "型号": "model", "硬件": "hardware", "数量": "count",
    "个数": "count", "数目": "count", "发生": "happened", "情况": "", "程式": "program", "程序": "program",
    "模型": "model", "指标": "metric", "度量": "metric", "张量核心": "tensor core", "真的": "really",
    "真正": "really", "实际": "actually", "编译": "compile", "预热": "warmup", "系统调用": "system call",
    "上下文切换": "context switch", "采样": "sample", "热点": "hotspot", "通信库": "nccl",
}
TABLE = {**QUESTION_WORDS, **WORDS}

# -- numbers -------------------------------------------------------------------------------------------
_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_NUM = r"(\d+|[零〇一二两三四五六七八九十]+)"
ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def number(s: str) -> int | None:
    """A number written in digits or in Chinese numerals up to 99 ("12", "十二", "二十", "两")."""
    if s.isdigit():
        return int(s)
    if "十" in s:
        tens, _, ones = s.partition("十")
        if len(tens) > 1 or len(ones) > 1 or (tens and tens not in _DIGITS) or (ones and ones not in _DIGITS):
            return None
        return (_DIGITS[tens] if tens else 1) * 10 + (_DIGITS[ones] if ones else 0)
    return _DIGITS[s] if len(s) == 1 and s in _DIGITS else None


def _nth(n) -> str:
    """ "3rd", "11th", "22nd": a number as an English ordinal."""
    n = int(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def ordinal(n: int) -> str:
    return ORDINAL_WORDS[n - 1] if 1 <= n <= len(ORDINAL_WORDS) else f"{n}th"


_GPU = r"(?:张|块|个|号)?\s*(?:显卡|显示卡|卡|gpu|设备|device)"
_UNITS = {"毫秒": "ms", "秒": "s", "微秒": "us", "纳秒": "ns", "分钟": "min", "ms": "ms", "s": "s", "us": "us"}
_UNIT = r"(毫秒|微秒|纳秒|分钟|秒|ms|us|s)(?![a-z])"
_AMOUNT = r"(\d+(?:\.\d+)?)\s*" + _UNIT


def _amount(m: re.Match, i: int) -> str:
    return f"{m.group(i)} {_UNITS[m.group(i + 1)]}"


def _num_sub(pattern: str, make, flags=re.IGNORECASE):
    rx = re.compile(pattern, flags)

    def repl(m: re.Match) -> str:
        n = number(m.group(1))
        return m.group(0) if n is None else f" {make(n)} "
    return rx, repl


PATTERNS = [
    # windows first: "前20毫秒" is the first 20 ms, not the top 20
    (re.compile(r"(?:从|在)?\s*" + _AMOUNT + r"\s*(?:到|至|~|-)\s*" + _AMOUNT + r"\s*(?:之间|期间|内)?", re.I),
     lambda m: f" between {_amount(m, 1)} and {_amount(m, 3)} "),
    (re.compile(r"(?:最初|最开始|开始|头)?前\s*" + _AMOUNT, re.I), lambda m: f" in the first {_amount(m, 1)} "),
    (re.compile(r"最后\s*" + _AMOUNT, re.I), lambda m: f" in the last {_amount(m, 1)} "),
    (re.compile(r"(?:在)?\s*" + _AMOUNT + r"\s*(?:之后|以后|后)", re.I), lambda m: f" after {_amount(m, 1)} "),
    (re.compile(r"(?:在)?\s*" + _AMOUNT + r"\s*(?:之前|以前)", re.I), lambda m: f" before {_amount(m, 1)} "),
    # GPUs
    (re.compile(r"最后(?:一|那)?\s*" + _GPU, re.I), lambda m: " last gpu "),
    (re.compile(r"(?:另一|另外一|另外那|另)\s*" + _GPU, re.I), lambda m: " the other gpu "),
    (re.compile(r"(?:哪一|哪)\s*" + _GPU, re.I), lambda m: " which gpu "),
    (re.compile(r"(?:所有|全部|各)\s*(?:的)?\s*" + _GPU, re.I), lambda m: " all gpus "),
    (re.compile(r"每\s*(?:一)?\s*" + _GPU, re.I), lambda m: " per gpu "),
    (re.compile(r"(?:这)?两\s*" + _GPU, re.I), lambda m: " the two gpus "),
    (re.compile(r"(?:几|多少)\s*" + _GPU, re.I), lambda m: " how many gpus "),
    (re.compile(r"型号\s*的?\s*(?:gpu|显卡|卡)|(?:gpu|显卡|卡)\s*的?\s*型号", re.I), lambda m: " gpu model "),
    _num_sub(r"第\s*" + _NUM + r"\s*" + _GPU, lambda n: f"{ordinal(n)} gpu"),
    _num_sub(_NUM + r"\s*号\s*(?:显卡|卡|gpu|设备)", lambda n: f"gpu {n}"),
    _num_sub(r"(?<![a-z])(?:显卡|卡|设备)\s*" + r"(\d+)", lambda n: f"gpu {n}"),
    # steps
    # 第N is an ordinal, counted from one ("the 3rd step": targets.py's index 2)
    _num_sub(r"第\s*" + _NUM + r"\s*(?:次|个|轮)?\s*(?:迭代|iteration|iter|step)", lambda n: f"{_nth(n)} step"),
    _num_sub(r"第\s*" + _NUM + r"\s*(?:步|个步骤|个step|个batch|批)", lambda n: f"{_nth(n)} step"),
    (re.compile(r"(?:block|blocks|线程块|块)\s*数?\s*(?:太少|很少|过少|不够)", re.I), lambda m: " too few blocks "),
    # top N
    _num_sub(r"(?:排名)?前\s*" + _NUM + r"\s*(?:个|名|位)?", lambda n: f"top {n}"),
]
# Chinese word order put into the English order the intents' phrases are written in (step 5)
_NOUN = r"(?:cpu|gpu|host|device|kernel|launch|memory|transfer|copy|communication|pcie|bandwidth|data|nccl|io)"
_PLACE = r"(driver|runtime|kernel|nccl|host|gpu|memory|api|graph|stream|range|region|loop|step|iteration)"
WORD_ORDER = [
    (re.compile(r"@bound@((?:\s+" + _NOUN + r")+)", re.I), r"\1 bound"),   # 受限于 CPU -> cpu bound
    (re.compile(r"\b((?:\d+(?:st|nd|rd|th)\s+)?" + _PLACE + r")\s+(in|inside)\b", re.I), r"\3 \1"),
    #                                                                       驱动里 -> in driver; 第3步里 -> in 3rd step
    (re.compile(r"\bper second\s+([^?;,.!]+)", re.I), r"\1 per second"),      # 每秒启动 -> launch per second
    (re.compile(r"\b(step|iteration|kernel|batch|launch|collective)s?\s+between\b", re.I), r"between \1s"),
    (re.compile(r"\b(first\s+(?:kernel|launch|step))\s+(?:launch\s+|start\s+)?before\b", re.I), r"before \1"),
    (re.compile(r"\b(gpu\s+(?:start|begin)(?:\s+work)?)\s+before\b", re.I), r"before \1"),  # GPU开始工作之前
    #                                                                       第一个 kernel 之前 -> before first kernel
    #                                                                       step 之间 -> between steps
    (re.compile(r"(^|[?;,.!]\s*)([^?;,.!]+?)\s+(how (?:much|long|many)(?: time)?)\s*(?=[?;,.!]|$)", re.I),
     r"\1\3 \2"),                                                           # trace 有多长 -> how long trace
    (re.compile(r"(^|[?;,.!]\s*)([^?;,.!]+?)\s+(where)(?:\s+to)?\s*(?=[?;,.!]|$)", re.I),
     r"\1\3 \2"),                                                           # 时间花到哪里 -> where time spend
]
_PUNCT = str.maketrans({"。": ". ", "、": ", ", "「": ' "', "」": '" ', "『": ' "', "』": '" ', "《": " ", "》": " "})


@dataclass(frozen=True)
class Translation:
    english: str                    # the text as English words (non-Chinese parts as written)
    recognized: tuple[str, ...]     # the table words found (Simplified)
    content: bool                   # a recognized word beyond question words, or non-Chinese words


@lru_cache(maxsize=1)
def _converter():
    import opencc

    return opencc.OpenCC("t2s.json")


def simplified(text: str) -> str:
    """``text`` in Simplified characters (OpenCC t2s)."""
    return _converter().convert(text)


def is_traditional(text: str) -> bool:
    """Whether ``text`` has characters that Simplified Chinese writes otherwise."""
    return simplified(text) != text


@lru_cache(maxsize=1)
def _tokenizer():
    """jieba's tokenizer with the table's words added, loaded quietly on first use."""
    import logging
    import warnings

    with warnings.catch_warnings():  # jieba 0.42 imports pkg_resources, which newer setuptools warns about
        warnings.simplefilter("ignore")
        import jieba

    jieba.setLogLevel(logging.WARNING)
    tok = jieba.Tokenizer()
    for w in TABLE:
        if len(w) > 1:
            tok.add_word(w, freq=10 ** 6)
    tok.initialize()
    return tok


def segment(text: str) -> list[str]:
    """The words of a run of Chinese characters (jieba, precise mode)."""
    return [w for w in _tokenizer().cut(text, HMM=False) if w.strip()]


@lru_cache(maxsize=1024)
def translate(text: str) -> Translation:
    """The module docstring's steps 1-4; text without Chinese characters as it is."""
    if not has_chinese(text):
        return Translation(text, (), bool(re.search(r"[A-Za-z]", text or "")))
    s = simplified(unicodedata.normalize("NFKC", text).translate(_PUNCT))
    for rx, repl in PATTERNS:
        s = rx.sub(repl, s)
    recognized: list[str] = []
    out: list[str] = []
    pos = 0
    for run in _HAN_RUN.finditer(s):
        out.append(s[pos:run.start()])
        words = []
        for w in segment(run.group(0)):
            if w in TABLE:
                recognized.append(w)
                words.append(TABLE[w])
            else:  # an unknown word: its characters may still be table words ("闲" of 闲下来)
                for ch in w:
                    if ch in WORDS:
                        recognized.append(ch)
                        words.append(WORDS[ch])
        out.append(" " + " ".join(x for x in words if x) + " ")
        pos = run.end()
    out.append(s[pos:])
    english = re.sub(r"[ \t]+", " ", "".join(out)).strip()
    for rx, repl in WORD_ORDER:
        english = rx.sub(repl, english)
    english = english.replace("@bound@", "bound")
    latin = re.sub(r"[\u3400-\u9fff]+", " ", s)
    content = any(w in WORDS for w in recognized) or bool(re.search(r"[A-Za-z]{2,}|\d", latin))
    return Translation(english, tuple(recognized), content)


def to_english(text: str) -> str:
    """``translate(text).english``: what words.rewrite and targets.parse_targets read."""
    return translate(text).english if has_chinese(text) else text
