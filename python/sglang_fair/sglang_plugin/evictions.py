"""Prefix evictions of one worker's radix cache, from SGLang's KV cache events, as router feedback.

SGLang reports its cache as ``BlockStored`` (hashes of consecutive pages, the parent page's hash,
their token ids) and ``BlockRemoved`` (hashes only). The router's global tree is keyed by tokens, so
:class:`BlockIndex` remembers, per stored page, its parent and tokens (packed, 4 bytes per token),
and turns each removal into ``(tokens, start)``: the whole path from the root, of which
``tokens[start:]`` left the cache. One notice per removed subtree suffices, since the router drops
everything extending ``tokens[:start]`` on that worker. Pure Python; no SGLang import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sglang_fair.core.global_tree import WIDTH, pack_tokens

Removal = tuple[bytes, int]  # (packed tokens from the root, start of the evicted part, in tokens)


class BlockIndex:
    """Stored pages of one cache: hash -> (parent hash, packed tokens)."""

    def __init__(self) -> None:
        self.pages: dict[int, tuple[int | None, bytes]] = {}

    def __len__(self) -> int:
        return len(self.pages)

    def stored(self, hashes: Sequence[int], parent: int | None, token_ids: Sequence[int],
               block_size: int) -> None:
        """Record consecutive pages ``hashes`` (each ``block_size`` tokens) below ``parent``."""
        for i, page in enumerate(hashes):
            chunk = token_ids[i * block_size : (i + 1) * block_size]
            if not chunk:
                break
            self.pages[page] = (parent, pack_tokens(list(chunk)))
            parent = page

    def removed(self, hashes: Iterable[int]) -> list[Removal]:
        """Forget ``hashes``; one removal per top of a removed subtree (unknown hashes are skipped)."""
        gone = [h for h in dict.fromkeys(hashes) if h in self.pages]
        gone_set = set(gone)
        out = [self._removal(h) for h in gone if self.pages[h][0] not in gone_set]
        for page in gone:
            del self.pages[page]
        return out

    def cleared(self) -> list[Removal]:
        """Everything left the cache: one removal per page hanging off the root (or an unknown parent)."""
        out = [(tokens, 0) for parent, tokens in self.pages.values() if parent not in self.pages]
        self.pages.clear()
        return out

    def _removal(self, page: int) -> Removal:
        chunks: list[bytes] = []
        node: int | None = page
        while node is not None and node in self.pages:
            parent, tokens = self.pages[node]
            chunks.append(tokens)
            node = parent
        path = b"".join(reversed(chunks))
        return path, (len(path) - len(chunks[0])) // WIDTH
