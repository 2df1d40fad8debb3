"""Config trees: six formats, key paths, patterns, typed equality, refusals with locations."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vsh_ai.analysis import _config, _config_yaml
from vsh_ai.analysis._config import (
    MISSING,
    ConfigSyntaxError,
    KeyChange,
    TypedSet,
    check_key_pattern,
    config_changes,
    detect_format,
    flatten,
    key_matches,
    lookup,
    parse_config,
    typed_equal,
    typed_key,
)


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("a/config.toml", "toml"),
        ("x.JSON", "json"),
        ("c.yaml", "yaml"),
        ("c.yml", "yaml"),
        ("setup.cfg", "ini"),
        ("nginx/site.conf", "ini"),
        ("tox.ini", "ini"),
        (".env", "env"),
        ("app/.env.production", "env"),
        ("prod.env", "env"),
        ("src/main/resources/application.properties", "properties"),
        ("README.md", "auto"),
        (".envrc", "auto"),
        ("Makefile", "auto"),
    ],
)
def test_detect_format(path: str, fmt: str) -> None:
    assert detect_format(path) == fmt


def test_auto_without_a_known_suffix_is_refused() -> None:
    with pytest.raises(ConfigSyntaxError, match="format"):
        parse_config(b"a = 1", path="notes.txt")


# The same setting in every format: one key path, typed where the format has types.
SAME_SETTING = {
    "c.toml": (b'[server]\nport = 8080\ndebug = false\n[[upstreams]]\nverify_tls = true\n'
               b'[[upstreams]]\nverify_tls = false\n', 8080, False),
    "c.json": (b'{"server": {"port": 8080, "debug": false},'
               b' "upstreams": [{"verify_tls": true}, {"verify_tls": false}]}', 8080, False),
    "c.yaml": (b"server:\n  port: 8080\n  debug: false\nupstreams:\n  - verify_tls: true\n"
               b"  - verify_tls: false\n", 8080, False),
    "c.ini": (b"[server]\nport = 8080\ndebug = false\n[upstreams]\n[1]\n", "8080", "false"),
    "c.properties": (b"server.port=8080\nserver.debug : false\nupstreams[1].verify_tls false\n",
                     "8080", "false"),
    ".env": (b"server.port=8080\nexport server.debug='false'\n", "8080", "false"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SAME_SETTING))
def test_same_key_path_in_every_format(name: str) -> None:
    data, port, debug = SAME_SETTING[name]
    flat = flatten(parse_config(data, path=name))
    assert flat["server.port"] == port
    assert type(flat["server.port"]) is type(port)
    assert flat["server.debug"] == debug
    if name.endswith((".toml", ".json", ".yaml", ".properties")):
        assert flat["upstreams[1].verify_tls"] in (False, "false")


def test_lists_are_not_opaque() -> None:
    before = parse_config(
        b"[[upstreams]]\nverify_tls = true\n[[upstreams]]\nverify_tls = true\n", "toml"
    )
    after = parse_config(
        b"[[upstreams]]\nverify_tls = true\n[[upstreams]]\nverify_tls = false\n", "toml"
    )
    assert config_changes(before, after) == (KeyChange("upstreams[1].verify_tls", True, False),)
    hosts = flatten(parse_config(b'{"hosts": ["a", "b", "c"], "e": {}, "l": []}', "json"))
    assert hosts == {"hosts[0]": "a", "hosts[1]": "b", "hosts[2]": "c", "e": {}, "l": []}


def test_quoting_and_top_level_shapes() -> None:
    tree = parse_config(
        b'{"a.b": 1, "a": {"b": 2}, "x y": {"[0]": 3}, "": 4, "*": 5, "q\\"": 6}', "json"
    )
    assert flatten(tree) == {
        '"a.b"': 1,
        "a.b": 2,
        '"x y"."[0]"': 3,
        '""': 4,
        '"*"': 5,
        '"q\\""': 6,
    }
    assert flatten(parse_config(b'[{"n": 1}, 2]', "json")) == {"[0].n": 1, "[1]": 2}
    assert flatten(parse_config(b"5", "json")) == {"": 5}
    assert flatten(parse_config(b"{}", "json")) == {}
    assert flatten(parse_config(b"", "yaml")) == {}
    assert flatten(MISSING) == {}


def test_two_spellings_of_one_key_path_are_refused(yaml_loader: Any) -> None:
    with pytest.raises(ConfigSyntaxError, match="spelled twice"):
        flatten(parse_config(b"1: a\n'1': b\n", "yaml"))
    with pytest.raises(ConfigSyntaxError, match="spelled twice"):
        flatten(parse_config(b"[a]\nb.c = 1\n[a.b]\nc = 2\n", "ini"))
    with pytest.raises(ConfigSyntaxError, match="spelled twice"):
        flatten(parse_config(b"true: a\n'true': b\n", "yaml"))


# -- YAML --------------------------------------------------------------------------


@pytest.fixture(params=["libyaml", "pure"])
def yaml_loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run a YAML test on libyaml's loader (the default when present) and the pure one."""
    loader = _config_yaml._PureLoader if request.param == "pure" else _config_yaml._Loader
    monkeypatch.setattr(_config_yaml, "_Loader", loader)
    _config._PARSED.clear()  # parsed trees are cached by content, not by loader
    yield loader
    _config._PARSED.clear()


