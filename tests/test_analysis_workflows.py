"""The workflow analysis's fetch-word test: its ASCII fast path finds what the regex finds."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from vsh_ai.analysis._workflows import _FETCH_WORDS, fetches_files, workflow_of

_WORDS = (
    "curl",
    "wget",
    "aria2c",
    "invoke-webrequest",
    "invoke-restmethod",
    "iwr",
    "irm",
    "bitstransfer",
    "gh",
    "download",
)
# Every character the regex treats specially near those words: all ASCII whitespace (``\s``
# is ten of them), other control characters, the non-ASCII letters ``(?i)`` pairs with
# ASCII ones, and non-ASCII spaces.
_NEAR = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x1b\x7f-_.|$\u0130\u0131\u017f\u212a\x85\xa0\u2028é"


def _any_case(word: str) -> st.SearchStrategy[str]:
    return st.tuples(*(st.sampled_from((c, c.upper())) for c in word)).map("".join)


_PIECES = st.one_of(
    st.sampled_from(_WORDS).flatmap(_any_case),
    st.sampled_from(_WORDS).map(lambda w: w[: len(w) // 2]),  # cut short: no match
    st.text(alphabet=_NEAR, max_size=3),
    st.text(max_size=4),
)


def _regex(data: bytes) -> bool:
    return _FETCH_WORDS.search(data.decode("utf-8", "replace")) is not None


@given(st.lists(_PIECES, max_size=12).map("".join))
@example("gh\t")
@example("GH\x1f")
@example("gh\x1b")  # not whitespace: no match
@example("\u212aurl")  # the Kelvin sign is a 'k', not a 'c': no match either way
@example("aria2\u0130")
def test_fetch_words_fast_path_agrees_with_the_regex(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    assert fetches_files(data) == _regex(data)


@given(st.binary(max_size=64))
def test_fetch_words_on_any_bytes_agree_with_the_regex(data: bytes) -> None:
    assert fetches_files(data) == _regex(data)


def test_a_workflow_knows_whether_it_can_fetch_files() -> None:
    quiet = b"on: push\njobs:\n  t:\n    runs-on: x\n    steps:\n      - run: pytest -q\n"
    loud = quiet.replace(b"pytest -q", b"CURL -sSL https://example.com/x.sh -o x.sh")
    spaced = quiet.replace(b"pytest -q", b"gh\trelease list")
    assert not workflow_of(quiet).fetches
    assert workflow_of(loud).fetches
    assert workflow_of(spaced).fetches
