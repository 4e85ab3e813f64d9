"""The grammar tutor's data: a small English-like grammar with number agreement, made locally.

Sentences follow a probabilistic context-free grammar (no downloads, nothing random beyond
the seed)::

    S        -> NP[n] VP[n] "."
    NP[n]    -> Det[n] (Adj) Noun[n] ("that" VP[n])      a subject relative clause
    VP[n]    -> IntransitiveVerb[n] | TransitiveVerb[n] NP[m]     (m: either number)

where n is singular or plural and must agree between a noun phrase and its verb, also across
a relative clause ("the cat that chases the dogs *sleeps*"). Relative clauses nest up to
``MAX_DEPTH`` deep. A model that learns the grammar predicts the verb's number from a noun
several words back, which is what makes it a tutor worth watching.

:func:`corpus` is one long stream of sentences as token ids; :func:`batch` cuts it into
(input, target) windows for one rank and one step, deterministically from
``(seed, step, rank)``, so two training runs with the same seed see the same data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from ringtree.errors import RingtreeError

# Words by part of speech and number (singular, plural).
DETERMINERS = (("the", "a", "this", "every"), ("the", "some", "these", "many"))
NOUNS = (
    ("cat", "dog", "bird", "student", "teacher", "robot", "child", "farmer"),
    ("cats", "dogs", "birds", "students", "teachers", "robots", "children", "farmers"),
)
INTRANSITIVE = (("sleeps", "runs", "sings", "waits"), ("sleep", "run", "sing", "wait"))
TRANSITIVE = (
    ("sees", "chases", "likes", "helps", "follows"),
    ("see", "chase", "like", "help", "follow"),
)
ADJECTIVES = ("small", "big", "red", "happy", "old")
FUNCTION_WORDS = ("that", ".")

MAX_DEPTH = 2  # relative clauses inside relative clauses, at most
P_ADJECTIVE = 0.3
P_RELATIVE = 0.35
P_TRANSITIVE = 0.5


def _vocabulary() -> tuple[str, ...]:
    words: list[str] = []
    for group in (*DETERMINERS, *NOUNS, *INTRANSITIVE, *TRANSITIVE, ADJECTIVES, FUNCTION_WORDS):
        words.extend(w for w in group if w not in words)
    return tuple(words)


VOCABULARY = _vocabulary()
TOKEN = {w: i for i, w in enumerate(VOCABULARY)}


@dataclass(frozen=True)
class Grammar:
    """Draws sentences from the grammar with a ``random.Random(seed)``."""

    seed: int = 0

    def sentences(self, n_tokens: int) -> list[list[str]]:
        """Whole sentences, in order, until they hold at least ``n_tokens`` words."""
        rng = random.Random(self.seed)
        out: list[list[str]] = []
        total = 0
        while total < n_tokens:
            number = rng.randrange(2)
            words = _noun_phrase(rng, number, 0) + _verb_phrase(rng, number, 0) + ["."]
            out.append(words)
            total += len(words)
        return out


def _noun_phrase(rng: random.Random, number: int, depth: int) -> list[str]:
    words = [rng.choice(DETERMINERS[number])]
    if rng.random() < P_ADJECTIVE:
        words.append(rng.choice(ADJECTIVES))
    words.append(rng.choice(NOUNS[number]))
    if depth < MAX_DEPTH and rng.random() < P_RELATIVE:
        words += ["that", *_verb_phrase(rng, number, depth + 1)]
    return words


def _verb_phrase(rng: random.Random, number: int, depth: int) -> list[str]:
    if rng.random() < P_TRANSITIVE:
        obj = _noun_phrase(rng, rng.randrange(2), depth)
        return [rng.choice(TRANSITIVE[number]), *obj]
    return [rng.choice(INTRANSITIVE[number])]


def corpus(seed: int, n_tokens: int) -> np.ndarray:
    """``n_tokens`` token ids (int64): sentences of ``Grammar(seed)`` back to back."""
    words = [w for s in Grammar(seed).sentences(n_tokens) for w in s][:n_tokens]
    return np.array([TOKEN[w] for w in words], dtype=np.int64)


def decode(ids: np.ndarray | list[int]) -> str:
    """Token ids back to words: ``decode(corpus(0, 8))`` reads as a sentence."""
    return " ".join(VOCABULARY[int(i)] for i in ids)


def batch(
    stream: np.ndarray, seed: int, step: int, rank: int, batch_size: int, context: int
) -> tuple[np.ndarray, np.ndarray]:
    """``batch_size`` windows of ``context`` tokens for ``rank`` at ``step``: inputs and the
    next tokens (targets), each of shape (batch_size, context). The window starts depend only
    on ``(seed, step, rank)``."""
    if len(stream) < context + 2:
        raise RingtreeError(f"stream of {len(stream)} tokens is shorter than a window of {context}")
    rng = np.random.default_rng([seed, step, rank])
    starts = rng.integers(0, len(stream) - context - 1, size=batch_size)
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    windows = stream[idx]
    return windows[:, :-1], windows[:, 1:]
