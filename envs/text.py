"""Mission strings as fixed-length word ids, the same in every process, run and resume.

MiniGrid and BabyAI observations carry the task as text (`obs["mission"]`, e.g. "use the key
to open the door and then get to the goal"). torch-ac turns it into word ids with a
vocabulary that grows on the fly, in the order words are first seen; the ids then depend on
the process, the seed and the env order, and a resumed run or a second process disagrees.
Here the ids are a pure function of the text:

* a mission is lower-cased and split into words `[a-z0-9]+` (torch-ac splits on `[a-z]+`;
  digits are kept here, punctuation is dropped as there);
* a word in `MISSION_WORDS` gets `1 + its index` there. The list holds every word of the
  MiniGrid 3.0 and BabyAI missions (collected from 30 resets of each registered
  `MiniGrid-*`/`BabyAI-*` env and 1,500 of the longest BabyAI levels, plus the colour and
  object names of `minigrid.core.constants`), in alphabetical order. It may only ever be
  appended to: a changed id would silently break stored checkpoints;
* any other word is hashed: `1 + len(MISSION_WORDS) + crc32(word) % HASH_BUCKETS` (zlib's
  CRC-32, not Python's salted `hash`), so unknown words still get stable ids, sharing
  `HASH_BUCKETS` of them;
* id 0 pads the mission to `length` words.

`MISSION_VOCAB_SIZE` is the number of ids (embedding tables size themselves by it). A mission
of more than `length` words raises a ValueError naming it: silently cutting an instruction
would change the task. `DEFAULT_MISSION_LENGTH` (64) covers the longest missions measured
(49 words, BabyAI-BossLevel) with the margin the BabyAI grammar allows.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Sequence

import numpy as np

MISSION_WORDS: tuple[str, ...] = (
    "a", "after", "agent", "and", "at", "avoid", "ball", "behind", "blue", "box", "door",
    "empty", "end", "fetch", "find", "floor", "from", "front", "get", "go", "goal", "green",
    "grey", "hallway", "in", "key", "lava", "left", "matching", "must", "near", "next",
    "object", "of", "on", "open", "opening", "pick", "purple", "put", "reach", "red", "right",
    "room", "rooms", "square", "the", "then", "to", "traverse", "unlock", "unseen", "up",
    "use", "wall", "yellow", "you", "your",
)  # fmt: skip
"""The known words, id = 1 + index. Append only (module docstring)."""

HASH_BUCKETS = 64
"""Ids shared by the words not in `MISSION_WORDS`, by CRC-32."""

PAD = 0
MISSION_VOCAB_SIZE = 1 + len(MISSION_WORDS) + HASH_BUCKETS
DEFAULT_MISSION_LENGTH = 64

_WORD_IDS = {w: i + 1 for i, w in enumerate(MISSION_WORDS)}
_WORD = re.compile(r"[a-z0-9]+")


def mission_words(text: str) -> list[str]:
    """The words of a mission: lower-cased runs of `[a-z0-9]`."""
    return _WORD.findall(str(text).lower())


def word_id(word: str) -> int:
    """The id of one (lower-case) word: its place in `MISSION_WORDS`, else its hash bucket."""
    known = _WORD_IDS.get(word)
    if known is not None:
        return known
    return 1 + len(MISSION_WORDS) + zlib.crc32(word.encode("utf-8")) % HASH_BUCKETS


@functools.lru_cache(maxsize=4096)
def _encode(text: str, length: int) -> tuple[int, ...]:
    words = mission_words(text)
    if len(words) > length:
        raise ValueError(
            f"mission {text!r} has {len(words)} words, more than mission_length={length}; "
            "build the env with a larger mission_length"
        )
    return tuple(word_id(w) for w in words) + (PAD,) * (length - len(words))


def encode_mission(text: str, length: int = DEFAULT_MISSION_LENGTH) -> np.ndarray:
    """int32 `[length]` word ids of one mission, padded with 0."""
    return np.asarray(_encode(str(text), int(length)), np.int32)


def encode_missions(texts: Sequence[str], length: int = DEFAULT_MISSION_LENGTH) -> np.ndarray:
    """int32 `[B, length]` word ids of a batch of missions (a vector env's `obs["mission"]`)."""
    texts = np.asarray(texts, dtype=object).reshape(-1)
    out = np.empty((texts.shape[0], int(length)), np.int32)
    for i, text in enumerate(texts):
        out[i] = _encode(str(text), int(length))
    return out
