"""wordcount: counts words in text."""

from collections import Counter


def count(text):
    """Return a Counter of the lower-cased words of text."""
    return Counter(word.strip(".,;:!?").lower() for word in text.split())


def top(text, n=1):
    """Return the n most common words of text with their counts."""
    return count(text).most_common(n)
