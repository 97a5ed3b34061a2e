#!/usr/bin/env python3
"""Names with internal linkage that two files of one unity target share (docs/architecture.md).

Each library layer (src/<layer>/, the kernels excepted), each test program (tests/<dir>/) and the
atto program (apps/atto/) is compiled as a few unity sources: several .cpp files in one
translation unit. Two files that each define a helper of the same name in an anonymous namespace
(or `static`) then share one scope: the compiler rejects a redefinition, but a second overload
with other parameter types compiles, and a call may silently pick the other file's function.
This check lists every such name, so that neither can happen:

    tools/check_unity.py [ROOT]     # exit 1 and a list when two files share a name

A name is a function, class, struct, enum, alias or variable declared directly in an anonymous
namespace, or a `static` one at namespace scope, keyed by the named namespaces around it.
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_sizes import strip  # noqa: E402  (comments and literals blanked)

KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "decltype", "alignof", "static_assert",
            "operator", "requires", "noexcept", "alignas"}


def declared_name(header):
    """The name a namespace-scope declaration (text up to its '{', ';' or '=') declares, or None."""
    h = re.sub(r"^template ?<.*?> ?", "", re.sub(r"\s+", " ", header).strip())  # a template's parameters
    if not h or h.startswith(("using namespace", "namespace", "extern \"", "friend ")):
        return None
    m = re.match(r"^using (\w+) =", h)
    if m:
        return m.group(1)
    if h.startswith("using "):
        return None  # a using-declaration names an entity declared elsewhere
    m = re.match(r"^(?:enum (?:class |struct )?|struct |class |union )(\w+)", h)
    if m:
        return m.group(1)
    # A function: the identifier before the first '(' at bracket depth 0.
    depth = 0
    for i, c in enumerate(h):
        if c in "<[":
            depth += 1
        elif c in ">]":
            depth -= 1
        elif c == "(" and depth <= 0:
            m = re.search(r"(~?[\w:]+)\s*$", h[:i])
            name = m.group(1) if m else None
            # TEST(...), INSTANTIATE_...(...); Class::member(...) defines what the class declared
            if not name or name in KEYWORDS or name.isupper() or "::" in name:
                return None
            return name
    # A variable: the last identifier before '=' or '{' or '['.
    m = re.search(r"([\w:]+)\s*(?:\[[^\]]*\]\s*)?$", h)
    return m.group(1) if m and m.group(1) not in KEYWORDS and "::" not in m.group(1) else None


def internal_names(text):
    """(named-namespace path, name) of every internal-linkage name declared in the file."""
    s = strip(text)
    s = re.sub(r"^\s*#.*$", "", s, flags=re.M)  # preprocessor lines
    out = set()
    stack = []  # one entry per open brace: a namespace name ('' when anonymous) or None
    start = 0  # where the current declaration's text began
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in "{;}":
            header = s[start:i]
            at_ns = all(x is not None for x in stack)
            if c == "{":
                m = re.search(r"(?:^|\s)namespace\s*([\w:]*)\s*$", header)
                if m and at_ns:
                    stack.append(m.group(1))
                else:
                    if at_ns:
                        record(out, stack, header)
                    stack.append(None)
                    # skip to the matching brace: nothing inside is at namespace scope
                    depth = 1
                    j = i + 1
                    while j < n and depth:
                        depth += {"{": 1, "}": -1}.get(s[j], 0)
                        j += 1
                    stack.pop()
                    i = j
                    start = i
                    continue
            elif c == ";" and at_ns:
                record(out, stack, header)
            elif c == "}":
                if stack:
                    stack.pop()
            start = i + 1
        i += 1
    return out


def record(out, stack, header):
    anonymous = "" in stack
    is_static = re.match(r"\s*(?:inline\s+)?static\b", header) is not None
    if not (anonymous or is_static):
        return
    before_eq = header.split("=")[0]
    # A variable's initialiser follows its '='; a function's default arguments follow its '('.
    head = header if "(" in before_eq or "operator" in header else before_eq
    if re.match(r"\s*typedef\b", head):
        return
    name = declared_name(head)
    if name:
        out.add(("::".join(x for x in stack if x), name))


def unity_folders(root):
    for layer in sorted((root / "src").iterdir()):
        if layer.is_dir() and layer.name != "kernels":
            yield layer
    for d in sorted((root / "tests").iterdir()):
        if d.is_dir():
            yield d
    yield root / "apps" / "atto"


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    problems = []
    for folder in unity_folders(root):
        where = defaultdict(set)
        for f in sorted(folder.glob("*.cpp")):
            for key in internal_names(f.read_text()):
                where[key].add(f.relative_to(root).as_posix())
        for (ns, name), files in sorted(where.items()):
            if len(files) > 1:
                problems.append(f"{(ns + '::') if ns else ''}{name}: {', '.join(sorted(files))}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} name(s) with internal linkage defined in two files of one unity target: "
              "rename one, or move a shared helper into a header (docs/architecture.md)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
