"""Deterministic evidence rules and ``RuleSet``, the judge made of them.

Every rule is a frozen pydantic model tagged by ``type`` (so judge files validate
against :data:`AnyRule`) with ``check(evidence) -> Verdict | None``.
"""

from ._any import AnyRule
from ._base import Action, OnPass, Rule, RuleSet
from ._completeness import Completeness
from ._config import ConfigInvariants, ConfigSyntaxError, parse_config
from ._content import ExactContent, ForbiddenPatterns
from ._deps import DependencyVersionsOnly
from ._glob import glob_matches
from ._kinds import ChangeKind, ChangeKinds, NoExecutableChanges, NoSymlinkChanges
from ._limits import Limits
from ._paths import AllowedChanges, DeniedChanges, NoRefusedAccess, ProtectedReads
from ._secrets import NoSecrets, find_secret

__all__ = (
    "Action",
    "AllowedChanges",
    "AnyRule",
    "ChangeKind",
    "ChangeKinds",
    "Completeness",
    "ConfigInvariants",
    "ConfigSyntaxError",
    "DeniedChanges",
    "DependencyVersionsOnly",
    "ExactContent",
    "ForbiddenPatterns",
    "Limits",
    "NoExecutableChanges",
    "NoRefusedAccess",
    "NoSecrets",
    "NoSymlinkChanges",
    "OnPass",
    "ProtectedReads",
    "Rule",
    "RuleSet",
    "find_secret",
    "glob_matches",
    "parse_config",
)
