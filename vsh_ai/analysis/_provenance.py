"""Read provenance: which paths' bytes may have flowed into which, within one transaction.

Sharing decided by a path's *name* leaks as soon as bytes change names: a program that
moves ``keys/a.txt`` to ``public/a.txt`` and reads or edits it there would have the key
shown as public content. This module decides by provenance instead, conservatively:

- every blob ever observed at a path (canonical before/after, effects' before/after,
  content reads, captured contents) links that path with every other path that held the
  same blob: equal bytes are one content, whatever the name;
- a rename or copy links its source and destination both ways, and the paths below
  them when a directory moves;
- a content read flows into every version the program wrote afterwards and into the
  final (canonical) after-state of every path the transaction writes: the bytes may be
  inside, transformed or not (``mv && cat``, ``mv && echo >>``, ``sed -i`` through a
  temp file and a rename are all read, write and rename steps).

VSH "stamp:" tokens (size and mode, not a content hash) identify nothing and are not
used; directory listings are names, not contents. Over-approximation is the intent: a
path wrongly counted as unshared costs a human review, never a leak.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable

from .._evidence import Evidence, Node

__all__ = ("content_sources", "derived_paths", "read_origins", "unshared_paths")

_READ_ONLY = frozenset(("metadata_read", "directory_read", "content_read"))
_LINKING = frozenset(("rename", "copy"))

# Graph nodes: a path, a blob, or a virtual node ("write k" in program order, "final").
_Key = tuple[str, str]


def _blob(node: Node | None) -> str | None:
    """The content-addressed id of a file-like node (None for directories and stamps)."""
    if node is None or node.kind == "directory":
        return None
    return node.blob


class _Flows:
    """A directed graph over paths, blobs and program-order write nodes."""

    def __init__(self, evidence: Evidence) -> None:
        self.edges: dict[_Key, set[_Key]] = {}
        self.paths: dict[str, None] = {}
        self._build(evidence)

    def node(self, key: _Key) -> _Key:
        self.edges.setdefault(key, set())
        if key[0] == "p":
            self.paths[key[1]] = None
        return key

    def edge(self, source: _Key, target: _Key) -> None:
        self.node(target)
        self.edges.setdefault(self.node(source), set()).add(target)

    def both(self, a: _Key, b: _Key) -> None:
        self.edge(a, b)
        self.edge(b, a)

    def hold(self, path: str, blob: str | None) -> None:
        """``path`` held ``blob`` at some point: same bytes, same content."""
        self.node(("p", path))
        if blob:
            self.both(("p", path), ("b", blob))

    def _build(self, evidence: Evidence) -> None:
        for change in evidence.changes:
            self.hold(change.path, _blob(change.before))
            self.hold(change.path, _blob(change.after))
        for content in evidence.contents:
            self.hold(content.path, content.blob)
        links: list[tuple[str, str]] = []
        for effect in evidence.effects:
            blobs = [_blob(effect.before), _blob(effect.after)]
            if effect.operation == "content_read":
                blobs.append(effect.observed_content)
            for path in effect.paths:
                for blob in blobs:
                    self.hold(path, blob)
            if effect.operation in _LINKING and len(effect.paths) >= 2:
                links.append((effect.paths[0], effect.paths[-1]))
            elif effect.operation not in _READ_ONLY and len(effect.paths) > 1:
                # An operation this module does not know that names several paths:
                # assume its bytes may move between all of them.
                first = effect.paths[0]
                links.extend((first, other) for other in effect.paths[1:])
        self._link(links)
        self._reads(evidence)

    def _link(self, links: list[tuple[str, str]]) -> None:
        """Rename and copy: source and destination, and everything below them, both ways."""
        known = sorted(self.paths)
        for source, destination in links:
            self.both(("p", source), ("p", destination))
            for old, new in ((source, destination), (destination, source)):
                prefix = old + "/"
                # Sorted paths under ``prefix`` are one contiguous run starting here.
                index = bisect_left(known, prefix)
                while index < len(known) and known[index].startswith(prefix):
                    path = known[index]
                    self.both(("p", path), ("p", new + path[len(old) :]))
                    index += 1

    def _reads(self, evidence: Evidence) -> None:
        """A content read flows into every later written version and every final state.

        Program-order write nodes form a chain (``write k`` feeds ``write k+1``), so a read
        reaches all later writes through one edge: linear in the number of effects.
        """
        writes = [
            effect
            for effect in evidence.effects
            if effect.operation not in _READ_ONLY and effect.after is not None
        ]
        writes.sort(key=lambda effect: effect.sequence)
        sequences = [effect.sequence for effect in writes]
        final: _Key = self.node(("final", ""))
        for index, effect in enumerate(writes):
            step: _Key = ("write", str(index))
            for path in effect.paths[-1:]:
                self.edge(step, ("p", path))
            self.edge(step, ("write", str(index + 1)) if index + 1 < len(writes) else final)
        for change in evidence.changes:
            if change.after is not None:
                self.edge(final, ("p", change.path))
        for effect in evidence.effects:
            if effect.operation != "content_read":
                continue
            later = bisect_right(sequences, effect.sequence)
            for path in effect.paths:
                self.edge(("p", path), final)
                if later < len(writes):
                    self.edge(("p", path), ("write", str(later)))

    def reach(self, starts: Iterable[_Key]) -> set[_Key]:
        """Every node reachable from ``starts`` (the starts included)."""
        seen = set(starts)
        stack = list(seen)
        while stack:
            for target in self.edges.get(stack.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return seen

    def _condensed(self) -> tuple[list[_Key], list[int], list[set[int]]]:
        """Nodes, each node's strongly connected component, and the component DAG.

        Tarjan numbers components in reverse topological order: sources come last.
        """
        nodes = list(self.edges)
        index_of = {key: i for i, key in enumerate(nodes)}
        successors = [[index_of[t] for t in self.edges[key]] for key in nodes]
        component = _components(successors)
        count = max(component, default=-1) + 1
        dag: list[set[int]] = [set() for _ in range(count)]
        for i, targets in enumerate(successors):
            for j in targets:
                if component[i] != component[j]:
                    dag[component[i]].add(component[j])
        return nodes, component, dag

    def derived(self) -> frozenset[str]:
        """Paths that another path's bytes may reach (linear: one source and a flag)."""
        nodes, component, dag = self._condensed()
        count = len(dag)
        first: list[str | None] = [None] * count
        many = [False] * count
        for i, key in enumerate(nodes):
            if key[0] == "p":
                c = component[i]
                if first[c] is None:
                    first[c] = key[1]
                else:
                    many[c] = True  # two paths in one cycle reach each other
        for c in range(count - 1, -1, -1):
            for d in dag[c]:
                if many[c] or (first[c] is not None and first[d] not in (None, first[c])):
                    many[d] = True
                if first[d] is None:
                    first[d] = first[c]
        paths = [(i, key[1]) for i, key in enumerate(nodes) if key[0] == "p"]
        return frozenset(path for i, path in paths if many[component[i]])

    def sources(self) -> dict[str, frozenset[str]]:
        """For every path, the paths that reach it: strongly connected components, then
        bitsets propagated in topological order (linear in the graph times paths/64)."""
        nodes, component, dag = self._condensed()
        count = len(dag)
        own = [0] * count
        path_bit: dict[str, int] = {}
        for i, key in enumerate(nodes):
            if key[0] == "p":
                bit = 1 << len(path_bit)
                path_bit[key[1]] = bit
                own[component[i]] |= bit
        reached = own[:]
        for c in range(count - 1, -1, -1):
            for d in dag[c]:
                reached[d] |= reached[c]
        names = list(path_bit)
        decoded: dict[int, frozenset[str]] = {}
        out: dict[str, frozenset[str]] = {}
        for i, key in enumerate(nodes):
            if key[0] != "p":
                continue
            c = component[i]
            if c not in decoded:
                decoded[c] = frozenset(_members(reached[c], names))
            out[key[1]] = decoded[c]
        return out


