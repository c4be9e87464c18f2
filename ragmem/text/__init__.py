"""Text: keyword extraction and tokenizers (submodules), and how counts read in messages."""


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 example``, ``2 examples`` (``words``: an irregular plural)."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