MERGE = b"""
base: &base
  timeout: 30
  verify_tls: true
  retries: 1
other: &other
  timeout: 99
  retries: 3
  listen: 0.0.0.0
svc:
  <<: [*base, *other]
  verify_tls: false
single:
  <<: *base
  timeout: 5
nested:
  <<: *svc_anchor_free
""".replace(b"  <<: *svc_anchor_free\n", b"  inner: *base\n")


def test_yaml_merge_keys_follow_the_spec(yaml_loader: Any) -> None:
    tree = parse_config(MERGE, "yaml")
    assert tree["svc"] == {"timeout": 30, "retries": 1, "listen": "0.0.0.0", "verify_tls": False}
    assert tree["single"] == {"timeout": 5, "verify_tls": True, "retries": 1}
    assert flatten(tree)["nested.inner.verify_tls"] is True


def test_yaml_merge_chain_and_anchor_reuse(yaml_loader: Any) -> None:
    text = b"""
a: &a {x: 1, y: 1}
b: &b
  <<: *a
  y: 2
c:
  <<: *b
  z: 3
d: *b
"""
    tree = parse_config(text, "yaml")
    assert tree["b"] == {"x": 1, "y": 2}
    assert tree["c"] == {"x": 1, "y": 2, "z": 3}
    assert tree["d"] == {"x": 1, "y": 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"a: 1\nb: 2\na: 3\n", "duplicate key 'a' (line 3, column 1)"),
        (b"s:\n  <<: {x: 1}\n  x: 2\n  x: 3\n", "duplicate key 'x' (line 4"),
        (b"s:\n  <<: {x: 1}\n  <<: {y: 1}\n", "duplicate merge key"),
        (b"s:\n  <<: 5\n", "merge key needs mappings"),
        (b"a: &a [*a]\n", "recursive alias"),
        (b"a: !!python/object:os.system {}\n", "line 1"),
        (b"a: [1\n", "line"),
        (b"a:\n\t- b\n", "line 2"),
        (b"? [a, b]\n: 1\n", "scalar"),
    ],
)
def test_yaml_refusals(text: bytes, message: str, yaml_loader: Any) -> None:
    with pytest.raises(ConfigSyntaxError, match=_re(message)):
        parse_config(text, "yaml")


def test_yaml_alias_bomb_is_refused_quickly(yaml_loader: Any) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for index in range(1, 9):
        prev, name = chr(ord("a") + index - 1), chr(ord("a") + index)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    with pytest.raises(ConfigSyntaxError, match="expands to more than"):
        parse_config("\n".join(lines).encode(), "yaml")


def test_yaml_documents_and_types(yaml_loader: Any) -> None:
    assert parse_config(b"---\na: 1\n---\nb: 2\n", "yaml") == [{"a": 1}, {"b": 2}]
    assert flatten(parse_config(b"a: 1\n---\nb: [x]\n", "yaml")) == {"[0].a": 1, "[1].b[0]": "x"}
    flat = flatten(parse_config(b"a: yes\nb: '1'\nc: 1\nd: 1.0\ne: ~\nf: 2024-01-02\n", "yaml"))
    assert [type(v).__name__ for v in flat.values()] == [
        "bool", "str", "int", "float", "NoneType", "date",
    ]  # fmt: skip


def _nest(depth: int, open_: str = "[", close: str = "]") -> bytes:
    return ("a: " + open_ * depth + close * depth + "\n").encode()


def test_yaml_flow_nesting_is_bounded(yaml_loader: Any) -> None:
    # PyYAML's pure scanner is quadratic in flow depth: 5,000 levels took about a second.
    assert flatten(parse_config(_nest(100), "yaml")) == {"a" + "[0]" * 99: []}
    for depth in (101, 500, 5000, 100_000):
        with pytest.raises(ConfigSyntaxError, match=r"yaml: .*(flow|depth)"):
            parse_config(_nest(depth), "yaml")
    with pytest.raises(ConfigSyntaxError, match="deeper than 100"):
        parse_config(("a: " + "{b: " * 101 + "1" + "}" * 101).encode(), "yaml")
    with pytest.raises(ConfigSyntaxError, match="deeper than 100"):
        parse_config(_nest(101).replace(b"a: ", b"- "), "yaml")


def test_yaml_flow_depth_counts_pairs_and_aliases(yaml_loader: Any) -> None:
    # Both loaders refuse the same trees: the depth is counted on the composed nodes, so
    # '[a: [a: ...]]' single pairs (a mapping per level) and aliases to deep flows count.
    pairs = ("x: " + "[a: " * 60 + "1" + "]" * 60 + "\n").encode()
    with pytest.raises(ConfigSyntaxError, match="deeper than 100"):
        parse_config(pairs, "yaml")

    def aliased(inner: int) -> bytes:
        return (
            "x: &x " + "[" * 50 + "]" * 50 + "\ny: " + "[" * inner + "*x" + "]" * inner
        ).encode()

    assert len(flatten(parse_config(aliased(50), "yaml"))) == 2
    with pytest.raises(ConfigSyntaxError, match="deeper than 100"):
        parse_config(aliased(51), "yaml")
    block = "x: &x " + "[" * 100 + "]" * 100 + "\ny:\n  z: *x\n"
    assert "y.z" + "[0]" * 99 in flatten(parse_config(block.encode(), "yaml"))