def _members(bits: int, names: list[str]) -> Iterable[str]:
    while bits:
        lowest = bits & -bits
        yield names[lowest.bit_length() - 1]
        bits ^= lowest


def _components(successors: list[list[int]]) -> list[int]:
    """Tarjan's strongly connected components, iteratively; reverse topological numbering."""
    count = len(successors)
    index = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    component = [-1] * count
    stack: list[int] = []
    counter = 0
    found = 0
    for root in range(count):
        if index[root] >= 0:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack[node] = True
            recurse = False
            targets = successors[node]
            while child < len(targets):
                target = targets[child]
                child += 1
                if index[target] < 0:
                    work.append((node, child))
                    work.append((target, 0))
                    recurse = True
                    break
                if on_stack[target]:
                    low[node] = min(low[node], index[target])
            if recurse:
                continue
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = found
                    if member == node:
                        break
                found += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component


def _partial(evidence: Evidence) -> bool:
    """Effects may be missing: provenance cannot be traced, so everything may mix."""
    return not evidence.evidence_complete or evidence.evidence_truncated


def content_sources(evidence: Evidence) -> dict[str, frozenset[str]]:
    """For every path the evidence names: the paths whose bytes may have flowed into it.

    Keys cover every changed, read or otherwise touched path (directories included);
    each value contains the path itself. Conservative: see the module docstring. When
    VSH reports incomplete or truncated evidence, every path may hold every path's bytes.

    The result can be quadratic in size (a program that reads n files before writing n
    others gives each written path n sources); :func:`unshared_paths` stays linear.
    """
    flows = _Flows(evidence)
    if _partial(evidence):
        everything = frozenset(flows.paths)
        return dict.fromkeys(flows.paths, everything)
    return flows.sources()


