"""The tool functions a model sees; each runs one VSH transaction via ``run_program``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import pydantic_core
import vsh
from pydantic_ai import ModelRetry, Tool
from pydantic_ai.toolsets import FunctionToolset

from ._result import VshResult

if TYPE_CHECKING:
    from pydantic_ai._function_schema import FunctionSchema  # what Tool.function_schema holds

__all__ = ("FileTools", "RunProgram", "add_file_tools")

RunProgram = Callable[..., Awaitable[VshResult]]
"""``run(code, intent, language=vsh.Language.MONTY, *, tool="vsh_run") -> VshResult``."""


def guest_path(path: str) -> str:
    """Accept ``app.toml`` or ``/workspace/app.toml``; always hand VSH the guest path."""
    return path if path.startswith("/") else "/workspace/" + path.removeprefix("./")


class FileTools:
    """The tool functions, each one VSH transaction through ``run``; arguments reach guest
    code only through ``repr()`` literals."""

    def __init__(self, run: RunProgram, *, bash_enabled: bool) -> None:
        self.run_program = run
        self.bash_enabled = bash_enabled

    async def vsh_run(
        self, code: str, intent: str, language: Literal["monty", "bash"] = "monty"
    ) -> VshResult:
        """Run a program as ONE atomic transaction against the workspace at /workspace.

        Use it for multi-step work (read, decide, edit) that must succeed or fail as a
        whole. Monty code is Python: call vsh_read, vsh_write, vsh_patch, vsh_list,
        vsh_glob, vsh_search, vsh_mkdir, vsh_remove, vsh_move, vsh_copy with /workspace
        paths; the last expression is returned as `result`, print() goes to stdout.

        Args:
            code: The program source.
            intent: One sentence saying what the program changes and why.
            language: "monty" (Python subset); "bash" only when the host enabled it.
        """
        if language == "bash":
            if not self.bash_enabled:
                raise ModelRetry(
                    "Bash is not enabled for this workspace: use language='monty' "
                    "(Python with vsh_* functions)."
                )
            return await self.run_program(code, intent, vsh.Language.BASH)
        return await self.run_program(code, intent)

    async def vsh_read(self, path: str) -> VshResult:
        """Read one UTF-8 text file; its contents come back as `result`.

        Args:
            path: File path, e.g. /workspace/app.toml.
        """
        return await self._helper("vsh_read", f"vsh_read({guest_path(path)!r})", f"read {path}")

    async def vsh_write(self, path: str, content: str, append: bool = False) -> VshResult:
        """Create or overwrite a text file with `content` (whole file), or append to it.

        Prefer vsh_patch for small edits to an existing file.

        Args:
            path: File path, e.g. /workspace/notes.md.
            content: The complete new text (or the text to append).
            append: Append instead of replacing the file.
        """
        code = f"vsh_write({guest_path(path)!r}, {content!r}, append={append!r})"
        return await self._helper("vsh_write", code, f"{'append to' if append else 'write'} {path}")

    async def vsh_patch(self, path: str, old: str, new: str, count: int = 1) -> VshResult:
        """Replace exact text `old` with `new` in one file (fails if `old` is not found).

        Args:
            path: File path, e.g. /workspace/app.toml.
            old: Exact existing text, including whitespace; make it unique.
            new: Replacement text.
            count: How many occurrences to replace.
        """
        code = f"vsh_patch({guest_path(path)!r}, {old!r}, {new!r}, count={count!r})"
        return await self._helper("vsh_patch", code, f"replace text in {path}")

    async def vsh_list(self, path: str = "/workspace") -> VshResult:
        """List the entries of one directory.

        Args:
            path: Directory path, e.g. /workspace/src.
        """
        return await self._helper("vsh_list", f"vsh_list({guest_path(path)!r})", f"list {path}")

    async def vsh_glob(self, pattern: str, path: str = "/workspace") -> VshResult:
        """Find paths matching a glob pattern such as **/*.py under `path`.

        Args:
            pattern: Glob pattern relative to `path`.
            path: Directory to search from.
        """
        code = f"vsh_glob({pattern!r}, path={guest_path(path)!r})"
        return await self._helper("vsh_glob", code, f"glob {pattern} under {path}")

    async def vsh_search(
        self, query: str, path: str = "/workspace", case_sensitive: bool = True
    ) -> VshResult:
        """Search file contents for literal text; returns matching files and lines.

        Args:
            query: Literal text to find.
            path: File or directory to search.
            case_sensitive: Match case exactly.
        """
        code = (
            f"vsh_search({query!r}, path={guest_path(path)!r}, case_sensitive={case_sensitive!r})"
        )
        return await self._helper("vsh_search", code, f"search text under {path}")

    async def vsh_mkdir(self, path: str) -> VshResult:
        """Create a directory (and missing parents).

        Args:
            path: Directory path, e.g. /workspace/docs.
        """
        code = f"vsh_mkdir({guest_path(path)!r}, parents=True, exist_ok=True)"
        return await self._helper("vsh_mkdir", code, f"create directory {path}")

    async def vsh_remove(self, path: str, recursive: bool = False) -> VshResult:
        """Delete a file, or a directory tree with recursive=True (usually needs approval).

        Args:
            path: Path to delete.
            recursive: Delete a directory and everything in it.
        """
        code = f"vsh_remove({guest_path(path)!r}, recursive={recursive!r})"
        return await self._helper("vsh_remove", code, f"remove {path}")

    async def vsh_move(self, source: str, destination: str) -> VshResult:
        """Move or rename a file or directory.

        Args:
            source: Existing path.
            destination: New path.
        """
        code = f"vsh_move({guest_path(source)!r}, {guest_path(destination)!r})"
        return await self._helper("vsh_move", code, f"move {source} to {destination}")

    async def vsh_copy(
        self, source: str, destination: str, recursive: bool = False, overwrite: bool = False
    ) -> VshResult:
        """Copy a file, or a directory tree with recursive=True.

        Args:
            source: Existing path.
            destination: Target path.
            recursive: Copy a directory tree.
            overwrite: Replace an existing destination.
        """
        code = (
            f"vsh_copy({guest_path(source)!r}, {guest_path(destination)!r}, "
            f"recursive={recursive!r}, overwrite={overwrite!r})"
        )
        return await self._helper("vsh_copy", code, f"copy {source} to {destination}")

    async def _helper(self, tool: str, code: str, intent: str) -> VshResult:
        return await self.run_program(code, intent, tool=tool)


# Each tool's schema (its argument validator and JSON schema) by tools class, tool name
# and the toolset's schema settings. Pydantic AI builds both from the signature and the
# docstring for every Tool: most of the cost of opening a toolset (91 ms to open one
# before, 9 ms after, benchmarks/toolset_overhead.py), paid by every VshToolset made (a
# service may make one per request). They depend on the class's methods only: one per
# process, copied into each toolset.
_SCHEMAS: dict[tuple[type, str, type, str, bool], FunctionSchema] = {}


def add_file_tools(toolset: FunctionToolset[Any], files: FileTools, names: Sequence[str]) -> None:
    """Add ``files``' methods ``names`` to ``toolset`` as its tools (``add_function``'s
    result, with each schema generated once per process and copied for this toolset)."""
    for name in names:
        method = getattr(files, name)
        key = (
            type(files),
            name,
            toolset.schema_generator,
            toolset.docstring_format,
            toolset.require_parameter_descriptions,
        )
        known = _SCHEMAS.get(key)
        tool = Tool[Any](
            method,
            takes_ctx=False,
            name=name,
            docstring_format=toolset.docstring_format,
            require_parameter_descriptions=toolset.require_parameter_descriptions,
            schema_generator=toolset.schema_generator,
            strict=toolset.strict,
            sequential=toolset.sequential,
            requires_approval=toolset.requires_approval,
            include_return_schema=toolset.include_return_schema,
            function_schema=None if known is None else _copied(known, method),
        )
        if known is None:  # kept without the method (it would pin this toolset)
            _SCHEMAS[key] = _copied(tool.function_schema, getattr(type(files), name))
        toolset.add_tool(tool)


def _copied(schema: FunctionSchema, function: Callable[..., Any]) -> FunctionSchema:
    """``schema`` calling ``function``, with its own JSON schemas (a toolset edits them)."""
    return replace(
        schema,
        function=function,
        json_schema=_json_copy(schema.json_schema),
        return_schema=_json_copy(schema.return_schema),
        positional_fields=list(schema.positional_fields),
    )


def _json_copy(schema: dict[str, Any]) -> Any:
    """A deep copy of JSON data, through pydantic-core's JSON (4x faster than deepcopy)."""
    return pydantic_core.from_json(pydantic_core.to_json(schema))
