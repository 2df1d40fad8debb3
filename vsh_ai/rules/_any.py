"""The tagged union of every built-in rule (what judge files validate against)."""

from typing import Annotated, Union

from pydantic import Field

from ._allow import AllowAddedLines, AllowConfig, AllowPaths
from ._code import AllowPythonDocs, PythonRisks
from ._completeness import Completeness
from ._config import ConfigInvariants
from ._config_values import ConfigValues
from ._content import ExactContent, ForbiddenPatterns
from ._deps import AllowDependencyUpdates, DependencyRisks
from ._ignores import IgnoreReincludes
from ._intent import IntentScope
from ._kinds import ChangeKinds, NoExecutableChanges, NoSymlinkChanges
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
from ._secrets import NoSecrets
from ._tests import KeepTestsCollected
from ._workflows import WorkflowRisks
from ._workflows_allow import AllowWorkflowEdits

# typing.Union (not |) so the alias reports typing as its module.
AnyRule = Annotated[
    Union[  # noqa: UP007
        Completeness,
        AllowPaths,
        AllowConfig,
        AllowAddedLines,
        DeniedChanges,
        ProtectedReads,
        NoRefusedAccess,
        ChangeKinds,
        NoExecutableChanges,
        NoSymlinkChanges,
        Limits,
        DeletionNotices,
        ExactContent,
        ForbiddenPatterns,
        NoSecrets,
        ConfigInvariants,
        ConfigValues,
        AllowDependencyUpdates,
        DependencyRisks,
        AllowPythonDocs,
        PythonRisks,
        AllowSecretRemoval,
        IgnoreReincludes,
        AllowPythonAnnotations,
        AllowTestAdditions,
        AllowVersionBump,
        AllowLocalRefactors,
        AllowModuleRenames,
        KeepTestsCollected,
        IntentScope,
        AllowWorkflowEdits,
        WorkflowRisks,
        AllowPlaceholderTests,
        ScriptDownloads,
    ],
    Field(discriminator="type"),
]
"""Any built-in rule, selected by its ``type`` tag."""

__all__ = ("AnyRule",)