def test_yaml_byte_order_mark_inside_is_refused(yaml_loader: Any) -> None:
    # libyaml reads '\ufeff1' after a line break as 1, PyYAML as the string '\ufeff1'.
    assert parse_config(b"\xef\xbb\xbfa: 1\n", "yaml") == {"a": 1}
    with pytest.raises(ConfigSyntaxError, match=r"byte order mark inside the text \(line 2"):
        parse_config("a: 1\n\ufeffb: 1\n".encode(), "yaml")


_YAML_PIECES = st.sampled_from(
    ["a", "b", ":", " ", "\n", "- ", "[", "]", "{", "}", ",", "'", '"', "#", "&x ", "*x",
     "<<", "? ", "|", ">", "---", "...", "!!str ", "!!int ", "yes", "on", "1", "0x1F",
     "1_000", "1.5e3", "2024-01-02", "~", "null", "\t", "  ", "\\", "\u00e9", "\u2028"]
)  # fmt: skip


@given(pieces=st.lists(_YAML_PIECES, max_size=30))
def test_yaml_loaders_agree_when_both_read(pieces: list[str]) -> None:
    # libyaml accepts some text PyYAML refuses (tabs, '|#', ']' inside plain scalars);
    # whatever both read, they read the same.
    text = "".join(pieces)
    results = []
    for loader in (_config_yaml._PureLoader, _config_yaml._Loader):
        try:
            results.append(repr(_config_yaml.parse_yaml(text, loader)))
        except Exception:  # parse_config turns every parser failure into ConfigSyntaxError
            results.append(None)
    if None not in results:
        assert results[0] == results[1], text


_SCALAR_TEXT = st.one_of(
    st.sampled_from(
        ["yes", "No", "on", "OFF", "y", "1", "-1", "0x1F", "0o17", "1_000", "1.5e3", ".inf",
         "-.NaN", "2024-01-02", "2024-01-02 10:00:00", "~", "null", "Null", "", "=", "<<",
         "1:30", "+12", "0b101", "true", "False", "x" * 64, "1" * 65]
    ),
    st.text(alphabet="0123456789.:-_+eE~xXnNuUlLtTrRfFaAsSyYoO ", max_size=12),
)  # fmt: skip


@given(values=st.lists(st.tuples(_SCALAR_TEXT, st.booleans()), max_size=8))
def test_yaml_remembered_tags_are_pyyamls_own(values: list[tuple[str, bool]]) -> None:
    """Issue 18: a scalar's resolved tag is remembered (keyed by loader, text and whether it
    was plain); every answer, first or remembered, is PyYAML's own resolver's."""
    import yaml

    reference = yaml.SafeLoader("")
    for loader_class in (_config_yaml._PureLoader, _config_yaml._Loader):
        loader = loader_class("")
        try:
            for _ in range(2):  # the second round answers from memory
                for value, plain in values:
                    implicit = (plain, not plain)
                    expected = reference.resolve(yaml.ScalarNode, value, implicit)
                    assert loader.resolve(yaml.ScalarNode, value, implicit) == expected, value
        finally:
            loader.dispose()
    reference.dispose()


def test_yaml_a_quoted_scalar_stays_text_after_the_plain_one() -> None:
    for text in ("a: 1\nb: '1'\nc: yes\nd: \"yes\"\n", "b: '1'\na: 1\nd: \"yes\"\nc: yes\n"):
        assert _config_yaml.parse_yaml(text) == {"a": 1, "b": "1", "c": True, "d": "yes"}


def test_yaml_libyaml_is_used_when_present() -> None:
    import yaml

    if yaml.__with_libyaml__:
        assert issubclass(_config_yaml._Loader, yaml.CSafeLoader)
    else:  # pragma: no cover
        assert _config_yaml._Loader is _config_yaml._PureLoader


# -- other formats -------------------------------------------------------------------


def test_env_rules() -> None:
    text = (
        b"# comment\n"
        b"export A=1\n"
        b"B = spaced value # trailing comment\n"
        b"C='literal $HOME \\n'\n"
        b'D="esc \\" \\n end" # c\n'
        b"E=\n"
        b'F="multi\nline"\n'
        b"G=a#b\n"
    )
    assert flatten(parse_config(text, "env")) == {
        "A": "1",
        "B": "spaced value",
        "C": "literal $HOME \\n",
        "D": 'esc " \n end',
        "E": "",
        "F": "multi\nline",
        "G": "a#b",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"A=1\nA=2\n", "duplicate key 'A' (line 2)"),
        (b"A=1\njust words\n", "line 2 is not KEY=VALUE"),
        (b'A="open\n', "line 1: unterminated"),
        (b"A='x' y\n", "line 1: text after the closing quote"),
        (b"1A=2\n", "line 1"),
    ],
)
def test_env_refusals(text: bytes, message: str) -> None:
    with pytest.raises(ConfigSyntaxError, match=_re(message)):
        parse_config(text, "env")


