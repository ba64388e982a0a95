"""A small tiktoken vocabulary (``qwen.tiktoken``) for PaddleNLP's QWenTokenizer (Qwen v1).

QWenTokenizer reads one ``base64(token bytes) rank`` line per mergeable token; its special
tokens (<|endoftext|>, <|im_start|>, <|im_end|>, <|extra_0..204|>) are appended after the last
rank in code, so the file holds none of them. tiktoken merges the adjacent pair whose joined
bytes have the lowest rank, and needs the ranks to run 0..N-1 without gaps. A byte-level BPE
trained with the ``tokenizers`` library gives that: the 256 single bytes first (rank = byte
value), then every merged token in the order training made it, each after both of its parts.

Training splits text as QWenTokenizer does (its own ``PAT_STR``), then cuts each Chinese
character off on its own. Every training piece lies inside one piece tiktoken will see, so every
merge learned can be applied there; and as no token spans two Chinese characters, a small corpus
of set phrases cannot spend its ranks on whole phrases while leaving their characters as byte
pieces: each Chinese character the corpus repeats becomes one token (about one token per
character, where the bytes alone take three).
"""

from __future__ import annotations

import base64
from pathlib import Path

VOCAB_FILE = "qwen.tiktoken"


def _byte_decoder() -> dict[str, int]:
    """The inverse of the ByteLevel alphabet: each printable stand-in character to its byte."""
    from tokenizers.pre_tokenizers import ByteLevel

    # ByteLevel's alphabet maps printable bytes to themselves and the rest to chr(256 + k),
    # k counting the non-printable bytes in order (GPT-2's scheme)
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    shifted = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable} | {chr(256 + k): b for k, b in enumerate(shifted)}
    assert set(table) == set(ByteLevel.alphabet()), "ByteLevel's alphabet is not GPT-2's byte map"
    return table


def train_tiktoken(corpus: list[str], out_dir: Path, vocab_size: int = 3000) -> Path:
    """Train a byte-level BPE of at most ``vocab_size`` ranks (256 bytes + merges of pairs seen at
    least twice, so a small corpus gives fewer; QWenTokenizer adds its 208 special tokens on top)
    on ``corpus`` and write ``out_dir/qwen.tiktoken``; return its path."""
    from paddlenlp.transformers.qwen.tokenizer import PAT_STR
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    if vocab_size <= 256:
        raise ValueError(f"vocab_size must exceed the 256 single bytes, got {vocab_size}")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PAT_STR), behavior="isolated"),
        pre_tokenizers.Split(Regex(r"\p{Han}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    bpe.train_from_iterator(corpus, trainer=trainer)

    to_byte = _byte_decoder()
    ranks: dict[bytes, int] = {bytes([b]): b for b in range(256)}
    # ids past the alphabet are the merged tokens in the order training made them
    for piece, _ in sorted(bpe.get_vocab().items(), key=lambda kv: kv[1]):
        token = bytes(to_byte[c] for c in piece)
        ranks.setdefault(token, len(ranks))

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / VOCAB_FILE
    lines = (f"{base64.b64encode(token).decode('ascii')} {rank}\n" for token, rank in ranks.items())
    path.write_text("".join(lines), encoding="ascii")
    return path