def derived_paths(evidence: Evidence) -> frozenset[str]:
    """Paths whose bytes may come (in part) from another path: ``content_sources(e)[p]``
    holds more than ``p`` itself. Linear in the evidence, unlike the full source sets.

    With incomplete or truncated evidence every path counts as derived once there are two.
    """
    flows = _Flows(evidence)
    if _partial(evidence):
        return frozenset(flows.paths) if len(flows.paths) > 1 else frozenset()
    return flows.derived()


def unshared_paths(evidence: Evidence, is_shared: Callable[[str], bool]) -> frozenset[str]:
    """Paths whose content must not reach a model, given a by-name sharing decision.

    A path is unshared when ``is_shared`` refuses its name, or when bytes that were ever
    at such a path may have flowed into it (renamed, moved, copied, read then written).
    ``is_shared`` raising counts as refusing (fail closed). With incomplete or
    truncated evidence every path is unshared as soon as one is.
    """
    flows = _Flows(evidence)

    def refused(path: str) -> bool:
        try:
            return not is_shared(path)
        except Exception:
            return True

    roots = [("p", path) for path in flows.paths if refused(path)]
    if roots and _partial(evidence):
        return frozenset(flows.paths)  # untraceable: one unshared path taints them all
    return frozenset(key[1] for key in flows.reach(roots) if key[0] == "p")


def read_origins(evidence: Evidence) -> dict[str, frozenset[str]]:
    """For every path the program read (content or metadata): the paths its bytes were at
    before renames and copies moved them there, itself included.

    Followed backwards in program order through every rename or copy whose destination is
    the path or a folder above it (a moved folder moves what is inside), so a protected
    file moved out of its glob, read and moved back is still a read of the protected file.
    Linear in reads times the depth of each path times the renames chained (bounded).
    """
    moves: dict[str, list[tuple[int, str]]] = {}  # destination -> (sequence, source)
    for effect in evidence.effects:
        if effect.operation in _LINKING and len(effect.paths) >= 2:
            moves.setdefault(effect.paths[-1], []).append((effect.sequence, effect.paths[0]))
    out: dict[str, frozenset[str]] = {}
    for effect in evidence.effects:
        if effect.operation not in _READ_ONLY:
            continue
        for path in effect.paths:
            found = {path}
            if moves:
                _trace(path, effect.sequence, moves, found, 0)
            out[path] = out.get(path, frozenset()) | frozenset(found)
    return out


def _trace(
    path: str, sequence: int, moves: dict[str, list[tuple[int, str]]], found: set[str], depth: int
) -> None:
    if depth > 32:
        return
    parts = path.split("/")
    for end in range(len(parts), 0, -1):
        head = "/".join(parts[:end])
        for moved_at, source in moves.get(head, ()):
            if moved_at < sequence:
                origin = source + path[len(head) :]
                if origin not in found:
                    found.add(origin)
                    _trace(origin, moved_at, moves, found, depth + 1)