def test_properties_java_rules() -> None:
    text = (
        b"# comment\n! also a comment\n"
        b"server.port = 8080\n"
        b"server.host: example.org\n"
        b"greeting hello world\n"
        b"long = one \\\n    two\n"
        b"unicode=caf\\u00e9\n"
        b"key\\ with\\ space = v\n"
        b"logging.level=INFO\n"
        b"logging.level.root=DEBUG\n"
    )
    assert flatten(parse_config(text, path="application.properties")) == {
        "server.port": "8080",
        "server.host": "example.org",
        "greeting": "hello world",
        "long": "one two",
        "unicode": "café",
        '"key with space"': "v",
        "logging.level": "INFO",
        "logging.level.root": "DEBUG",
    }


def test_properties_duplicates_refused_with_line() -> None:
    with pytest.raises(ConfigSyntaxError, match=_re("duplicate key 'a' (line 4)")):
        parse_config(b"a=1\n# c\nb=2\na=3\n", "properties")


def test_properties_long_continuations_are_refused() -> None:
    # javaproperties rescans the gathered entry per continuation line (quadratic): 4,000
    # short lines took 0.4 s and 1,000 lines of 250 characters 5 s.
    def continued(lines: int, width: int, end: str = "\n") -> bytes:
        return ("k=" + ("a" * width + "\\" + end + " ") * lines + "z\n").encode()

    assert parse_config(continued(1000, 2), "properties") == {"k": "aa" * 1000 + "z"}
    assert parse_config(continued(3, 2, "\r\n"), "properties") == {"k": "aaaaaaz"}
    for text in (continued(1001, 2), continued(4000, 2, "\r"), continued(60_000, 2)):
        with pytest.raises(ConfigSyntaxError, match=r"more than 1000 lines \(line 1001"):
            parse_config(text, "properties")
    for text in (continued(1000, 250), continued(250, 1000), continued(100, 2500, "\r\n")):
        with pytest.raises(ConfigSyntaxError, match="too long to read in time"):
            parse_config(text, "properties")
    # an even run of backslashes is an escaped backslash, not a continuation
    even = ("k=" + "a\\\\\n" * 5000).encode()
    with pytest.raises(ConfigSyntaxError, match="duplicate key 'a"):
        parse_config(even, "properties")
    assert parse_config(b"a=x\\\\\nb=y\\\\\n", "properties") == {"a": "x\\", "b": "y\\"}
    spread = b"".join(b"k%d=a\\\n  b\\\n  c\n" % i for i in range(5000))
    assert len(parse_config(spread, "properties")) == 5000, "many short entries are fine"


def test_ini_rules() -> None:
    text = b"[DEFAULT]\ntimeout = 30\n[server]\nPort = 80 ; not a comment\n[Server]\nport = 81\n"
    assert flatten(parse_config(text, "ini")) == {
        "DEFAULT.timeout": "30",
        "server.timeout": "30",
        "server.Port": "80 ; not a comment",
        "Server.timeout": "30",
        "Server.port": "81",
    }
    assert flatten(parse_config(b"[a]\nx = %(y)s\n", "ini")) == {"a.x": "%(y)s"}


@pytest.mark.parametrize(
    ("data", "fmt", "message"),
    [
        (b'{"a": 1,\n "b": 2,\n "a": 3}', "json", "duplicate key 'a' (line 3)"),
        (b'{"a": NaN}', "json", "NaN is not JSON (line 1)"),
        (b'{"a": -Infinity}', "json", "Infinity is not JSON"),
        (b'{"a": 1,}', "json", "line 1, column 9"),
        (b"a = 1\nb = \n", "toml", "line 2"),
        (b"a = 1\na = 2\n", "toml", "line 2"),
        (b"[s]\na = 1\na = 2\n", "ini", "line 3"),
        (b"[s]\n[s]\n", "ini", "line 2"),
        (b"a = 1\n!!\n", "ini", "line 2"),  # no [section]: read as `key value` lines
        (b"a=\\u12zz\n", "properties", "escape"),
        (b"a: 1\n\xff", "yaml", "not UTF-8 (byte 5"),
    ],
)
def test_malformed_input_names_a_location(data: bytes, fmt: Any, message: str) -> None:
    with pytest.raises(ConfigSyntaxError, match=_re(message)):
        parse_config(data, fmt, path="conf/x")
    with pytest.raises(ConfigSyntaxError, match="conf/x"):
        parse_config(data, fmt, path="conf/x")


def test_bom_is_ignored_and_results_are_cached() -> None:
    assert parse_config(b'\xef\xbb\xbf{"a": 1}', "json") == {"a": 1}
    assert parse_config(b'{"a": 1}', "json") is parse_config(b'{"a": 1}', "json")


