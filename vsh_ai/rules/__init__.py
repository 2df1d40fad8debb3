"""Deterministic evidence rules and ``RuleSet``, the judge made of them.

Every rule is a frozen pydantic model tagged by ``type`` (so judge files validate
against :data:`AnyRule`). Allowances (:class:`AllowPaths`, :class:`AllowConfig`, ...)
claim the changes they prove allowed; every other rule is a denial with
``check(evidence) -> Verdict | None``. A :class:`RuleSet` approves only when every
change is claimed and no denial fires.
"""

from ._allow import AllowAddedLines, AllowConfig, AllowPaths, KeyConstraint
from ._any import AnyRule
from ._base import Action, Allowance, Claim, OnUnproven, Rule, RuleSet
from ._code import AllowPythonDocs, PythonRisks
from ._completeness import Completeness
from ._config import ConfigInvariants, ConfigSyntaxError, parse_config
from ._config_values import ConfigValues
from ._content import ExactContent, ForbiddenPatterns
from ._deps import AllowDependencyUpdates, DependencyRisks
from ._glob import glob_matches
from ._ignores import IgnoreReincludes
from ._intent import IntentScope
from ._kinds import ChangeKind, ChangeKinds, NoExecutableChanges, NoSymlinkChanges
from ._limits import Limits
from ._notices import DeletionNotices
from ._paths import DeniedChanges, NoRefusedAccess, ProtectedReads
from ._proofs import (
    AllowLocalRefactors,
    AllowPythonAnnotations,
    AllowTestAdditions,
    AllowVersionBump,
)
from ._remediation import AllowSecretRemoval
from ._renames import AllowModuleRenames
from ._scripts import ScriptDownloads
from ._secret_tests import AllowPlaceholderTests
from ._secrets import NoSecrets, find_secret
from ._tests import KeepTestsCollected
from ._workflows import WorkflowRisks
from ._workflows_allow import AllowWorkflowEdits

__all__ = (
    "Action",
    "AllowAddedLines",
    "AllowConfig",
    "AllowDependencyUpdates",
    "AllowLocalRefactors",
    "AllowModuleRenames",
    "AllowPaths",
    "AllowPlaceholderTests",
    "AllowPythonAnnotations",
    "AllowPythonDocs",
    "AllowSecretRemoval",
    "AllowTestAdditions",
    "AllowVersionBump",
    "AllowWorkflowEdits",
    "Allowance",
    "AnyRule",
    "ChangeKind",
    "ChangeKinds",
    "Claim",
    "Completeness",
    "ConfigInvariants",
    "ConfigSyntaxError",
    "ConfigValues",
    "DeletionNotices",
    "DeniedChanges",
    "DependencyRisks",
    "ExactContent",
    "ForbiddenPatterns",
    "IgnoreReincludes",
    "IntentScope",
    "KeepTestsCollected",
    "KeyConstraint",
    "Limits",
    "NoExecutableChanges",
    "NoRefusedAccess",
    "NoSecrets",
    "NoSymlinkChanges",
    "OnUnproven",
    "ProtectedReads",
    "PythonRisks",
    "Rule",
    "RuleSet",
    "ScriptDownloads",
    "WorkflowRisks",
    "find_secret",
    "glob_matches",
    "parse_config",
)
