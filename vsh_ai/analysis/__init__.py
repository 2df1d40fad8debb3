"""What a change means, shared by rules, redaction and the LLM evidence packet.

Detectors and parsers live here; the rules that decide with them live in
:mod:`vsh_ai.rules`, and :mod:`vsh_ai.llm` uses the same functions to decide what a model
may see. One analysis, many consumers: the secret a rule sees is the secret redaction
hides, and the key a config rule parses is the key the packet shows.

- secrets: :func:`find_secrets`, :func:`redact_text` (detect-secrets plugins + RE2 + decoders)
- paths: :func:`matching` and the root-anchored :data:`GLOB_DIALECT` (wcmatch)
- net effects: :func:`net_changes` (renames, copies, destructive edits)
- config: :func:`parse_config`, :func:`config_changes` (TOML, JSON, YAML, INI, .env, .properties)
- dependencies: :func:`parse_dependency_file`, :func:`compare_manifests` (packaging, node-semver)
- Python: :func:`code_changes` (facts from ``ast``)
- provenance: :func:`unshared_paths` (bytes that were ever at an unshared path stay unshared)
- GitHub Actions: :mod:`._workflows` (triggers, jobs, steps, action references, the checks a
  change removes or neuters) and :mod:`._workflows_exec` (downloads run in a later step)
- once per evidence: :func:`._memo.analysis_of` (text, lines, added lines, net changes,
  secret reads, manifests; secret findings are remembered by content digest, so every
  rule, the read rule, redaction and the packet share one scan, across copies too)
- line pairing: :func:`._diff.line_opcodes` (difflib's pairing where cheap, bounded time
  on any input); many glob sets in one matcher: :class:`._globs.GlobTable`
"""

from ._changes import NetChange, NetKind, destructive_edit, net_changes
from ._config import (
    ConfigFormat,
    ConfigSyntaxError,
    KeyChange,
    config_changes,
    detect_format,
    flatten,
    key_matches,
    parse_config,
    typed_equal,
)
from ._deps import (
    Dependency,
    DependencyChange,
    Manifest,
    ManifestDiff,
    compare_manifests,
    parse_dependency_file,
)
from ._globs import GLOB_DIALECT, check_globs, fold, glob_matches, matching
from ._provenance import content_sources, derived_paths, unshared_paths
from ._python import CodeFact, code_changes, is_tooling_code
from ._secrets import (
    SecretFinding,
    contains_secret,
    find_secret,
    find_secrets,
    is_placeholder,
    redact_text,
)

__all__ = (
    "GLOB_DIALECT",
    "CodeFact",
    "ConfigFormat",
    "ConfigSyntaxError",
    "Dependency",
    "DependencyChange",
    "KeyChange",
    "Manifest",
    "ManifestDiff",
    "NetChange",
    "NetKind",
    "SecretFinding",
    "check_globs",
    "code_changes",
    "compare_manifests",
    "config_changes",
    "contains_secret",
    "content_sources",
    "derived_paths",
    "destructive_edit",
    "detect_format",
    "find_secret",
    "find_secrets",
    "flatten",
    "fold",
    "glob_matches",
    "is_placeholder",
    "is_tooling_code",
    "key_matches",
    "matching",
    "net_changes",
    "parse_config",
    "parse_dependency_file",
    "redact_text",
    "typed_equal",
    "unshared_paths",
)