# -- patterns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "key", "expected"),
    [
        ("server.port", "server.port", True),
        ("port", "reports", False),
        ("port", "server.port", False),
        ("key", "max_keys", False),
        ("features.*", "features.beta", True),
        ("features.*", "features.beta.level", False),
        ("features.*", "features[0]", False),
        ("features.*", "features", False),
        ("upstreams[*].weight", "upstreams[3].weight", True),
        ("upstreams[*].weight", "upstreams.a.weight", False),
        ("upstreams[*]", "upstreams[0]", True),
        ("upstreams[1].verify_tls", "upstreams[1].verify_tls", True),
        ("upstreams[1].verify_tls", "upstreams[0].verify_tls", False),
        ("**.port", "port", True),
        ("**.port", "a[0].b.port", True),
        ("**.port", "a.port.x", False),
        ("a.**", "a", True),
        ("a.**", "a[2].b", True),
        ("a.**", "ab", False),
        ("a.**.z", "a.z", True),
        ("a.**.z", "a.b.c.z", True),
        ("**", "anything[0].at.all", True),
        ("*", "x", True),
        ("*", "x.y", False),
        ('"a.b"', '"a.b"', True),
        ('"a.b"', "a.b", False),
        ('"a"', "a", True),
        ('"*"', '"*"', True),
        ('"*"', "x", False),
        ("[0].n", "[0].n", True),
        ("Server.Port", "server.port", False),
    ],
)
def test_key_matches(pattern: str, key: str, expected: bool) -> None:
    assert key_matches(pattern, key) is expected


@pytest.mark.parametrize("pattern", ["log_*", "a..b", ".a", "a.", "a.[0]", "a[x]", "a b", "a[0]b"])
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="key p"):
        check_key_pattern(pattern)
    assert check_key_pattern("a[*].**.b") == "a[*].**.b"


# -- typed equality and changes ------------------------------------------------------


def test_typed_equal_decisions() -> None:
    assert not typed_equal(True, 1)
    assert not typed_equal(1, 1.0)
    assert not typed_equal("1", 1)
    assert not typed_equal(None, False)
    assert not typed_equal([1], [True])
    assert not typed_equal({"a": 1}, {"a": 1.0})
    assert typed_equal({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]})
    assert typed_equal(float("nan"), float("nan"))
    assert not typed_equal(MISSING, None)
    assert typed_equal(MISSING, MISSING)


_CLOSE_SCALARS = st.one_of(
    st.sampled_from([0, 1, 2, True, False, 0.0, -0.0, 1.0, math.inf, "", "1", "a", None, MISSING]),
    st.builds(lambda: float("nan")),  # a new NaN object each time: equal, never identical
)
_CLOSE_KEYS = st.sampled_from(["a", "b", 1, True, 1.0, 0, False])
_CLOSE_VALUES = st.recursive(
    _CLOSE_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_CLOSE_KEYS, inner, max_size=3),
    ),
    max_leaves=8,
)


@given(st.lists(_CLOSE_VALUES, min_size=2, max_size=8))
def test_typed_key_is_equal_exactly_when_typed_equal_holds(values: list[Any]) -> None:
    """Values from a small domain (so equal pairs are common: 1 and True and 1.0, lists and
    tuples, NaNs, -0.0, reordered keys): keys agree with typed_equal on every pair."""
    keys = [typed_key(v) for v in values]
    assert None not in keys
    for a, key_a in zip(values, keys, strict=True):
        for b, key_b in zip(values, keys, strict=True):
            assert (key_a == key_b) == typed_equal(a, b), (a, b)


@given(st.lists(_CLOSE_VALUES, max_size=12), st.lists(_CLOSE_VALUES, max_size=12))
def test_list_diff_by_keys_matches_the_scan(old: list[Any], new: list[Any]) -> None:
    """The config rules' list alignment by typed key gives what comparing every pair gave."""
    from vsh_ai.rules._key_patterns import _list_diff_by_scan, list_diff

    assert list_diff(old, new) == _list_diff_by_scan(old, new)
    assert list_diff(old, old + new) == _list_diff_by_scan(old, old + new)
    assert list_diff(old + new, new) == _list_diff_by_scan(old + new, new)


@given(st.lists(_CLOSE_VALUES, max_size=12), st.lists(_CLOSE_VALUES, max_size=12))
def test_typed_set_answers_as_typed_equal_does(values: list[Any], asked: list[Any]) -> None:
    present = TypedSet(values)
    for value in asked + values:
        assert (value in present) == any(typed_equal(value, v) for v in values)


def test_typed_key_declines_what_it_cannot_stand_in_for() -> None:
    unhashable = {"a": bytearray(b"x")}
    assert typed_key(unhashable) is None
    assert unhashable in TypedSet([1, {"a": bytearray(b"x")}])  # compared one by one
    assert {"a": bytearray(b"y")} not in TypedSet([unhashable])
    assert typed_key({"a": 1, "b": [2]}) == typed_key({"b": (2,), "a": 1})


def test_config_changes_typed() -> None:
    before = parse_config(b'{"debug": true, "workers": 4, "t": 1, "name": "x", "gone": 1}', "json")
    after = parse_config(b'{"debug": 1, "workers": 4, "t": 1.0, "name": "x", "new": {}}', "json")
    assert config_changes(before, after) == (
        KeyChange("debug", True, 1),
        KeyChange("t", 1, 1.0),
        KeyChange("gone", 1, MISSING),
        KeyChange("new", MISSING, {}),
    )
    assert config_changes(MISSING, after)[0] == KeyChange("debug", MISSING, 1)
    assert config_changes(before, before) == ()


