"""The tagged union of every built-in rule (what judge files validate against)."""

from typing import Annotated, Union

from pydantic import Field

from ._completeness import Completeness
from ._config import ConfigInvariants
from ._content import ExactContent, ForbiddenPatterns
from ._deps import DependencyVersionsOnly
from ._kinds import ChangeKinds, NoExecutableChanges, NoSymlinkChanges
from ._limits import Limits
from ._paths import AllowedChanges, DeniedChanges, NoRefusedAccess, ProtectedReads
from ._secrets import NoSecrets

# typing.Union (not |) so the alias reports typing as its module.
AnyRule = Annotated[
    Union[  # noqa: UP007
        Completeness,
        AllowedChanges,
        DeniedChanges,
        ProtectedReads,
        NoRefusedAccess,
        ChangeKinds,
        NoExecutableChanges,
        NoSymlinkChanges,
        Limits,
        ExactContent,
        ForbiddenPatterns,
        NoSecrets,
        ConfigInvariants,
        DependencyVersionsOnly,
    ],
    Field(discriminator="type"),
]
"""Any built-in rule, selected by its ``type`` tag."""

__all__ = ("AnyRule",)
