"""Tokenizers: a built-in byte-level one (no download) and local Hugging Face directories."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer

from fsc.errors import UsageError
from fsc.jsonsafe import json_object

MASK_NAMES = ("[MASK]", "<mask>", "<|mask|>", "<|mdm_mask|>")
EOS_NAMES = ("</s>", "<|endoftext|>", "<eos>", "[SEP]", "<|eot_id|>")


class ByteTokenizer:
    """UTF-8 bytes 0..255, then BOS 256, EOS 257, MASK 258, PAD 259."""

    vocab_size = 260
    bos_id, eos_id, mask_id, pad_id = 256, 257, 258, 259
    name = "bytes"
    adds_bos = False  # a text is its bytes; a model's convention (`bos`) adds BOS

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    @property
    def special_ids(self) -> list[int]:
        return [self.bos_id, self.mask_id, self.pad_id]


class IdTokenizer:
    """No text at all: token ids in (`--prompt-ids`), ids out, printed as numbers. Used when
    decoding by ids with no tokenizer at hand; autoregressive only (no mask token)."""

    bos_id = eos_id = mask_id = None
    name = "ids"
    adds_bos = False

    def __init__(self, vocab_size: int, why: str | None = None):
        self.vocab_size = vocab_size
        self.why = why  # why the model has no tokenizer, where there is more to say

    def encode(self, text: str) -> list[int]:
        raise UsageError("no tokenizer for text" + (f": {self.why}; or" if self.why else ":")
                         + " give --prompt-ids, or --tokenizer")

    def decode(self, ids: list[int]) -> str:
        return " ".join(str(i) for i in ids) + (" " if ids else "")

    @property
    def special_ids(self) -> list[int]:
        return []


class HFTokenizer:
    """A local `tokenizer.json` (a Hugging Face tokenizer directory); never downloads.

    `encode` gives a text's own tokens; what the tokenizer's post-processor puts around a text
    (Llama's `<s>` first) is read off it once: `adds_bos` and `bos_id` say whether a text
    begins with BOS as transformers' `tokenizer(text)` begins it (`fsc.tokenizer.prompt_ids`
    adds it where the model's sequences begin so)."""

    def __init__(self, path: Path, need_mask: bool = True):
        file = path / "tokenizer.json" if path.is_dir() else path
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory (expected a local tokenizer "
                             "directory)")
        if not file.exists():
            raise UsageError(f"{path}: no tokenizer.json found (expected a local tokenizer directory)")
        try:
            self.tok = Tokenizer.from_file(str(file))
        except Exception as e:  # noqa: BLE001 - the tokenizers library raises plain Exceptions
            raise UsageError(f"{file}: cannot load tokenizer ({e})") from None
        vocab = self.tok.get_vocab(with_added_tokens=True)
        self.vocab_size = max(vocab.values()) + 1
        self.mask_id = next((vocab[n] for n in MASK_NAMES if n in vocab), None)
        if self.mask_id is None and need_mask:
            raise UsageError(f"{file}: tokenizer has no mask token (one of {', '.join(MASK_NAMES)})")
        named = {k: vocab[t] for k, t in named_tokens(file.parent).items() if t in vocab}
        self.eos_id = named.get("eos", next((vocab[n] for n in EOS_NAMES if n in vocab), None))
        # transformers' generate stops at any EOS the model's generation config lists
        self.folder = file.parent  # (where the model's generation_config.json lies, if it has one)
        ends = [self.eos_id, *generation_eos(self.folder)]
        self.stops = tuple(dict.fromkeys(i for i in ends if i is not None and i < self.vocab_size))
        prefix = self._prefix()
        self.bos_id = prefix[0] if prefix else named.get("bos")
        # the post-processor decides (transformers 5 follows it whatever tokenizer_config.json's
        # `add_bos_token` says)
        self.adds_bos = bool(prefix)
        self.name = str(path)

    def _prefix(self) -> list[int]:
        """The ids the post-processor puts before a text's own (e.g. [BOS]), read off a probe."""
        probe = "a b"
        whole = self.tok.encode(probe, add_special_tokens=True).ids
        own = self.tok.encode(probe, add_special_tokens=False).ids
        for i in range(len(whole) - len(own) + 1):
            if whole[i : i + len(own)] == own:
                return whole[:i]
        return []

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids)

    def token_text(self, i: int) -> str:
        """Token `i` as text, a special token included (`decode` leaves those out)."""
        return self.tok.decode([i], skip_special_tokens=False)

    @property
    def special_ids(self) -> list[int]:
        return [] if self.mask_id is None else [self.mask_id]