def test_an_empty_table_filled_or_emptied_is_its_keys() -> None:
    empty = parse_config(b"[coordinator]\n# limit = 0\n[http]\nport = 1\n", "toml")
    filled = parse_config(b"[coordinator]\nlimit = 32\n[http]\nport = 1\n", "toml")
    assert config_changes(empty, filled) == (KeyChange("coordinator.limit", MISSING, 32),)
    assert config_changes(filled, empty) == (KeyChange("coordinator.limit", 32, MISSING),)
    gone = parse_config(b"[http]\nport = 1\n", "toml")
    assert config_changes(empty, gone) == (KeyChange("coordinator", {}, MISSING),)
    listed = parse_config(b'{"a": []}', "json")
    assert config_changes(listed, parse_config(b'{"a": [1]}', "json")) == (
        KeyChange("a", [], MISSING),
        KeyChange("a[0]", MISSING, 1),
    )  # an empty list gaining items stays a change of the list


def test_reordering_keys_is_not_a_change_but_reordering_a_list_is() -> None:
    a = parse_config(b"x: 1\ny: [1, 2]\n", "yaml")
    b = parse_config(b"y: [1, 2]\nx: 1\n", "yaml")
    c = parse_config(b"x: 1\ny: [2, 1]\n", "yaml")
    assert config_changes(a, b) == ()
    assert [k.key for k in config_changes(a, c)] == ["y[0]", "y[1]"]


_SCALARS = st.one_of(
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.none(),
)
_TREES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(alphabet='ab.[]" *1', max_size=4), inner, max_size=4),
    ),
    max_leaves=20,
)


@given(_TREES)
def test_typed_equal_is_reflexive(value: Any) -> None:
    assert typed_equal(value, value)
    assert typed_equal(value, json.loads(json.dumps(value)) if _no_nan(value) else value)


@given(st.integers(min_value=-5, max_value=5))
def test_typed_equal_distinguishes_types_of_the_same_value(n: int) -> None:
    spellings: list[Any] = [n, float(n), str(n), [n], {"v": n}]
    if n in (0, 1):
        spellings.append(bool(n))
    for i, a in enumerate(spellings):
        for j, b in enumerate(spellings):
            assert typed_equal(a, b) is (i == j)


@given(_TREES)
def test_every_flat_key_is_matched_by_itself_only(tree: Any) -> None:
    flat = flatten(tree)
    for pattern in flat:
        assert [key for key in flat if key_matches(pattern, key)] == [pattern]


@given(_TREES)
def test_flatten_round_trips_through_json(tree: Any) -> None:
    if not _no_nan(tree):
        return
    data = json.dumps(tree).encode()
    assert config_changes(parse_config(data, "json"), tree) == ()


