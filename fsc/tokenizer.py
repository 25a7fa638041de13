"""Tokenizers: a built-in byte-level one (no download) and local Hugging Face directories."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from fsc.errors import UsageError

MASK_NAMES = ("[MASK]", "<mask>", "<|mask|>", "<|mdm_mask|>")
EOS_NAMES = ("</s>", "<|endoftext|>", "<eos>", "[SEP]", "<|eot_id|>")


class ByteTokenizer:
    """UTF-8 bytes 0..255, then BOS 256, EOS 257, MASK 258, PAD 259."""

    vocab_size = 260
    bos_id, eos_id, mask_id, pad_id = 256, 257, 258, 259
    name = "bytes"

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

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        raise UsageError("no tokenizer for text: give --prompt-ids, or --tokenizer")

    def decode(self, ids: list[int]) -> str:
        return " ".join(str(i) for i in ids) + (" " if ids else "")

    @property
    def special_ids(self) -> list[int]:
        return []


class HFTokenizer:
    """A local `tokenizer.json` (a Hugging Face tokenizer directory); never downloads."""

    def __init__(self, path: Path, need_mask: bool = True):
        file = path / "tokenizer.json" if path.is_dir() else path
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
        self.eos_id = next((vocab[n] for n in EOS_NAMES if n in vocab), None)
        self.name = str(path)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids)

    @property
    def special_ids(self) -> list[int]:
        return [] if self.mask_id is None else [self.mask_id]


def prompt_ids(tokenizer, text: str, bos: bool) -> list[int]:
    """`text` as a model's sequence begins: after the BOS token when the model was trained
    with one (`bos`, from its checkpoint: fsc.source.starts_with_bos), else the text's tokens
    alone. An empty text starts from BOS either way (there is nothing else to start from),
    when the tokenizer has one."""
    ids = tokenizer.encode(text)
    bos_id = getattr(tokenizer, "bos_id", None)
    return ([bos_id] if (bos or not ids) and bos_id is not None else []) + ids


def load_tokenizer(path: str | Path | None, need_mask: bool = True):
    """The tokenizer at `path` (the byte-level one for None). A published causal LM's tokenizer
    has no mask token: autoregressive decoding loads it with `need_mask=False`."""
    return ByteTokenizer() if path is None else HFTokenizer(Path(path), need_mask)