_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def token_sizes(tokenizer) -> Callable[[int], int] | None:
    """How many bytes of text each token stands for, where a token's own bytes are known: fsc's
    byte tokenizer's ids; a byte-level BPE's (GPT-2's, Llama 3's, Qwen's), one a character of
    its vocabulary string; a sentencepiece BPE's (Llama 2's, Mistral's), its piece with `▁` a
    space, and one for a byte-fallback piece `<0xE6>`. A special token stands for none. None
    for another tokenizer, whose tokens' bytes only the text of several together tells."""
    if isinstance(tokenizer, ByteTokenizer):
        return lambda i: int(i < 256)
    tok = getattr(tokenizer, "tok", None)
    if tok is None:
        return None
    spec = json.loads(tok.to_str()).get("decoder") or {}
    steps = spec.get("decoders", []) if spec.get("type") == "Sequence" else [spec]
    kinds = {d.get("type") for d in steps}
    if kinds == {"ByteLevel"}:
        piece = len  # a character of the vocabulary string a byte
    elif kinds <= {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"} and \
            kinds & {"Replace", "Metaspace"}:
        swaps = [(d["replacement"], " ") if d["type"] == "Metaspace" else
                 (d["pattern"].get("String"), d["content"]) for d in steps
                 if d["type"] in ("Replace", "Metaspace")]
        if any(old is None for old, _ in swaps):  # a Replace by a regex: only the text tells
            return None
        fallback = "ByteFallback" in kinds

        def piece(token: str) -> int:
            if fallback and _BYTE_TOKEN.fullmatch(token):
                return 1
            for old, new in swaps:
                token = token.replace(old, new)
            return len(token.encode("utf-8"))
    else:
        return None
    added = tok.get_added_tokens_decoder()  # their text as it is; a special one decodes to none

    def size(i: int) -> int:
        a = added.get(i)
        if a is not None:
            return 0 if a.special else len(a.content.encode("utf-8"))
        return piece(tok.id_to_token(i) or "")

    return size


def named_tokens(folder: Path) -> dict[str, str]:
    """What a Hugging Face tokenizer folder names as its special tokens (special_tokens_map.json,
    then tokenizer_config.json): `bos` and `eos`, as token text."""
    found: dict = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        config = json_object(folder / name)
        for key in ("bos", "eos"):
            token = config.get(f"{key}_token")
            token = token.get("content") if isinstance(token, dict) else token
            if isinstance(token, str):
                found.setdefault(key, token)
    return found


GENERATION_FILE = "generation_config.json"  # a published model's generation settings


def generation_eos(folder: Path) -> list[int]:
    """The EOS ids a published model's folder lists for generation: generation_config.json's
    `eos_token_id` (one id or several, as Qwen3's and Llama 3's list), else config.json's."""
    for name in (GENERATION_FILE, "config.json"):
        ids = json_object(folder / name).get("eos_token_id")
        if ids is None:
            continue
        ids = ids if isinstance(ids, list) else [ids]
        return [i for i in ids if isinstance(i, int) and not isinstance(i, bool) and i >= 0]
    return []


def stop_ids(tokenizer) -> tuple[int, ...]:
    """The ids that end a decode (kept as its last token): a published tokenizer's EOS and
    those its model's generation config lists (`HFTokenizer.stops`), else the tokenizer's EOS
    (none for ids alone)."""
    stops = getattr(tokenizer, "stops", None)
    if stops is not None:
        return tuple(stops)
    eos = getattr(tokenizer, "eos_id", None)
    return () if eos is None else (eos,)


def first_stop(ids: list[int], stops: tuple[int, ...]) -> int | None:
    """The index of the first of `stops` in `ids`, or None."""
    return next((i for i, t in enumerate(ids) if t in stops), None)


def prompt_ids(tokenizer, text: str, bos: bool) -> list[int]:
    """`text` as a model's sequence begins: after the BOS token when the model was trained
    with one (`bos`, from its checkpoint: fsc.source.Source.starts_with_bos), else the text's tokens
    alone. An empty text starts from BOS either way (there is nothing else to start from),
    when the tokenizer has one."""
    return begun(tokenizer.encode(text), tokenizer, bos)


def begun(ids: list[int], tokenizer, bos: bool) -> list[int]:
    """Token ids as a model's sequence begins (see `prompt_ids`)."""
    bos_id = getattr(tokenizer, "bos_id", None)
    return ([bos_id] if (bos or not ids) and bos_id is not None else []) + ids


# what a checkpoint carries from the folder of the tokenizer it reads text with: the
# tokenizer's files, and the published model's generation settings (the EOS ids a decode stops
# at, `generation_eos`)
CARRIED_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 GENERATION_FILE)


def carried_files(path: str | Path | None) -> tuple[Path, ...]:
    """The files of a tokenizer's folder (`CARRIED_FILES`, those it has) a checkpoint carries,
    so that a copy reads text and stops as its model does wherever it goes (none for fsc's
    byte tokenizer, None)."""
    if path is None:
        return ()
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    return tuple(folder / f for f in CARRIED_FILES if (folder / f).is_file())


def check_vocab(tokenizer, recipe) -> None:
    """UsageError for a tokenizer with more tokens than `recipe`'s model has ids (its ids past
    the embedding would index nothing)."""
    if tokenizer.vocab_size > recipe.vocab_size:
        raise UsageError(f"the tokenizer ({tokenizer.name}) has {tokenizer.vocab_size} tokens "
                         f"but {recipe.name}'s vocab_size is {recipe.vocab_size}")


def load_tokenizer(path: str | Path | None, need_mask: bool = True):
    """The tokenizer at `path` (the byte-level one for None). A published causal LM's tokenizer
    has no mask token: autoregressive decoding loads it with `need_mask=False`."""
    return ByteTokenizer() if path is None else HFTokenizer(Path(path), need_mask)
