"""The grammar tutor's data: every sentence parses under an independent recognizer of the
grammar (with number agreement), generation is a function of the seed, batches are windows of
the stream shifted by one."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.errors import RingtreeError
from ringtree.lab import grammar as G

SG = {"the", "a", "this", "every"}
PL = {"the", "some", "these", "many"}


def _number_of(word, singular, plural):
    """0 singular, 1 plural, None if ``word`` is neither."""
    if word in singular:
        return 0
    return 1 if word in plural else None


def words(sentence):
    return sentence.split(" ")


class Parser:
    """A recursive-descent recognizer written from the grammar's rules in the module doc;
    it returns the sentence's subject number, or raises AssertionError."""

    def __init__(self, words):
        self.words, self.i = words, 0

    def take(self):
        assert self.i < len(self.words), "sentence ended early"
        w = self.words[self.i]
        self.i += 1
        return w

    def peek(self):
        return self.words[self.i] if self.i < len(self.words) else None

    def noun_phrase(self, depth):
        det = self.take()
        assert det in SG | PL, f"expected a determiner, got {det!r}"
        word = self.take()
        if word in G.ADJECTIVES:
            word = self.take()
        number = _number_of(word, set(G.NOUNS[0]), set(G.NOUNS[1]))
        assert number is not None, f"expected a noun, got {word!r}"
        assert det in (SG if number == 0 else PL), f"{det!r} does not agree with {word!r}"
        if self.peek() == "that":
            assert depth < G.MAX_DEPTH, "relative clauses nested too deep"
            self.take()
            self.verb_phrase(number, depth + 1)
        return number

    def verb_phrase(self, number, depth):
        verb = self.take()
        if verb in G.INTRANSITIVE[0] + G.INTRANSITIVE[1]:
            assert verb in G.INTRANSITIVE[number], f"{verb!r} does not agree (number {number})"
            return
        assert verb in G.TRANSITIVE[0] + G.TRANSITIVE[1], f"expected a verb, got {verb!r}"
        assert verb in G.TRANSITIVE[number], f"{verb!r} does not agree (number {number})"
        self.noun_phrase(depth)

    def sentence(self):
        number = self.noun_phrase(0)
        self.verb_phrase(number, 0)
        assert self.take() == "."
        assert self.i == len(self.words), "words after the full stop"
        return number


@given(seed=st.integers(0, 2**32 - 1))
def test_every_sentence_parses_and_agrees(seed):
    sentences = G.Grammar(seed).sentences(300)
    assert sum(map(len, sentences)) >= 300
    numbers = {Parser(s).sentence() for s in sentences}
    assert numbers == {0, 1}  # both numbers occur in 300 words


def test_parser_rejects_a_broken_agreement():
    with pytest.raises(AssertionError, match="does not agree"):
        Parser(words("the cat that chase the dogs sleeps .")).sentence()
    assert Parser(words("the cat that chases the dogs sleeps .")).sentence() == 0


def test_corpus_is_a_function_of_the_seed():
    a, b, c = G.corpus(7, 5000), G.corpus(7, 5000), G.corpus(8, 5000)
    assert a.dtype == np.int64 and a.shape == (5000,)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert set(np.unique(a)) <= set(range(len(G.VOCABULARY)))
    assert G.decode(a[:3]).split() == [G.VOCABULARY[i] for i in a[:3]]


def test_relative_clauses_make_long_distance_agreement():
    """The point of the grammar: some subjects are several words away from their verb."""
    words = [w for s in G.Grammar(0).sentences(20_000) for w in s]
    assert words.count("that") > 500


def test_batch_windows_and_targets():
    stream = G.corpus(0, 2000)
    x, y = G.batch(stream, seed=0, step=3, rank=1, batch_size=5, context=16)
    assert x.shape == y.shape == (5, 16)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one
    for row, target in zip(x, y, strict=True):  # every window is a slice of the stream
        starts = [s for s in range(len(stream) - 16) if np.array_equal(stream[s : s + 16], row)]
        assert any(np.array_equal(stream[s + 1 : s + 17], target) for s in starts)


def test_batch_depends_on_seed_step_and_rank_only():
    stream = G.corpus(0, 2000)
    same = G.batch(stream, 0, 3, 1, 4, 8), G.batch(stream, 0, 3, 1, 4, 8)
    np.testing.assert_array_equal(same[0][0], same[1][0])
    for other in (G.batch(stream, 1, 3, 1, 4, 8), G.batch(stream, 0, 4, 1, 4, 8),
                  G.batch(stream, 0, 3, 0, 4, 8)):
        assert not np.array_equal(other[0], same[0][0])


def test_batch_rejects_a_stream_shorter_than_a_window():
    with pytest.raises(RingtreeError, match="shorter than a window of 32"):
        G.batch(G.corpus(0, 20), 0, 0, 0, 2, 32)