def _no_nan(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isnan(value) and not math.isinf(value)
    if isinstance(value, list):
        return all(_no_nan(v) for v in value)
    if isinstance(value, dict):
        return all(_no_nan(v) for v in value.values())
    return True


def _re(text: str) -> str:
    import re

    return re.escape(text)


# -- lookup and edge shapes ----------------------------------------------------------


def test_lookup_is_consistent_with_flatten_in_flat_formats() -> None:
    props = parse_config(b"server.port=1\nserver.host=h\nhosts[0]=a\nhosts[1]=b\n", "properties")
    assert lookup(props, "server") == {"port": "1", "host": "h"}
    assert lookup(props, "hosts") == ["a", "b"]
    assert lookup(props, "hosts[1]") == "b"
    assert lookup(props, "nope") is MISSING
    clash = parse_config(b"logging.level=INFO\nlogging.level.root=DEBUG\n", "properties")
    assert lookup(clash, "logging.level") == "INFO"
    with pytest.raises(ConfigSyntaxError, match="both a value and a table"):
        lookup(clash, "logging")
    yaml_tree = parse_config(b"a: {b: [1, {c: 2}], e: {}}\n1: x\n", "yaml")
    assert lookup(yaml_tree, "a.b[1]") == {"c": 2}
    assert lookup(yaml_tree, '"1"') == "x"
    assert lookup(yaml_tree, '"a".e') == {}


def test_flat_format_keys_starting_with_an_index_join_canonically() -> None:
    assert flatten(parse_config(b"[0].name=x\n", "properties")) == {"[0].name": "x"}
    ini = parse_config(b"[servers]\n[0].host = a\n", "ini")  # configparser: a section
    assert all(check_key_pattern(key) == key for key in flatten(ini))


def test_deep_nesting_is_refused_not_a_crash() -> None:
    deep: Any = 1
    for _ in range(1000):
        deep = {"k": deep}
    with pytest.raises(ConfigSyntaxError, match="nests deeper"):
        flatten(deep)
    with pytest.raises(ConfigSyntaxError):
        flatten(parse_config(b"[" * 5000 + b"]" * 5000, "json"))


@given(_TREES)
def test_lookup_agrees_with_flatten(tree: Any) -> None:
    flat = flatten(tree)
    for key, value in flat.items():
        assert typed_equal(lookup(tree, key), value)
    if flat:
        assert typed_equal(lookup(tree, ""), tree)


def test_yaml_boolean_spelled_keys_stay_names(yaml_loader: Any) -> None:
    workflow = b"on:\n  push:\n    branches: [main]\nenabled: yes\nOff: 1\n"
    assert flatten(parse_config(workflow, "yaml")) == {
        "on.push.branches[0]": "main",
        "enabled": True,
        "Off": 1,
    }
    with pytest.raises(ConfigSyntaxError, match="duplicate key 'on'"):
        parse_config(b"on: 1\n'on': 2\n", "yaml")


def test_non_string_keys_keep_their_own_spelling() -> None:
    # bool/int/float keys are equal in Python (1 == True == 1.0): no shared memo between them
    assert flatten({1: "a"}) == {"1": "a"}
    assert flatten({True: "b"}) == {"true": "b"}
    assert flatten({1.0: "c"}) == {'"1.0"': "c"}
    assert flatten({None: "d", "x": {False: 0}}) == {"null": "d", "x.false": 0}


@pytest.mark.parametrize("fmt", ["toml", "json", "yaml", "ini", "env", "properties"])
@given(data=st.binary(max_size=64) | st.text(alphabet="ab=:[]{}\"'#!\\\n -<*&.,0", max_size=64))
def test_garbage_is_refused_or_read_never_a_crash(fmt: Any, data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    try:
        tree = parse_config(raw, fmt)
        flat = flatten(tree)
    except ConfigSyntaxError:
        return
    assert all(check_key_pattern(key) == key for key in flat)
    assert config_changes(tree, tree) == ()


@given(
    st.lists(
        st.sampled_from(["[", "]", "{", "}", "a: ", "b", "- ", "\n", "  ", ", ", "[a: ", "1"]),
        max_size=80,
    )
)
def test_yaml_size_check_is_skipped_only_when_it_cannot_fail(parts: list[str]) -> None:
    """Issue 18: texts without aliases, short and with few brackets skip the size check;
    composing any such text never gives a tree the check would refuse."""
    import yaml

    text = "x: " + "".join(parts)
    if not _config_yaml._cannot_explode(text):
        return
    loader = _config_yaml._Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                _config_yaml._check_size(node)  # raises if the skip were wrong
    except yaml.YAMLError:
        pass  # not YAML: parse_config refuses it anyway
    finally:
        loader.dispose()


def _outcome(text: str, *, direct: bool) -> str:
    try:
        return repr(_config_yaml.parse_yaml(text, direct=direct))
    except Exception as error:  # the same failure, in the same words
        return f"{type(error).__name__}: {error}"


@given(pieces=st.lists(_YAML_PIECES, max_size=30))
def test_yaml_direct_construction_is_the_loaders(pieces: list[str]) -> None:
    """Issue 18: alias-free documents are built without the loader's generator machinery;
    value, key order, types and every error stay the loader's own."""
    text = "".join(pieces)
    assert _outcome(text, direct=True) == _outcome(text, direct=False)


@given(
    st.one_of(
        st.from_regex(r"[0-9][0-9_:.eE+-]{0,10}|[0-9]{1,30}", fullmatch=True),
        st.text(max_size=8),
        st.sampled_from(["", "~", "null", "yes", "On", "n", "=", "<<", ".inf", "-1", "+0x1F"]),
    )
)
def test_yaml_scalars_resolve_as_pyyaml_does(value: str) -> None:
    """Issue 18: plain decimal digits are tagged int, and quoted scalars and plain ones whose
    first character starts no implicit resolver str, without PyYAML's regexes; every other
    spelling (leading zeros, octal, underscores, sexagesimal, floats, booleans, nulls)
    resolves as PyYAML's safe loader resolves it."""
    import yaml

    ours, theirs = _config_yaml._Loader("x"), yaml.SafeLoader("x")
    try:
        for implicit in ((True, False), (False, True)):
            assert ours.resolve(yaml.ScalarNode, value, implicit) == theirs.resolve(
                yaml.ScalarNode, value, implicit
            )
    finally:
        ours.dispose()
        theirs.dispose()


def test_yaml_long_documents_without_aliases_are_built_directly_alike() -> None:
    """Issue 18: a document too long to skip the size check, but without an alias, is
    still built directly (a matrix of 80,000 values took over a second the loader's way);
    its value is the loader's, and the size limit still holds."""
    import yaml

    values = ["1", "0", "0123", "089", "1_000", "1:30", "1.5", "yes", "~", "2024-01-02", "'7'"]
    items = ", ".join(values[i % len(values)] if i % 2 else str(i) for i in range(6000))
    text = f"jobs:\n  t:\n    strategy:\n      matrix:\n        k: [{items}]\n"
    assert not _config_yaml._cannot_explode(text)
    assert _outcome(text, direct=True) == _outcome(text, direct=False)
    assert typed_equal(_config_yaml.parse_yaml(text), yaml.load(text, Loader=yaml.SafeLoader))
    huge = "k: [" + ", ".join("1" for _ in range(100_001)) + "]\n"
    with pytest.raises(ConfigSyntaxError, match="more than 100000 nodes"):
        _config_yaml.parse_yaml(huge)


@given(
    st.lists(
        st.sampled_from(["[", "]", "{", "}", "a: ", "b", "- ", "\n", "  ", ", ", "[a: ", "1"]),
        max_size=400,
    )
)
def test_yaml_one_pass_size_check_agrees_with_the_full_one(parts: list[str]) -> None:
    """Issue 18: alias-free documents are measured in one pass; it passes exactly the
    documents the full check passes (the full check then words any refusal)."""
    import yaml

    text = "x: " + "".join(parts)
    loader = _config_yaml._Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            try:
                _config_yaml._check_size(node)
                passes = True
            except ConfigSyntaxError:
                passes = False
            assert _config_yaml._within_size(node) == passes
    except yaml.YAMLError:
        pass  # not YAML: parse_config refuses it anyway
    finally:
        loader.dispose()


@pytest.mark.parametrize(("depth", "refused"), [(100, False), (101, True)])
def test_yaml_flow_nesting_limit_holds_on_the_direct_path(depth: int, refused: bool) -> None:
    text = "k: " + "[" * depth + "]" * depth + "\n" + "# padding\n" * 3000
    if refused:
        with pytest.raises(ConfigSyntaxError, match="nest deeper than 100 levels"):
            _config_yaml.parse_yaml(text)
    else:
        assert _config_yaml.parse_yaml(text) is not None


def test_yaml_direct_construction_keeps_yaml_rules() -> None:
    cases = [
        "on:\n  push:\n  pull_request:\njobs:\n  a: {x: 1, y: [1, 2.5, true, ~, 2024-01-02]}\n",
        "base: &b {x: 1}\nm:\n  <<: {x: 2, z: 3}\n  x: 1\n",
        "a: 1\na: 2\n",  # duplicate: refused in the loader's words
        "a: !!binary aGk=\n",  # a tag the direct path leaves to the loader
        "? [1, 2]\n: x\n",  # an unhashable key
        "a: 0x1F\nb: 1_000\nc: 1:30\nd: yes\n",
    ]
    for text in cases:
        assert _outcome(text, direct=True) == _outcome(text, direct=False), text


@pytest.mark.parametrize("text", ['A="a\\$b"\n', "A='a\\\\b'\n", 'A="\\`x"\n'])
def test_env_files_python_dotenv_reads_differently_are_refused(text: str) -> None:
    """Issue 19: applications load .env with python-dotenv; a value it reads differently
    from this parser (an escape in quotes) could hide a change, so the file is refused."""
    with pytest.raises(ConfigSyntaxError, match="python-dotenv reads 'A' differently"):
        parse_config(text.encode(), "env")


def test_env_files_both_parsers_agree_on_are_read() -> None:
    text = 'export A=1\nB="x\\ny"\nC=\'lit\'\nD=plain # comment\nE="multi\nline"\nF=\n'
    assert flatten(parse_config(text.encode(), "env")) == {
        "A": "1",
        "B": "x\ny",
        "C": "lit",
        "D": "plain",
        "E": "multi\nline",
        "F": "",
    }


_OLD_TOKEN = re.compile(
    r"""\s+|#[^\n]*|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[{};]|[^\s{};#"']+|["']"""
)


def _old_tokens(text: str) -> list[tuple[str, int]] | str:
    """The directive tokenizer before issue 18's change: a match per whitespace run."""
    out: list[tuple[str, int]] = []
    line = 1
    for match in _OLD_TOKEN.finditer(text):
        token = match[0]
        if token in ('"', "'"):
            return f"unterminated {token} quote (line {line})"
        if not token[0].isspace() and token[0] != "#":
            out.append((token, line))
        line += token.count("\n")
    return out


@given(
    st.lists(
        st.sampled_from(
            ["a", "b 1", ";", "{", "}", "\n", " ", "\t", "# c\n", '"q;{"', "'x'", '"', "\\"]
        ),
        max_size=40,
    )
)
def test_directive_tokens_are_the_old_tokenizers(parts: list[str]) -> None:
    """Issue 18: whitespace is stepped over by the search, lines are counted only for an
    error; tokens, their lines and every error are what the old tokenizer gave."""
    from vsh_ai.analysis import _config_directives as directives

    text = "".join(parts)
    expected = _old_tokens(text)
    if isinstance(expected, str):
        with pytest.raises(ConfigSyntaxError, match=re.escape(expected)):
            directives._tokens(text)
        return
    tokens = directives._tokens(text)
    assert [(t, directives._line(text, offset)) for t, offset in tokens] == expected


def test_ini_files_and_yaml_streams_of_too_many_parts_are_not_analysed() -> None:
    """Issue 18 (a red team's shapes): 490 KB of empty INI sections, or of one-line YAML
    documents, took about a second to compare; past a bound they are unparsable."""
    from vsh_ai.analysis._config_formats import MAX_INI_SECTIONS

    ini = "".join(f"[s{i}]\nk = v\n" for i in range(MAX_INI_SECTIONS))
    assert len(parse_config(ini.encode(), "ini")) == MAX_INI_SECTIONS
    for spacing in ("  ", "\t", "\x0c", "\r", "\u2003"):  # configparser strips them all
        assert parse_config(f"[a]\n{spacing}[b]\n".encode(), "ini").keys() == {"a", "b"}
        with pytest.raises(ConfigSyntaxError, match="section headers, more than the 2000"):
            parse_config((ini + f"{spacing}[one more]\n").encode(), "ini")
    limit = _config_yaml._MAX_YAML_DOCUMENTS
    stream = "---\na: 1\n" * limit
    assert len(parse_config(stream.encode(), "yaml")) == limit
    with pytest.raises(ConfigSyntaxError, match=f"more than {limit} documents"):
        parse_config((stream + "---\nb: 2\n").encode(), "yaml")
